"""The OpenAI-compatible HTTP intake, driven by the official `openai` package (and plain urllib
for the malformed requests the package would never send) against the real `conveyor serve`."""
import json
import re
import time
import urllib.error
import urllib.request

import pytest

openai = pytest.importorskip("openai")

from test_e2e import Server  # noqa: E402  (skips the module when CONVEYOR_BIN is not set)

HTTP_LINE = re.compile(r"OpenAI-compatible HTTP at (http://\S+)/v1 \(model name '([^']+)'\)")
PROMPT = "The capital of France is"
MESSAGES = [{"role": "user", "content": "Name three colors."}]


class HttpServer(Server):
    def __init__(self, *extra):
        super().__init__("--http-port", "0", *extra)
        deadline = time.monotonic() + 30
        self.base = None
        while self.base is None:
            for line in list(self.log):
                m = HTTP_LINE.search(line)
                if m:
                    self.base, self.model = m.groups()
            if self.base is None:
                assert time.monotonic() < deadline, "no HTTP line in the log:\n" + self.logs()
                time.sleep(0.05)

    def openai(self, **kw):
        return openai.OpenAI(base_url=self.base + "/v1", api_key="unused", max_retries=0, **kw)

    def post(self, path, body, headers=None):
        """(status, parsed JSON body) of a raw POST; body: bytes or a JSON-able object."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def get(self, path):
        try:
            with urllib.request.urlopen(self.base + path, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def http_server():
    s = HttpServer("--no-journal")
    try:
        yield s
        code = s.stop(timeout=30)
        assert code == 0, "exit code %s; log:\n%s" % (code, s.logs())
    finally:
        s.kill()


def zmq_text(server, **job):
    with server.client() as c:
        return c.generate(**job)


def test_chat_completion_matches_the_zeromq_protocol(http_server):
    client = http_server.openai()
    r = client.chat.completions.create(model=http_server.model, messages=MESSAGES, max_tokens=16, temperature=0)
    assert r.object == "chat.completion" and r.model == http_server.model
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.completion_tokens >= 1 and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    same = zmq_text(http_server, messages=MESSAGES, max_tokens=16, temperature=0)
    assert r.choices[0].message.content == same


def test_chat_stream_with_usage_concatenates_to_the_whole_answer(http_server):
    client = http_server.openai()
    whole = client.chat.completions.create(model=http_server.model, messages=MESSAGES, max_tokens=20, temperature=0)
    chunks = list(client.chat.completions.create(model=http_server.model, messages=MESSAGES, max_tokens=20, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].choices[0].finish_reason == whole.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert len({c.id for c in chunks}) == 1


def test_completions_stream_and_not(http_server):
    client = http_server.openai()
    r = client.completions.create(model=http_server.model, prompt=PROMPT, max_tokens=12, temperature=0)
    assert r.object == "text_completion"
    assert r.choices[0].text == zmq_text(http_server, prompt=PROMPT, max_tokens=12, temperature=0)
    parts = list(client.completions.create(model=http_server.model, prompt=PROMPT, max_tokens=12, temperature=0, stream=True))
    assert "".join(p.choices[0].text for p in parts) == r.choices[0].text
    assert parts[-1].choices[0].finish_reason == r.choices[0].finish_reason
    # Default max_tokens is OpenAI's 16 for completions.
    d = client.completions.create(model=http_server.model, prompt=PROMPT, temperature=0, extra_body={"ignore_eos": True})
    assert d.usage.completion_tokens == 16


def test_top_logprobs_in_both_endpoints(http_server):
    client = http_server.openai()
    r = client.chat.completions.create(model=http_server.model, messages=MESSAGES, max_tokens=6, temperature=0,
                                       logprobs=True, top_logprobs=5)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for entry in content:
        assert len(entry.top_logprobs) == 5
        lps = [a.logprob for a in entry.top_logprobs]
        assert lps == sorted(lps, reverse=True) and all(lp <= 0 for lp in lps)
        # Greedy: the chosen token is the most likely one.
        assert entry.token == entry.top_logprobs[0].token and abs(entry.logprob - lps[0]) < 1e-6
        assert bytes(entry.bytes).decode("utf-8", "replace") == entry.token
    assert "".join(e.token for e in content) == r.choices[0].message.content
    c = client.completions.create(model=http_server.model, prompt=PROMPT, max_tokens=4, temperature=0, logprobs=3)
    lp = c.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 4
    assert all(len(t) == 3 for t in lp.top_logprobs)
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(4)]


def test_models_and_health(http_server):
    models = http_server.openai().models.list()
    assert [m.id for m in models.data] == [http_server.model]
    assert http_server.get("/health") == (200, {"status": "serving", "reason": None, "model": http_server.model})


def test_a_retried_request_id_runs_once(http_server):
    body = {"messages": MESSAGES, "max_tokens": 8, "temperature": 1.0}
    with http_server.client() as c:
        before = c.stats()["jobs_accepted"]
    s1, r1 = http_server.post("/v1/chat/completions", body, {"X-Request-Id": "retry-me-1"})
    s2, r2 = http_server.post("/v1/chat/completions", body, {"X-Request-Id": "retry-me-1"})
    assert s1 == s2 == 200
    assert r1["id"] == r2["id"] == "chatcmpl-retry-me-1"
    assert r1["choices"] == r2["choices"] and r1["usage"] == r2["usage"]
    with http_server.client() as c:
        assert c.stats()["jobs_accepted"] == before + 1
    # The same through the openai package's streaming call: the retry replays the stored events.
    client = http_server.openai()
    hdr = {"Idempotency-Key": "retry-me-2"}
    a = "".join(ch.choices[0].delta.content or "" for ch in client.chat.completions.create(
        messages=MESSAGES, model=http_server.model, max_tokens=8, stream=True, extra_headers=hdr) if ch.choices)
    b = "".join(ch.choices[0].delta.content or "" for ch in client.chat.completions.create(
        messages=MESSAGES, model=http_server.model, max_tokens=8, stream=True, extra_headers=hdr) if ch.choices)
    assert a == b and a


@pytest.mark.parametrize("body,param,fragment", [
    (b'{"messages": [', None, "not valid JSON"),
    (b'[1, 2]', None, "JSON object"),
    ({"messages": "hi"}, "messages", "non-empty array"),
    ({"messages": MESSAGES, "max_tokens": "8"}, "max_tokens", "integer"),
    ({"messages": MESSAGES, "temperature": -1}, "temperature", "temperature"),
    ({"messages": MESSAGES, "stream": "yes"}, "stream", "true or false"),
    ({"messages": MESSAGES, "max_tokenz": 8}, "max_tokenz", "unknown field"),
    ({"messages": MESSAGES, "n": 17}, "n", "[1, 16]"),
    ({"messages": MESSAGES, "top_logprobs": 3}, "top_logprobs", "needs logprobs"),
    ({"messages": MESSAGES, "logprobs": True, "top_logprobs": 21}, "top_logprobs", "[0, 20]"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", "role"),
    ({"messages": MESSAGES, "response_format": {"type": "json_schema", "json_schema": {"schema": 3}}},
     "response_format.json_schema.schema", "JSON schema"),
    ({"messages": MESSAGES, "response_format": {"type": "xml"}}, "response_format.type", "json_object"),
    # 100k levels of brackets: refused while parsing, before anything recurses over them
    (b'{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": '
     b'{"schema": {"a": ' + b"[" * 100000 + b"]" * 100000 + b'}}}}', None, "nests deeper"),
])
def test_bad_requests_get_400_naming_the_problem(http_server, body, param, fragment):
    status, err = http_server.post("/v1/chat/completions", body)
    assert status == 400, err
    assert fragment in err["error"]["message"] and err["error"]["type"] == "invalid_request_error"
    assert err["error"]["param"] == param
    assert http_server.get("/health")[0] == 200  # still serving


def test_bad_input_through_the_openai_package(http_server):
    client = http_server.openai()
    with pytest.raises(openai.BadRequestError, match="max_tokens"):
        client.completions.create(model=http_server.model, prompt=PROMPT, max_tokens=0)
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    status, err = http_server.post("/v1/chat/completions", {"messages": MESSAGES}, {"X-Request-Id": "bad id!"})
    assert status == 400 and err["error"]["param"] == "X-Request-Id"
    assert http_server.get("/nope")[0] == 404


def test_a_body_over_the_limit_gets_400(http_server):
    big = {"messages": [{"role": "user", "content": "x" * (9 << 20)}]}
    status, err = http_server.post("/v1/chat/completions", big)
    assert status == 400 and "limit" in err["error"]["message"] and "--http-max-body" in err["error"]["message"]
    r = http_server.openai().chat.completions.create(model=http_server.model, messages=MESSAGES, max_tokens=2)
    assert r.choices[0].message.content is not None


def test_a_client_that_goes_away_cancels_its_stream(http_server):
    with http_server.client() as c:
        before = c.stats()["finished"]["cancelled"]
    client = http_server.openai()
    stream = client.chat.completions.create(model=http_server.model, messages=MESSAGES, max_tokens=4000,
                                            stream=True, extra_body={"ignore_eos": True})
    for i, _ in enumerate(stream):
        if i == 3:
            break
    stream.close()
    deadline = time.monotonic() + 30
    with http_server.client() as c:
        while c.stats()["finished"]["cancelled"] == before:
            assert time.monotonic() < deadline, "the job of a closed stream was not cancelled"
            time.sleep(0.2)


def test_a_client_that_goes_away_cancels_its_whole_answer(http_server):
    """Not streamed: the server notices the closed socket while the job runs and cancels it."""
    import socket
    with http_server.client() as c:
        before = c.stats()["finished"]["cancelled"]
    host, port = http_server.base[len("http://"):].split(":")
    body = json.dumps({"messages": MESSAGES, "max_tokens": 4000, "ignore_eos": True}).encode()
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        time.sleep(0.5)  # the job runs
    deadline = time.monotonic() + 30
    with http_server.client() as c:
        while c.stats()["finished"]["cancelled"] == before:
            assert time.monotonic() < deadline, "the job of a client that went away was not cancelled"
            time.sleep(0.2)


def test_draining_server_answers_503():
    s = HttpServer("--no-journal", "--drain-timeout", "20")
    try:
        client = s.openai()
        stream = client.chat.completions.create(model=s.model, messages=MESSAGES, max_tokens=60, stream=True,
                                                extra_body={"ignore_eos": True})
        first = next(iter(stream))
        assert first.choices[0].delta.role == "assistant"
        s.proc.send_signal(__import__("signal").SIGTERM)
        deadline = time.monotonic() + 20
        while s.get("/health")[0] != 503:
            assert time.monotonic() < deadline, s.logs()
            time.sleep(0.05)
        status, err = s.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 2})
        assert status == 503 and err["error"]["code"] == "shutting_down"
        rest = list(stream)  # the running job still finishes
        assert rest[-1].choices[0].finish_reason == "length"
        assert s.proc.wait(30) == 0
    finally:
        s.kill()


def test_top_logprobs_over_zeromq(http_server):
    """The same alternatives reach ZeroMQ subscribers: tokens events carry top_logprobs."""
    with http_server.client() as c:
        job = c.submit(prompt=PROMPT, max_tokens=5, temperature=0, top_logprobs=3)
        events = list(c.stream(job))
    tokens = [e for e in events if e["kind"] == "tokens"]
    ids = [t for e in tokens for t in e["token_ids"]]
    tops = [alts for e in tokens for alts in e["top_logprobs"]]
    lps = [lp for e in tokens for lp in e["logprobs"]]
    assert len(ids) == len(tops) == len(lps) == 5
    for tok, lp, alts in zip(ids, lps, tops):
        assert len(alts) == 3 and alts[0][0] == tok and abs(alts[0][1] - lp) < 1e-6  # greedy: the best one
        assert [a[1] for a in alts] == sorted((a[1] for a in alts), reverse=True)


def zmq_ids(server, **job):
    """The output token ids of a streamed ZeroMQ job."""
    with server.client() as c:
        events = list(c.stream(c.submit(**job)))
    return [t for e in events if e["kind"] == "tokens" for t in e["token_ids"]]


def test_penalties_and_logit_bias_through_the_openai_package(http_server):
    client = http_server.openai()
    greedy = dict(prompt=PROMPT, max_tokens=24, temperature=0, ignore_eos=True)
    plain = zmq_ids(http_server, **greedy)
    # logit_bias -100 bans the greedy first token; +100 on another token forces it at every step.
    banned = zmq_ids(http_server, **greedy, logit_bias={plain[0]: -100})
    assert banned[0] != plain[0]
    forced_id = banned[0]
    assert zmq_ids(http_server, **greedy, logit_bias={str(forced_id): 100}) == [forced_id] * 24
    r = client.completions.create(model=http_server.model, prompt=PROMPT, max_tokens=6, temperature=0,
                                  logit_bias={str(forced_id): 100}, logprobs=1)
    assert r.usage.completion_tokens == 6 and len(set(r.choices[0].logprobs.tokens)) == 1
    # The penalties change a greedy answer that repeats itself, and HTTP and ZeroMQ agree on them.
    assert len(set(plain)) < len(plain), "precondition: SmolLM2's greedy answer repeats a token"
    for penalty in ({"frequency_penalty": 1.5}, {"presence_penalty": 2.0}, {"repetition_penalty": 1.8}):
        ids = zmq_ids(http_server, **greedy, **penalty)
        assert ids != plain, penalty
        text = client.completions.create(model=http_server.model, prompt=PROMPT, max_tokens=24, temperature=0,
                                          extra_body={"ignore_eos": True, **({} if "repetition_penalty" not in penalty
                                                                              else penalty)},
                                          **({} if "repetition_penalty" in penalty else penalty)).choices[0].text
        assert text == zmq_text(http_server, **greedy, **penalty), penalty
    assert len(set(zmq_ids(http_server, **greedy, repetition_penalty=5.0))) > len(set(plain))


@pytest.mark.parametrize("field,value,fragment", [
    ("presence_penalty", 2.5, "[-2, 2]"),
    ("frequency_penalty", "x", "number"),
    ("repetition_penalty", 0, "> 0"),
    ("logit_bias", [1, 2], "object"),
    ("logit_bias", {"abc": 1}, "token ids"),
    ("logit_bias", {"5": 101}, "[-100, 100]"),
    ("logit_bias", {"99999999": 1}, "outside the vocabulary"),
])
def test_bad_penalties_get_400_naming_the_field(http_server, field, value, fragment):
    status, err = http_server.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 2, field: value})
    assert status == 400, err
    assert fragment in err["error"]["message"] and field in err["error"]["message"], err
    # Checked while reading the body: the field is named as the param. (The vocabulary is checked
    # when the job is admitted, whose refusal names it in the message only.)
    assert err["error"]["param"] == (None if "vocabulary" in fragment else field), err


def test_tokenize_and_detokenize_as_vllm(http_server):
    """vLLM's /tokenize and /detokenize: the ids a job gets for the same input (its usage counts
    them), and the text back; /v1/models carries max_model_len."""
    status, t = http_server.post("/tokenize", {"model": http_server.model, "prompt": PROMPT, "return_token_strs": True})
    assert status == 200, t
    assert t["count"] == len(t["tokens"]) == len(t["token_strs"]) and t["max_model_len"] > 0
    client = http_server.openai()
    r = client.completions.create(model=http_server.model, prompt=PROMPT, max_tokens=1, temperature=0)
    assert r.usage.prompt_tokens == t["count"]
    status, d = http_server.post("/detokenize", {"tokens": t["tokens"]})
    assert status == 200 and PROMPT in d["prompt"], d
    assert all(isinstance(p, str) and p for p in t["token_strs"])
    status, c = http_server.post("/tokenize", {"messages": MESSAGES})
    chat = client.chat.completions.create(model=http_server.model, messages=MESSAGES, max_tokens=1, temperature=0)
    assert status == 200 and c["count"] == chat.usage.prompt_tokens and c["token_strs"] is None
    status, m = http_server.get("/v1/models")
    assert m["data"][0]["max_model_len"] == t["max_model_len"]
    for path, body, param in [("/tokenize", {"prompt": PROMPT, "messages": MESSAGES}, "prompt"),
                              ("/tokenize", {"prompt": PROMPT, "add_special_tokens": False}, "add_special_tokens"),
                              ("/tokenize", {"prompt": PROMPT, "bogus": 1}, "bogus"),
                              ("/detokenize", {"tokens": "abc"}, "tokens"),
                              ("/detokenize", {"tokens": [10 ** 8]}, "tokens")]:
        status, err = http_server.post(path, body)
        assert status == 400 and err["error"]["param"] == param, (path, body, err)
    status, err = http_server.post("/tokenize", {"prompt": [10 ** 8]})
    assert status == 400 and "outside the vocabulary" in err["error"]["message"]


LONG_PROMPT = "Here is a list of fruits, one per line, with a short note on each: apple, pear, plum, cherry, " * 3


def test_n_choices_equal_single_requests_with_derived_seeds(http_server):
    """n = 4 with seed 7: choice i is the job a single request with seed 7 + i runs; the prompt is
    computed once (the other choices start after the first's first token and find it cached)."""
    client = http_server.openai()
    params = dict(max_tokens=12, temperature=0.8, top_p=0.95, seed=7)
    r = client.completions.create(model=http_server.model, prompt=LONG_PROMPT, n=4, extra_headers={"X-Request-Id": "n4"},
                                  **params)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    texts = [c.text for c in r.choices]
    for i, text in enumerate(texts):
        assert text == zmq_text(http_server, prompt=LONG_PROMPT, **{**params, "seed": 7 + i}), i
    assert len(set(texts)) > 1
    single = client.completions.create(model=http_server.model, prompt=LONG_PROMPT, **params)
    assert r.usage.prompt_tokens == single.usage.prompt_tokens
    assert r.usage.completion_tokens == sum(
        client.completions.create(model=http_server.model, prompt=LONG_PROMPT, **{**params, "seed": 7 + i}).usage.completion_tokens
        for i in range(4))
    with http_server.client() as c:  # the later choices found the first one's prompt in the prefix cache
        for i in range(1, 4):
            done = [e for e in c.fetch("n4/%d" % i)["events"] if e["kind"] == "done"][0]
            assert done["usage"]["cached_tokens"] >= 16, done


def test_n_choices_stream_with_their_index(http_server):
    client = http_server.openai()
    params = dict(model=http_server.model, messages=MESSAGES, max_tokens=10, temperature=1.0, seed=3, n=3)
    whole = client.chat.completions.create(**params)
    parts = {}
    finish, usage = {}, None
    for ch in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **params):
        if ch.usage:
            usage = ch.usage
        for c in ch.choices:
            parts[c.index] = parts.get(c.index, "") + (c.delta.content or "")
            if c.finish_reason:
                finish[c.index] = c.finish_reason
    assert sorted(parts) == [0, 1, 2] and sorted(finish) == [0, 1, 2]
    assert [parts[i] for i in range(3)] == [c.message.content for c in whole.choices]
    assert usage.completion_tokens == whole.usage.completion_tokens and usage.prompt_tokens == whole.usage.prompt_tokens


