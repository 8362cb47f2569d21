"""conveyor-pipe --format openai-batch: a 100-line file in OpenAI's Batch format runs against the
real server and comes back as 100 output lines in OpenAI's format; lines conveyor cannot run get
their 400 answer; the mapping itself is checked without a server."""
import io
import json
import pathlib

import pytest

from conveyor_client import openai_batch
from conveyor_client.protocol import SUBMIT_DEFAULTS
from conveyor_client.pipe import parse_args, run
from test_e2e import Server

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def batch_lines(n):
    lines = []
    for i in range(n):
        if i % 2 == 0:
            body = {"model": "any", "messages": [{"role": "system", "content": "Be brief."},
                                                 {"role": "user", "content": [{"type": "text", "text": "Say %d." % i}]}],
                    "max_tokens": 6, "temperature": 0}
            if i % 10 == 0:
                body["response_format"] = {"type": "json_schema", "json_schema": {"name": "s", "schema": SCHEMA}}
                body["max_tokens"] = 20
            lines.append({"custom_id": "req-%d" % i, "method": "POST", "url": "/v1/chat/completions", "body": body})
        else:
            lines.append({"custom_id": "req-%d" % i, "method": "POST", "url": "/v1/completions",
                          "body": {"model": "any", "prompt": "Number %d is" % i, "max_tokens": 5, "temperature": 0.7,
                                   "seed": i, "stop": "\n"}})
    return lines


@pytest.fixture(scope="module")
def server():
    s = Server("--no-journal")
    try:
        yield s
        assert s.stop(timeout=30) == 0
    finally:
        s.kill()


def run_batch(server, lines, *flags):
    stdin = io.StringIO("".join((l if isinstance(l, str) else json.dumps(l)) + "\n" for l in lines))
    out, err = io.StringIO(), io.StringIO()
    args = parse_args(["--router", server.router, "--pub", server.pub, "--format", "openai-batch", "--quiet", *flags])
    status = run(args, stdin, out, err)
    return status, [json.loads(l) for l in out.getvalue().splitlines()]


