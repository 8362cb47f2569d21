"""Speculative decoding end to end (issue 30): one `conveyor serve` (CPU, SmolLM2) with n-gram
prompt lookup on; each job runs twice, once opted out (`speculate: false`), and its tokens, text,
logprobs, alternatives, usage and finish reason must be identical, alone and in a batch of 32
mixed jobs (greedy, seeded with top-p / top-k, stop strings, min_tokens, logit_bias, structured
outputs: a JSON object, a JSON schema, a regex). The server's counters must show drafts that
stood, and the prompts are built so that they do (input-grounded rewrites, an extraction)."""
import concurrent.futures

import pytest

from test_e2e import Server  # noqa: E402  (skips without CONVEYOR_BIN)

SOURCE = ("The committee met on Tuesday in the old library. It agreed that the bridge over the river "
          "would be repaired before winter, that the school would open a second reading room, and that "
          "the market would move to the square by the church.")
PROMPTS = [
    "Repeat this text exactly: " + SOURCE + "\nRepeated text: " + SOURCE[:40],
    "Copy the sentence: the quick brown fox jumps over the lazy dog. Copy: the quick brown fox",
    "List: apple, banana, cherry, apple, banana, cherry, apple, banana,",
    "Write a short poem about the sea.",
    'Extract the fields as JSON. Text: "Mary Smith, born 1901 in Leeds, was a teacher." '
    'JSON: {"name": "Mary Smith", "born": 1901, "city": "Leeds", "job": "teacher"}. '
    'Text: "John Brown, born 1899 in York, was a baker." JSON:',
]
RECORD = ('{"type":"object","properties":{"name":{"type":"string"},"born":{"type":"integer"},'
          '"city":{"type":"string"},"job":{"type":"string"}},"required":["name","born","city","job"]}')


@pytest.fixture(scope="module")
def spec_server():
    s = Server("--no-journal", "--threads", "2", "--speculative-config",
               '{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 1, "prompt_lookup_max": 3}')
    yield s
    s.stop(30)


def run(c, prompt, **params):
    events = []
    job_id = c.submit(prompt, **params)
    for ev in c.stream(job_id, timeout=120):
        events.append(ev)
    return events


def flatten(events):
    """Everything a client sees, except the event grouping (tokens events batch whatever is ready)
    and timings."""
    out = {"token_ids": [], "text": "", "logprobs": [], "top_logprobs": []}
    for ev in events:
        if ev["kind"] == "tokens":
            out["token_ids"] += ev["token_ids"]
            out["text"] += ev["text"]
            out["logprobs"] += ev.get("logprobs") or []
            out["top_logprobs"] += ev.get("top_logprobs") or []
        elif ev["kind"] in ("done", "error"):
            # All but the timings and the prefix-cache hits (a second run of a prompt finds it).
            out["end"] = {k: v for k, v in ev.items() if k not in ("timing", "seq", "id")}
            out["end"]["usage"] = {k: v for k, v in (ev.get("usage") or {}).items() if k != "cached_tokens"}
    return out


JOB_PARAMS = [
    {"temperature": 0, "max_tokens": 48, "logprobs": True, "top_logprobs": 3},
    {"temperature": 0.8, "top_p": 0.9, "top_k": 40, "seed": 7, "max_tokens": 40, "logprobs": True},
    {"temperature": 0, "max_tokens": 64, "stop": ["river"], "min_tokens": 4},
    {"temperature": 0.8, "seed": 11, "max_tokens": 32, "logit_bias": {"28": 3.0}},
    {"temperature": 0, "max_tokens": 40, "response_format": {"type": "json_object"}},
    {"temperature": 0.8, "seed": 5, "max_tokens": 48, "logprobs": True,
     "response_format": {"type": "json_schema", "schema": RECORD}},
    {"temperature": 0, "max_tokens": 40, "response_format": {"type": "regex", "pattern": "([a-z]+, )*[a-z]+"}},
]


def stats(c):
    s = c.stats()
    return s["spec_drafts_total"], s["spec_draft_tokens_total"], s["spec_accepted_tokens_total"]


def test_each_job_is_identical_with_and_without_speculation(spec_server):
    with spec_server.client() as c:
        before = stats(c)
        for prompt in PROMPTS:
            for params in JOB_PARAMS:
                off = flatten(run(c, prompt, speculate=False, **params))
                on = flatten(run(c, prompt, **params))
                assert on == off, (prompt, params)
                assert on["token_ids"], (prompt, params)
        drafts, drafted, accepted = (a - b for a, b in zip(stats(c), before))
    assert drafts > 20 and accepted > 40, (drafts, drafted, accepted)
    assert accepted < drafted


def test_structured_outputs_draft(spec_server):
    """A grammar does not stop drafting: the extraction's JSON copies its prompt, under its schema."""
    with spec_server.client() as c:
        before = stats(c)
        events = run(c, PROMPTS[-1], temperature=0, max_tokens=48,
                     response_format={"type": "json_schema", "schema": RECORD})
        drafts, drafted, accepted = (a - b for a, b in zip(stats(c), before))
    assert events[-1]["kind"] == "done", events[-1]
    assert drafts > 0 and accepted > 0, (drafts, drafted, accepted)


def test_a_batch_of_32_mixed_jobs_is_identical(spec_server):
    jobs = [(PROMPTS[i % len(PROMPTS)], JOB_PARAMS[i % len(JOB_PARAMS)]) for i in range(32)]

    def batch(speculate):
        with spec_server.client() as c:
            ids = [c.submit(p, speculate=speculate, **params) for p, params in jobs]
            with concurrent.futures.ThreadPoolExecutor(1) as ex:  # one client, one thread
                return ex.submit(lambda: [flatten(list(c.stream(i, timeout=300))) for i in ids]).result()

    off, on = batch(False), batch(True)
    for (p, params), a, b in zip(jobs, off, on):
        assert a == b, (p, params)


def test_a_draft_model_changes_nothing_but_the_speed():
    """The model as its own draft (`"model": "smollm2"`): greedy drafts are its own tokens."""
    s = Server("--no-journal", "--threads", "2", "--speculative-config",
               '{"method": "draft_model", "model": "smollm2", "num_speculative_tokens": 4}')
    try:
        with s.client() as c:
            before = stats(c)
            for prompt, params in [(PROMPTS[3], JOB_PARAMS[0]), (PROMPTS[0], JOB_PARAMS[1]), (PROMPTS[-1], JOB_PARAMS[5])]:
                off = flatten(run(c, prompt, speculate=False, **params))
                on = flatten(run(c, prompt, **params))
                assert on == off, (prompt, params)
            drafts, drafted, accepted = (a - b for a, b in zip(stats(c), before))
    finally:
        s.stop(30)
    assert drafts > 5 and accepted > 20, (drafts, drafted, accepted)


def test_bad_settings_are_refused_at_start():
    for bad, words in [('{"method": "eagle"}', "not a method"), ('{"num_speculative_tokens": 0}', "[1, 16]"),
                       ('{"method": "ngram", "model": "draft.gguf"}', "only for method draft_model"),
                       ('{"method": "draft_model"}', "needs model"),
                       ('{"model": "/nonexistent/draft.gguf"}', "/nonexistent/draft.gguf"), ("[1]", "JSON object"),
                       ('{"lookup": 3}', "unknown key")]:
        with pytest.raises(RuntimeError) as e:
            Server("--no-journal", "--speculative-config", bad)
        assert words in str(e.value), (bad, str(e.value))