def test_chat_template_kwargs(http_server):
    """chat_template_kwargs reach the template (tests/unit/model/chat_template_test.cpp shows the
    override); SmolLM2's template reads none, so the prompt is the same with them."""
    client = http_server.openai()
    kw = {"enable_thinking": False, "persona": "terse"}
    r = client.chat.completions.create(model=http_server.model, messages=MESSAGES, max_tokens=4, temperature=0,
                                       extra_body={"chat_template_kwargs": kw})
    plain = client.chat.completions.create(model=http_server.model, messages=MESSAGES, max_tokens=4, temperature=0)
    assert r.choices[0].message.content == plain.choices[0].message.content
    status, t = http_server.post("/tokenize", {"messages": MESSAGES, "chat_template_kwargs": kw})
    assert status == 200 and t["count"] == plain.usage.prompt_tokens
    for value, param in [([1], "chat_template_kwargs"), ({"tools": [1]}, "chat_template_kwargs.tools"),
                         ({"messages": "x"}, "chat_template_kwargs.messages")]:
        status, err = http_server.post("/v1/chat/completions", {"messages": MESSAGES, "chat_template_kwargs": value})
        assert status == 400 and err["error"]["param"] == param, err
    status, err = http_server.post("/v1/completions", {"prompt": PROMPT, "chat_template_kwargs": kw})
    assert status == 400 and err["error"]["param"] == "chat_template_kwargs"
    with http_server.client() as c, pytest.raises(Exception, match="only a job with messages"):
        c.generate(prompt=PROMPT, max_tokens=2, chat_template_kwargs=kw)