def test_a_100_line_batch_file_round_trips(server):
    lines = batch_lines(100)
    status, results = run_batch(server, lines)
    assert status == 0
    assert sorted(r["custom_id"] for r in results) == sorted(l["custom_id"] for l in lines)
    by_id = {r["custom_id"]: r for r in results}
    for line in lines:
        r = by_id[line["custom_id"]]
        assert r["error"] is None and r["response"]["status_code"] == 200, r
        assert r["id"] == "batch_req_" + r["response"]["request_id"]
        body = r["response"]["body"]
        usage = body["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
        if line["url"] == "/v1/chat/completions":
            assert body["object"] == "chat.completion"
            content = body["choices"][0]["message"]["content"]
            if "response_format" in line["body"]:
                assert body["choices"][0]["finish_reason"] == "stop"
                assert isinstance(json.loads(content)["ok"], bool)
        else:
            assert body["object"] == "text_completion" and "\n" not in body["choices"][0]["text"]
    # The same greedy chat line gives what the server gives it over ZeroMQ.
    with server.client() as c:
        want = c.generate(messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say 2."}],
                          max_tokens=6, temperature=0)
    assert by_id["req-2"]["response"]["body"]["choices"][0]["message"]["content"] == want


def test_lines_that_cannot_run_get_their_own_answer(server):
    good = batch_lines(2)
    bad = [
        "not json",
        {"custom_id": "u", "method": "POST", "url": "/v1/embeddings", "body": {}},
        {"custom_id": "f", "method": "POST", "url": "/v1/chat/completions",
         "body": {"messages": [{"role": "user", "content": "x"}], "max_tokenz": 3}},
        {"custom_id": "t", "method": "POST", "url": "/v1/completions", "body": {"prompt": "x", "max_tokens": 0}},
    ]
    status, results = run_batch(server, good + bad)
    assert status == 1 and len(results) == 6
    by_id = {r["custom_id"]: r for r in results}
    assert by_id["req-0"]["response"]["status_code"] == 200
    assert by_id["u"]["response"]["status_code"] == 400 and "url" == by_id["u"]["response"]["body"]["error"]["param"]
    assert "max_tokenz" in by_id["f"]["response"]["body"]["error"]["message"]
    t = by_id["t"]["response"]  # refused by the server itself
    assert t["status_code"] == 400 and t["body"]["error"]["param"] == "max_tokens", t
    assert by_id[None]["response"]["status_code"] == 400


def test_n_choices_equal_single_lines_with_derived_seeds(server):
    """A line with n = 3 and seed 5: one output line whose choice i is what a line with seed 5 + i
    gives; the prompt is counted once (the later choices run after the first and find it in the
    prefix cache); a line with n and no seed gets n choices too."""
    body = {"prompt": "Here is a list of fruits, one per line, with a short note on each: apple, pear, plum, " * 2,
            "max_tokens": 8, "temperature": 0.9, "seed": 5}
    lines = [{"custom_id": "n3", "url": "/v1/completions", "body": dict(body, n=3)},
             {"custom_id": "free", "url": "/v1/chat/completions",
              "body": {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "n": 2}}]
    lines += [{"custom_id": "s%d" % i, "url": "/v1/completions", "body": dict(body, seed=5 + i)} for i in range(3)]
    status, results = run_batch(server, lines)
    assert status == 0 and len(results) == 5
    by_id = {r["custom_id"]: r["response"]["body"] for r in results}
    n3 = by_id["n3"]
    assert [c["index"] for c in n3["choices"]] == [0, 1, 2]
    assert [c["text"] for c in n3["choices"]] == [by_id["s%d" % i]["choices"][0]["text"] for i in range(3)]
    assert n3["usage"]["prompt_tokens"] == by_id["s0"]["usage"]["prompt_tokens"]
    assert n3["usage"]["completion_tokens"] == sum(by_id["s%d" % i]["usage"]["completion_tokens"] for i in range(3))
    assert len(by_id["free"]["choices"]) == 2 and all(c["message"]["content"] for c in by_id["free"]["choices"])
    base = [r for r in results if r["custom_id"] == "n3"][0]["response"]["request_id"]
    with server.client() as c:  # the later choices found the first one's prompt in the prefix cache
        for i in (1, 2):
            done = [e for e in c.fetch("%s/%d" % (base, i))["events"] if e["kind"] == "done"][0]
            assert done["usage"]["cached_tokens"] >= 16, done


def test_logprobs_equal_the_http_apis(server):
    """A Batch line with logprobs gets the logprobs the HTTP API gives the same body (token
    strings from the tokens events' bytes, alternatives, text offsets), chat and completions."""
    from test_openai_http import HttpServer  # noqa: E402
    chat = {"messages": [{"role": "user", "content": "Name three colors."}], "max_tokens": 6, "temperature": 0,
            "logprobs": True, "top_logprobs": 3}
    comp = {"prompt": "The capital of France is", "max_tokens": 6, "temperature": 0, "logprobs": 2}
    lines = [{"custom_id": "c", "url": "/v1/chat/completions", "body": chat},
             {"custom_id": "p", "url": "/v1/completions", "body": comp},
             {"custom_id": "p2", "url": "/v1/completions", "body": dict(comp, n=2, temperature=0.8, seed=3)}]
    status, results = run_batch(server, lines)
    assert status == 0
    by_id = {r["custom_id"]: r["response"]["body"] for r in results}
    http = HttpServer("--no-journal")
    try:
        for cid, path, body in (("c", "/v1/chat/completions", chat), ("p", "/v1/completions", comp),
                                ("p2", "/v1/completions", dict(comp, n=2, temperature=0.8, seed=3))):
            code, want = http.post(path, body)
            assert code == 200, want
            got = by_id[cid]
            assert len(got["choices"]) == len(want["choices"])
            for g, w in zip(got["choices"], want["choices"]):
                assert g.get("text", g.get("message")) == w.get("text", w.get("message")), cid
                assert json.dumps(g["logprobs"], sort_keys=True) == json.dumps(w["logprobs"], sort_keys=True), cid
        assert by_id["c"]["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0]["token"]
        assert http.stop(timeout=30) == 0
    finally:
        http.kill()


def test_the_mapping_reads_openai_bodies():
    cid, url, model, job = openai_batch.to_submit(
        {"custom_id": "a", "method": "POST", "url": "/v1/completions",
         "body": {"model": "m", "prompt": ["hi"], "stop": "x", "top_k": 5}})
    assert (cid, url, model) == ("a", "/v1/completions", "m")
    assert job == {"prompt": "hi", "max_tokens": 16, "stop": ["x"], "top_k": 5}
    _, _, _, job = openai_batch.to_submit(
        {"custom_id": "b", "url": "/v1/chat/completions",
         "body": {"messages": [{"role": "developer", "content": "s"}], "max_completion_tokens": 7,
                  "response_format": {"type": "json_schema", "json_schema": {"schema": SCHEMA}}}})
    assert job["messages"] == [{"role": "system", "content": "s"}] and job["max_tokens"] == 7
    assert json.loads(job["response_format"]["schema"]) == SCHEMA
    _, _, _, job = openai_batch.to_submit(
        {"custom_id": "p", "url": "/v1/completions",
         "body": {"prompt": "hi", "presence_penalty": 0.5, "frequency_penalty": 1, "repetition_penalty": 1.1,
                  "logit_bias": {"50256": -100}}})
    assert (job["presence_penalty"], job["frequency_penalty"], job["repetition_penalty"]) == (0.5, 1, 1.1)
    assert job["logit_bias"] == {"50256": -100}  # the server reads string ids, as JSON has them
    for body, param in [({"messages": [{"role": "user", "content": "x"}], "n": 17}, "n"),
                        ({"messages": [{"role": "user", "content": "x"}], "n": "2"}, "n"),
                        ({"messages": [{"role": "user", "content": "x"}], "n": 0}, "n"),
                        ({"messages": [{"role": "user", "content": "x"}], "logprobs": "yes"}, "logprobs"),
                        ({"messages": []}, "messages"),
                        ({"messages": [{"role": "user", "content": "x"}], "response_format": "json"}, "response_format"),
                        ({"messages": [{"role": "user", "content": "x"}],
                          "response_format": {"type": "json_schema", "json_schema": "x"}}, "response_format.json_schema")]:
        with pytest.raises(openai_batch.LineError) as e:
            openai_batch.to_submit({"custom_id": "c", "url": "/v1/chat/completions", "body": body})
        assert e.value.param == param


BODIES = json.loads((pathlib.Path(__file__).resolve().parents[3] / "tests" / "data" / "openai_bodies.json")
                    .read_text(encoding="utf-8"))["cases"]


def submit_map(job):
    """The job map as the shared vectors write it: only what differs from the protocol's defaults
    (the input and max_tokens always), logit_bias keyed by strings; how the answer travels (stream,
    token_bytes) is each endpoint's business."""
    m = {}
    for k, v in job.items():
        if k in ("stream", "token_bytes"):
            continue
        if k == "logit_bias":
            v = {str(int(t)): b for t, b in v.items()}
        if k != "max_tokens" and (v == SUBMIT_DEFAULTS.get(k, object()) or v in ({}, [])):
            continue
        m[k] = v
    return m


@pytest.mark.parametrize("case", BODIES, ids=[c["name"] for c in BODIES])
def test_the_shared_openai_vectors(case):
    """tests/data/openai_bodies.json: the Batch mapping and the HTTP intake
    (tests/unit/transport/openai_mapping_test.cpp) read every body alike, or differ as it says."""
    line = {"custom_id": "c", "method": "POST", "url": case["url"], "body": case["body"]}
    batch = case.get("batch")
    error = batch["error"] if isinstance(batch, dict) else case.get("error") if batch != "server" else None
    if error:
        with pytest.raises(openai_batch.LineError) as e:
            openai_batch.to_submit(line)
        assert e.value.param == error
        return
    _, _, _, job = openai_batch.to_submit(line)
    if batch == "server":  # passed on as sent: the server's decoder refuses it by name
        assert case["error"].split(".")[0] in job
        return
    assert submit_map(job) == case["submit"]


def test_what_a_batch_passes_on_the_server_refuses_by_name(server):
    from conveyor_client import ConveyorError
    cases = [c for c in BODIES if c.get("batch") == "server"]
    assert cases
    with server.client() as client:
        for case in cases:
            _, _, _, job = openai_batch.to_submit({"custom_id": "c", "url": case["url"], "body": case["body"]})
            with pytest.raises(ConveyorError) as e:
                client.submit(**job)
            assert e.value.code == "bad_request" and e.value.field == case["error"], case["name"]
