"""Sampling and serving parameters on the OpenAI-compatible HTTP intake (top logprobs, penalties,
logit_bias, n, chat_template_kwargs, --reasoning-parser, vLLM's /tokenize and /detokenize), driven
by the official `openai` package against the real `conveyor serve` and checked against the same
jobs over ZeroMQ. The server and its helpers are test_openai_http.py's."""
import pytest

pytest.importorskip("openai")

from test_openai_http import MESSAGES, PROMPT, HttpServer, zmq_text  # noqa: E402  (skips without CONVEYOR_BIN)
from test_openai_http import http_server  # noqa: E402,F401  (a module-scoped server of this module's own)


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


def test_echo_with_logprobs_as_lm_eval_reads_it(http_server):
    """lm-evaluation-harness's local-completions loglikelihood request: the prompt as token ids,
    echo, logprobs 1, max_tokens 1. Each prompt token's logprob equals the logprob the same token
    had when the model generated it (the prompt here is a prompt plus its own greedy answer), and
    each of those tokens is its position's top alternative."""
    client = http_server.openai()
    with http_server.client() as c:
        events = list(c.stream(c.submit(prompt=PROMPT, max_tokens=6, temperature=0, logprobs=True, ignore_eos=True)))
    tokens = [e for e in events if e["kind"] == "tokens"]
    gen_ids = [t for e in tokens for t in e["token_ids"]]
    gen_lps = [lp for e in tokens for lp in e["logprobs"]]
    status, t = http_server.post("/tokenize", {"prompt": PROMPT})
    assert status == 200
    ids = t["tokens"] + gen_ids
    r = client.completions.create(model=http_server.model, prompt=ids, max_tokens=1, temperature=0, echo=True, logprobs=1)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == len(ids) + 1
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert all(isinstance(x, float) and x <= 0 for x in lp.token_logprobs[1:])
    n = len(t["tokens"])
    for i, want in enumerate(gen_lps):
        assert abs(lp.token_logprobs[n + i] - want) < 2e-3, (i, lp.token_logprobs[n + i], want)
        top = lp.top_logprobs[n + i]
        assert len(top) == 1 and max(top, key=top.get) == lp.tokens[n + i], (i, top, lp.tokens[n + i])
    status, d = http_server.post("/detokenize", {"tokens": ids})
    assert r.choices[0].text.startswith(d["prompt"]) and len(r.choices[0].text) > len(d["prompt"])
    assert lp.text_offset[n] <= len(d["prompt"]) and lp.text_offset[-1] == len(d["prompt"])
    assert r.usage.prompt_tokens == len(ids) and r.usage.completion_tokens == 1


def test_echo_streamed_and_not(http_server):
    client = http_server.openai()
    plain = client.completions.create(model=http_server.model, prompt=PROMPT, max_tokens=5, temperature=0)
    echoed = client.completions.create(model=http_server.model, prompt=PROMPT, max_tokens=5, temperature=0, echo=True)
    assert echoed.choices[0].text == PROMPT + plain.choices[0].text and echoed.choices[0].logprobs is None
    for logprobs in (None, 2):
        chunks = list(client.completions.create(model=http_server.model, prompt=PROMPT, max_tokens=5, temperature=0,
                                                echo=True, stream=True, logprobs=logprobs))
        text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
        assert text == echoed.choices[0].text, logprobs
        assert chunks[0].choices[0].text.startswith(PROMPT)
        if logprobs:
            first = chunks[0].choices[0].logprobs
            assert first.token_logprobs[0] is None and all(len(t) == 2 for t in first.top_logprobs[1:])


def test_prompt_logprobs_over_zeromq(http_server):
    """vLLM's prompt_logprobs: the first tokens event carries the prompt's ids, each one's logprob
    (nil first) and its alternatives; a second run of the same prompt (a prefix-cache hit for a
    plain job) scores it the same."""
    runs = []
    for _ in range(2):
        with http_server.client() as c:
            events = list(c.stream(c.submit(prompt=PROMPT, max_tokens=3, temperature=0, prompt_logprobs=3)))
        firsts = [e for e in events if e["kind"] == "tokens" and "prompt_token_ids" in e]
        assert len(firsts) == 1 and events.index(firsts[0]) == 1  # the first tokens event, and only it
        runs.append(firsts[0])
    e = runs[0]
    n = len(e["prompt_token_ids"])
    assert n > 3 and len(e["prompt_logprobs"]) == len(e["prompt_top_logprobs"]) == n
    assert e["prompt_logprobs"][0] is None and e["prompt_top_logprobs"][0] is None
    for lp, alts in zip(e["prompt_logprobs"][1:], e["prompt_top_logprobs"][1:]):
        assert lp <= 0 and len(alts) == 3 and alts[0][1] >= lp - 1e-6
        assert [a[1] for a in alts] == sorted((a[1] for a in alts), reverse=True)
    assert runs[1]["prompt_logprobs"] == e["prompt_logprobs"]
    status, t = http_server.post("/tokenize", {"prompt": PROMPT})
    assert e["prompt_token_ids"] == t["tokens"]
    with http_server.client() as c, pytest.raises(Exception, match="prompt_logprobs"):
        c.submit(prompt=PROMPT, max_tokens=2, prompt_logprobs=1, stream=False)