def test_reasoning_parser_splits_chat_answers():
    """--reasoning-parser: deepseek_r1 reads everything before </think> as thinking, so SmolLM2's
    answer (which has no </think>) is all reasoning_content, whole and streamed; qwen3 reads an
    answer that does not open with <think> as all content. (tests/unit/transport/reasoning_test.cpp
    splits real thinking.)"""
    s = HttpServer("--no-journal", "--reasoning-parser", "deepseek_r1")
    try:
        client = s.openai()
        params = dict(model=s.model, messages=MESSAGES, max_tokens=8, temperature=0)
        text = zmq_text(s, messages=MESSAGES, max_tokens=8, temperature=0)
        r = client.chat.completions.create(**params)
        msg = r.choices[0].message
        assert msg.reasoning_content == text and msg.content is None
        thought, said = "", ""
        for ch in client.chat.completions.create(stream=True, **params):
            for c in ch.choices:
                thought += getattr(c.delta, "reasoning_content", None) or ""
                said += c.delta.content or ""
        assert thought == text and said == ""
        done = client.completions.create(model=s.model, prompt=PROMPT, max_tokens=4, temperature=0)  # completions: untouched
        assert done.choices[0].text
        assert s.stop(timeout=30) == 0
    finally:
        s.kill()
    s = HttpServer("--no-journal", "--reasoning-parser", "qwen3")
    try:
        r = s.openai().chat.completions.create(model=s.model, messages=MESSAGES, max_tokens=8, temperature=0)
        assert r.choices[0].message.content == zmq_text(s, messages=MESSAGES, max_tokens=8, temperature=0)
        assert getattr(r.choices[0].message, "reasoning_content", None) is None
    finally:
        s.kill()
