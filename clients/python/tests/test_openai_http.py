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
