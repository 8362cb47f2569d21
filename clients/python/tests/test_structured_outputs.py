"""Structured outputs: 200 jobs over 5 JSON schemas at temperature 1.0, each output parsed and
validated with the `jsonschema` package; plus json_object, regex and EBNF grammars, both
protocols, bad grammars refused with 400, and a restart that resumes a constrained job."""
import concurrent.futures
import json
import re

import pytest

jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("openai")

from test_openai_http import HttpServer  # noqa: E402

SCHEMAS = [
    {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 120}},
     "required": ["name", "age"]},
    {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 20},
        "country": {"type": "string", "enum": ["France", "Japan", "Peru", "Kenya"]},
        "population_millions": {"type": "number", "minimum": 0, "maximum": 50}},
     "required": ["city", "country", "population_millions"]},
    {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "minItems": 1, "maxItems": 3},
        "done": {"type": "boolean"}},
     "required": ["tags", "done"]},
    {"type": "object", "properties": {
        "sentiment": {"type": "string", "enum": ["positive", "negative", "neutral"]},
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
        "reason": {"type": "string", "maxLength": 30}},
     "required": ["sentiment", "score", "reason"]},
    {"type": "object", "properties": {
        "id": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
        "items": {"type": "array", "maxItems": 2, "items": {
            "type": "object", "properties": {"sku": {"type": "string", "maxLength": 8},
                                             "qty": {"type": "integer", "minimum": 1, "maximum": 9}},
            "required": ["sku", "qty"]}}},
     "required": ["id", "items"]},
]
PROMPTS = ["Describe a person.", "Describe a city.", "Tag this note.", "Rate this review: great food.",
           "Write an order."]
JOBS = 200
MAX_TOKENS = 160


@pytest.fixture(scope="module")
def server():
    s = HttpServer("--no-journal", "--max-num-seqs", "32")
    try:
        yield s
        assert s.stop(timeout=30) == 0, s.logs()
    finally:
        s.kill()


def test_200_jobs_over_5_schemas_all_parse_and_validate(server):
    client = server.openai(timeout=600)

    def run(i):
        k = i % len(SCHEMAS)
        r = client.chat.completions.create(
            model=server.model, messages=[{"role": "user", "content": PROMPTS[k]}], temperature=1.0,
            max_tokens=MAX_TOKENS, seed=i,
            response_format={"type": "json_schema", "json_schema": {"name": "s%d" % k, "schema": SCHEMAS[k]}})
        return k, r.choices[0].message.content, r.choices[0].finish_reason

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        results = list(pool.map(run, range(JOBS)))
    bad = []
    for k, text, reason in results:
        try:
            assert reason == "stop", "finish_reason %s" % reason
            jsonschema.validate(json.loads(text), SCHEMAS[k])
        except Exception as e:  # noqa: BLE001  (collect every failure, then report)
            bad.append((k, text, repr(e)))
    assert not bad, "%d of %d outputs invalid, e.g. %r" % (len(bad), JOBS, bad[:3])


def test_json_object_regex_and_grammar(server):
    client = server.openai()
    for seed in range(4):
        r = client.chat.completions.create(model=server.model, messages=[{"role": "user", "content": "Give me JSON."}],
                                           temperature=1.0, seed=seed, max_tokens=200,
                                           response_format={"type": "json_object"})
        if r.choices[0].finish_reason == "stop":
            assert isinstance(json.loads(r.choices[0].message.content), dict)
    r = client.completions.create(model=server.model, prompt="Date:", temperature=1.0, max_tokens=30,
                                  extra_body={"response_format": {"type": "regex", "pattern": "20[0-9]{2}-[01][0-9]-[0-3][0-9]"}})
    assert re.fullmatch(r"20[0-9]{2}-[01][0-9]-[0-3][0-9]", r.choices[0].text) and r.choices[0].finish_reason == "stop"
    grammar = 'root ::= ("yes" | "no") ", " [0-9] [0-9]?'
    r = client.completions.create(model=server.model, prompt="Answer:", temperature=1.0, max_tokens=30,
                                  extra_body={"response_format": {"type": "grammar", "grammar": grammar}})
    assert re.fullmatch(r"(yes|no), [0-9][0-9]?", r.choices[0].text), r.choices[0].text
    # Over ZeroMQ: the submit map's response_format, the schema as JSON text.
    with server.client() as c:
        text = c.generate(prompt="A person:", temperature=1.0, max_tokens=MAX_TOKENS,
                          response_format={"type": "json_schema", "schema": json.dumps(SCHEMAS[0])})
    jsonschema.validate(json.loads(text), SCHEMAS[0])


@pytest.mark.parametrize("fmt,fragment", [
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "foo"}}}, "does not compile"),
    ({"type": "regex", "pattern": "a(b"}, "parenthesis"),
    ({"type": "grammar", "grammar": "root ::= undefined_rule"}, "not defined"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer", "minimum": 5, "maximum": 1}}}, "does not compile"),
])
def test_a_grammar_that_does_not_compile_gets_400(server, fmt, fragment):
    status, err = server.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "response_format": fmt})
    assert status == 400 and fragment in err["error"]["message"] and "response_format" in err["error"]["message"], err
    assert server.get("/health")[0] == 200


def test_a_constrained_job_resumes_after_a_crash_and_still_matches(tmp_path):
    """SIGKILL mid-job, restart on the same journal: the job continues at its next token with its
    grammar advanced past the output it had published, and the whole text still matches."""
    import signal
    import time

    from chaos_harness import free_ports
    from test_e2e import Server

    pattern = "[a-z]{150}"
    ports, state = free_ports(3), str(tmp_path / "state")
    s = Server("--state-dir", state, ports=ports)
    try:
        with s.client() as c:
            job = c.submit(prompt="Letters:", temperature=1.0, seed=3, max_tokens=400,
                           response_format={"type": "regex", "pattern": pattern})
            seen = 0
            for ev in c.stream(job):
                if ev["kind"] == "tokens":
                    seen += len(ev["token_ids"])
                if seen >= 20:
                    break
        assert seen >= 20
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait()
    finally:
        s.kill()
    time.sleep(0.5)
    s = Server("--state-dir", state, ports=ports)
    try:
        with s.client() as c:
            events = list(c.stream(job))
            done = events[-1]
            assert done["kind"] == "done" and done["finish_reason"] == "stop", done
            assert re.fullmatch(pattern, done["text"]), done["text"]
            assert done["usage"]["completion_tokens"] > seen + 5, "the job ended before the kill"
    finally:
        s.stop(30)
        s.kill()
