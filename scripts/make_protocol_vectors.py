#!/usr/bin/env python3
"""Writes schemas/vectors/protocol_vectors.json: msgpack test vectors (as hex) for conveyor's wire
protocol, read by the C++ tests (tests/unit/schemas) and the Python client's tests.

  requests: frames a producer might send, with what decode_request must make of them:
            expect "ok" (plus "decoded", the request with every default filled in) or an error
            code (plus "field", the key it must name; "" for the frame as a whole).
  replies / events: maps the server encodes, with "value" (the map as JSON). The C++ encoders
            must produce these exact bytes; the Python client must read them.

Usage: python3 scripts/make_protocol_vectors.py [--check]   (needs `pip install msgpack`)
--check exits 1 when the committed file differs from what this script generates.
"""
import json
import math
import pathlib
import sys

import msgpack

OUT = pathlib.Path(__file__).resolve().parent.parent / "schemas" / "vectors" / "protocol_vectors.json"

SUBMIT_DEFAULTS = {
    "max_tokens": 256, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "seed": None,
    "stop": [], "stop_token_ids": [], "ignore_eos": False, "min_tokens": 0, "priority": 0,
    "deadline_ms": None, "logprobs": False, "stream": True,
    "presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0, "logit_bias": {},
    "chat_template_kwargs": {}, "prompt_logprobs": None, "token_bytes": False, "speculate": True,
}
INPUT_KEYS = ("prompt", "messages", "prompt_tokens")


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def submit(**fields):
    return {"op": "submit", "id": "job-1", **fields}


def decoded_submit(m):
    """The submit_request decode_request must produce: defaults, then the map's non-nil values."""
    d = {"op": "submit", "id": m["id"]}
    d["input"] = {k: m[k] for k in INPUT_KEYS if m.get(k) is not None}
    for k, v in SUBMIT_DEFAULTS.items():
        d[k] = m[k] if m.get(k) is not None else v
    # logit_bias keys may be integers or decimal strings; the decoded form keys them as strings.
    d["logit_bias"] = {str(int(k)): float(b) for k, b in d["logit_bias"].items()}
    return d


requests = []


def ok(name, m, decoded=None):
    if decoded is None:
        decoded = decoded_submit(m) if m["op"] == "submit" else dict(m)
    requests.append({"name": name, "hex": pack(m).hex(), "expect": "ok", "decoded": decoded})


def bad(name, frame, field="", code="bad_request"):
    raw = frame if isinstance(frame, bytes) else pack(frame)
    requests.append({"name": name, "hex": raw.hex(), "expect": code, "field": field})


# --- valid requests ------------------------------------------------------------------------
ok("submit_minimal", submit(prompt="Hello"))
ok("submit_full", submit(prompt="Tell me a story.", max_tokens=64, temperature=0.5, top_p=0.75,
                         top_k=40, min_p=0.125, seed=1234, stop=["\n\n", "END"],
                         stop_token_ids=[2, 7], ignore_eos=True, min_tokens=8, priority=-3,
                         deadline_ms=30000, logprobs=True, stream=False))
ok("submit_messages", submit(messages=[{"role": "system", "content": "Be brief."},
                                       {"role": "user", "content": "Hi!"},
                                       {"role": "assistant", "content": ""}]))
ok("submit_prompt_tokens", submit(prompt_tokens=[1, 9906, 11, 1917, 0, 2147483647]))
ok("submit_greedy_integer_temperature", submit(prompt="x", temperature=0))
ok("submit_speculate_off", submit(prompt="x", speculate=False))
ok("submit_nil_values_mean_absent", submit(prompt="x", seed=None, deadline_ms=None, messages=None))
ok("submit_unknown_keys_ignored", submit(prompt="x", future_field={"nested": [1, 2, {"a": None}]},
                                        another=b"\x00\x01"))
ok("submit_id_128_chars", {"op": "submit", "id": "a" * 128, "prompt": "x"})
ok("submit_id_all_allowed_chars", {"op": "submit", "id": "AZaz09._:/-", "prompt": "x"})
ok("submit_id_group", {"op": "submit", "id": "batch-7/item-3", "prompt": "x"})
ok("submit_seed_max_u64", submit(prompt="x", seed=2**64 - 1))
ok("submit_min_tokens_equals_max", submit(prompt="x", max_tokens=5, min_tokens=5))
ok("submit_utf8_prompt", submit(prompt="héllo wörld ✓ 🚀"))
ok("submit_penalties_and_logit_bias", submit(prompt="x", presence_penalty=0.5, frequency_penalty=-1.25,
                                             repetition_penalty=1.5, logit_bias={"42": 5, 7: -100, "0": 0.25}))
ok("submit_penalties_at_their_limits", submit(prompt="x", presence_penalty=-2, frequency_penalty=2,
                                              repetition_penalty=0.0625, logit_bias={2147483647: 100}))
ok("submit_chat_template_kwargs", submit(messages=[{"role": "user", "content": "Hi"}],
                                         chat_template_kwargs={"enable_thinking": False, "depth": -3, "big": 2**63 - 1,
                                                               "temperature_hint": 0.5, "persona": "terse"}))
ok("submit_prompt_logprobs", submit(prompt="x", prompt_logprobs=2))
ok("submit_prompt_logprobs_zero", submit(prompt_tokens=[1, 2, 3], prompt_logprobs=0))
ok("submit_token_bytes", submit(prompt="x", logprobs=True, top_logprobs=2, token_bytes=True))
ok("cancel", {"op": "cancel", "id": "job-1"})
ok("status", {"op": "status", "id": "job-1"})
ok("fetch_defaults", {"op": "fetch", "id": "job-1"},
   {"op": "fetch", "id": "job-1", "from_seq": 0, "max_events": 1024})
ok("fetch_full", {"op": "fetch", "id": "job-1", "from_seq": 17, "max_events": 100})
ok("stats", {"op": "stats"})
ok("health", {"op": "health"})
ok("health_extra_keys", {"op": "health", "id": "ignored", "x": 1}, {"op": "health"})

# --- malformed frames ----------------------------------------------------------------------
bad("empty_frame", b"")
bad("not_msgpack_c1", b"\xc1")
bad("not_msgpack_text", b"{\"op\": \"health\"}")
bad("truncated_map", pack(submit(prompt="Hello"))[:-3])
bad("huge_array_claim", b"\xdd\xff\xff\xff\xff")
bad("huge_map_claim", b"\xdf\xff\xff\xff\xff")
bad("huge_str_claim", b"\xdb\xff\xff\xff\xff")
bad("huge_array_claim_in_prompt_tokens", b"\x83\xa2op\xa6submit\xa2id\xa5job-1\xadprompt_tokens\xdd\xff\xff\xff\xff")
bad("deep_nesting", b"\x82\xa2op\xa6health\xa1x" + b"\x91" * 100 + b"\xc0")
bad("ext_value", b"\x82\xa2op\xa6health\xa1x\xd4\x01\x00")
bad("trailing_byte", pack({"op": "health"}) + b"\xc0")
bad("two_maps", pack({"op": "health"}) + pack({"op": "stats"}))
bad("top_level_array", ["submit", "job-1", "Hello"])
bad("top_level_string", "submit")
bad("non_string_key", {1: "x", "op": "health"})
bad("duplicate_key", b"\x82\xa2op\xa6health\xa2op\xa5stats", "op")
bad("missing_op", {"id": "job-1", "prompt": "x"}, "op")
bad("op_not_string", {"op": 1}, "op")
bad("unknown_op", {"op": "explode", "id": "job-1"}, "op")
# --- penalties and logit_bias --------------------------------------------------------------
bad("submit_presence_penalty_above_2", submit(prompt="x", presence_penalty=2.5), "presence_penalty")
bad("submit_frequency_penalty_string", submit(prompt="x", frequency_penalty="high"), "frequency_penalty")
bad("submit_repetition_penalty_zero", submit(prompt="x", repetition_penalty=0), "repetition_penalty")
bad("submit_logit_bias_array", submit(prompt="x", logit_bias=[[5, 1.0]]), "logit_bias")
bad("submit_logit_bias_word_key", submit(prompt="x", logit_bias={"five": 1.0}), "logit_bias")
bad("submit_logit_bias_negative_key", submit(prompt="x", logit_bias={-1: 1.0}), "logit_bias")
bad("submit_logit_bias_float_key", submit(prompt="x", logit_bias={"5.0": 1.0}), "logit_bias")
bad("submit_logit_bias_above_100", submit(prompt="x", logit_bias={"5": 100.5}), "logit_bias")
bad("submit_logit_bias_string_bias", submit(prompt="x", logit_bias={"5": "up"}), "logit_bias")
bad("submit_logit_bias_same_id_twice", submit(prompt="x", logit_bias={"5": 1, 5: 2}), "logit_bias")
bad("submit_logit_bias_too_many", submit(prompt="x", logit_bias={str(i): 1 for i in range(301)}), "logit_bias")
bad("submit_chat_template_kwargs_array", submit(prompt="x", chat_template_kwargs=["enable_thinking"]),
    "chat_template_kwargs")
bad("submit_chat_template_kwargs_nested", submit(prompt="x", chat_template_kwargs={"tools": [1]}), "chat_template_kwargs.tools")
bad("submit_chat_template_kwargs_messages", submit(prompt="x", chat_template_kwargs={"messages": "x"}),
    "chat_template_kwargs.messages")
bad("submit_chat_template_kwargs_u64", submit(prompt="x", chat_template_kwargs={"n": 2**63}), "chat_template_kwargs.n")
# --- ids -----------------------------------------------------------------------------------
bad("submit_missing_id", {"op": "submit", "prompt": "x"}, "id")
bad("submit_empty_id", {"op": "submit", "id": "", "prompt": "x"}, "id")
bad("submit_id_129_chars", {"op": "submit", "id": "a" * 129, "prompt": "x"}, "id")
bad("submit_id_space", {"op": "submit", "id": "job 1", "prompt": "x"}, "id")
bad("submit_id_hash", {"op": "submit", "id": "job#1", "prompt": "x"}, "id")
bad("submit_id_non_ascii", {"op": "submit", "id": "jöb", "prompt": "x"}, "id")
bad("submit_id_integer", {"op": "submit", "id": 7, "prompt": "x"}, "id")
bad("cancel_missing_id", {"op": "cancel"}, "id")
bad("status_bad_id", {"op": "status", "id": "a*b"}, "id")
bad("fetch_missing_id", {"op": "fetch", "from_seq": 0}, "id")
# --- prompt --------------------------------------------------------------------------------
bad("submit_no_prompt", submit(), "prompt")
bad("submit_empty_prompt", submit(prompt=""), "prompt")
bad("submit_prompt_binary", submit(prompt=b"Hello"), "prompt")
bad("submit_prompt_integer", submit(prompt=5), "prompt")
bad("submit_prompt_invalid_utf8", b"\x83\xa2op\xa6submit\xa2id\xa5job-1\xa6prompt\xa3\xff\xfe\xfd", "prompt")
bad("submit_prompt_and_messages", submit(prompt="x", messages=[{"role": "user", "content": "y"}]), "prompt")
bad("submit_prompt_and_tokens", submit(prompt="x", prompt_tokens=[1]), "prompt")
bad("submit_empty_messages", submit(messages=[]), "messages")
bad("submit_messages_not_array", submit(messages="hi"), "messages")
bad("submit_message_not_map", submit(messages=["hi"]), "messages[0]")
bad("submit_message_missing_role", submit(messages=[{"content": "hi"}]), "messages[0].role")
bad("submit_message_bad_role", submit(messages=[{"role": "wizard", "content": "hi"}]), "messages[0].role")
bad("submit_message_missing_content", submit(messages=[{"role": "user", "content": "a"}, {"role": "user"}]),
    "messages[1].content")
bad("submit_message_content_integer", submit(messages=[{"role": "user", "content": 3}]), "messages[0].content")
bad("submit_empty_prompt_tokens", submit(prompt_tokens=[]), "prompt_tokens")
bad("submit_negative_prompt_token", submit(prompt_tokens=[1, -2]), "prompt_tokens[1]")
bad("submit_prompt_token_over_int32", submit(prompt_tokens=[2**31]), "prompt_tokens[0]")
bad("submit_prompt_token_string", submit(prompt_tokens=[1, "2"]), "prompt_tokens[1]")
bad("submit_prompt_tokens_float", submit(prompt_tokens=[1.0]), "prompt_tokens[0]")
# --- numbers and flags ---------------------------------------------------------------------
bad("submit_max_tokens_zero", submit(prompt="x", max_tokens=0), "max_tokens")
bad("submit_max_tokens_negative", submit(prompt="x", max_tokens=-1), "max_tokens")
bad("submit_max_tokens_float", submit(prompt="x", max_tokens=1.5), "max_tokens")
bad("submit_max_tokens_string", submit(prompt="x", max_tokens="10"), "max_tokens")
bad("submit_max_tokens_over_int32", submit(prompt="x", max_tokens=2**31), "max_tokens")
bad("submit_temperature_negative", submit(prompt="x", temperature=-0.5), "temperature")
bad("submit_temperature_nan", submit(prompt="x", temperature=math.nan), "temperature")
bad("submit_temperature_inf", submit(prompt="x", temperature=math.inf), "temperature")
bad("submit_temperature_string", submit(prompt="x", temperature="hot"), "temperature")
bad("submit_top_p_zero", submit(prompt="x", top_p=0.0), "top_p")
bad("submit_top_p_over_one", submit(prompt="x", top_p=1.5), "top_p")
bad("submit_top_k_negative", submit(prompt="x", top_k=-1), "top_k")
bad("submit_top_k_float", submit(prompt="x", top_k=4.0), "top_k")
bad("submit_min_p_negative", submit(prompt="x", min_p=-0.25), "min_p")
bad("submit_min_p_over_one", submit(prompt="x", min_p=1.5), "min_p")
bad("submit_seed_negative", submit(prompt="x", seed=-1), "seed")
bad("submit_seed_string", submit(prompt="x", seed="42"), "seed")
bad("submit_stop_string_not_array", submit(prompt="x", stop="\n"), "stop")
bad("submit_stop_element_integer", submit(prompt="x", stop=["a", 1]), "stop[1]")
bad("submit_stop_element_empty", submit(prompt="x", stop=[""]), "stop[0]")
bad("submit_stop_too_many", submit(prompt="x", stop=["s%d" % i for i in range(65)]), "stop")
bad("submit_stop_too_long", submit(prompt="x", stop=["y" * 1025]), "stop[0]")
bad("submit_stop_token_negative", submit(prompt="x", stop_token_ids=[-1]), "stop_token_ids[0]")
bad("submit_min_tokens_over_max", submit(prompt="x", max_tokens=4, min_tokens=5), "min_tokens")
bad("submit_min_tokens_negative", submit(prompt="x", min_tokens=-1), "min_tokens")
bad("submit_priority_string", submit(prompt="x", priority="high"), "priority")
bad("submit_deadline_zero", submit(prompt="x", deadline_ms=0), "deadline_ms")
bad("submit_deadline_negative", submit(prompt="x", deadline_ms=-5), "deadline_ms")
bad("submit_ignore_eos_integer", submit(prompt="x", ignore_eos=1), "ignore_eos")
bad("submit_logprobs_string", submit(prompt="x", logprobs="yes"), "logprobs")
bad("submit_token_bytes_string", submit(prompt="x", token_bytes="yes"), "token_bytes")
bad("submit_speculate_integer", submit(prompt="x", speculate=0), "speculate")
bad("submit_prompt_logprobs_over_20", submit(prompt="x", prompt_logprobs=21), "prompt_logprobs")
bad("submit_prompt_logprobs_negative", submit(prompt="x", prompt_logprobs=-1), "prompt_logprobs")
bad("submit_prompt_logprobs_without_stream", submit(prompt="x", prompt_logprobs=0, stream=False), "prompt_logprobs")
bad("submit_stream_nil_is_default_but_int_is_not", submit(prompt="x", stream=0), "stream")
bad("fetch_negative_from_seq", {"op": "fetch", "id": "job-1", "from_seq": -1}, "from_seq")
bad("fetch_zero_max_events", {"op": "fetch", "id": "job-1", "max_events": 0}, "max_events")
bad("fetch_too_many_events", {"op": "fetch", "id": "job-1", "max_events": 4097}, "max_events")

# --- replies (the server's ROUTER answers) -------------------------------------------------
EV_ACCEPTED = {"id": "job-1", "seq": 0, "kind": "accepted"}
EV_TOKENS = {"id": "job-1", "seq": 1, "kind": "tokens", "token_ids": [9906, 11], "text": "Hello,"}
EV_TOKENS_LP = {"id": "job-1", "seq": 2, "kind": "tokens", "token_ids": [1917], "text": " world",
                "logprobs": [-0.5]}
EV_TOKENS_PROMPT = {"id": "job-1", "seq": 1, "kind": "tokens", "token_ids": [11], "text": ",", "logprobs": [-0.25],
                    "top_logprobs": [[[11, -0.25], [13, -2.0]]], "prompt_token_ids": [1, 9906, 22],
                    "prompt_logprobs": [None, -3.5, -0.125],
                    "prompt_top_logprobs": [None, [[9906, -3.5], [22, -4.0]], [[22, -0.125], [5, -3.0]]]}
EV_TOKENS_BYTES = {"id": "job-1", "seq": 1, "kind": "tokens", "token_ids": [9906, 254], "text": "Hello",
                   "logprobs": [-0.5, -1.0], "top_logprobs": [[[9906, -0.5]], [[254, -1.0]]],
                   "token_bytes": [b"Hello", b"\xe2\x9c"], "top_logprobs_bytes": [[b"Hello"], [b"\xe2\x9c"]]}
EV_DONE = {"id": "job-1", "seq": 3, "kind": "done", "finish_reason": "stop", "text": "Hello, world",
           "usage": {"prompt_tokens": 5, "completion_tokens": 3, "cached_tokens": 0},
           "timing": {"queue_ms": 1.5, "ttft_ms": 12.25, "e2e_ms": 40.0}}
replies = {
    "reply_submit_ok": {"ok": True, "id": "job-1", "topic": "job/job-1/"},
    "reply_submit_ok_group": {"ok": True, "id": "batch-7/item-3", "topic": "job/batch-7/item-3/"},
    "reply_error_bad_request": {"ok": False, "id": "job-1", "error": {
        "code": "bad_request", "message": "max_tokens must be 1 or more", "field": "max_tokens"}},
    "reply_error_no_id": {"ok": False, "error": {
        "code": "bad_request", "message": "the message is not valid msgpack"}},
    "reply_error_duplicate": {"ok": False, "id": "job-1", "error": {
        "code": "duplicate", "message": "job job-1 is running; it was not submitted again"}},
    "reply_error_too_long": {"ok": False, "id": "job-1", "error": {
        "code": "too_long", "message": "the prompt has 9000 tokens; max_model_len is 8192",
        "field": "prompt"}},
    "reply_error_overloaded": {"ok": False, "id": "job-1", "error": {
        "code": "overloaded", "message": "the queue is full; retry later"}},
    "reply_error_not_found": {"ok": False, "id": "job-9", "error": {
        "code": "not_found", "message": "no job job-9"}},
    "reply_error_shutting_down": {"ok": False, "id": "job-1", "error": {
        "code": "shutting_down", "message": "the server is draining"}},
    "reply_error_internal": {"ok": False, "error": {"code": "internal", "message": "oops"}},
    "reply_cancel": {"ok": True, "id": "job-1", "state": "cancelled"},
    "reply_status_running": {"ok": True, "id": "job-1", "state": "running", "prompt_tokens": 5,
                             "completion_tokens": 2, "next_seq": 3},
    "reply_status_finished": {"ok": True, "id": "job-1", "state": "finished", "prompt_tokens": 5,
                              "completion_tokens": 3, "next_seq": 4, "finish_reason": "stop"},
    "reply_fetch": {"ok": True, "id": "job-1", "events": [EV_TOKENS_LP, EV_DONE], "complete": True},
    "reply_fetch_empty": {"ok": True, "id": "job-1", "events": [], "complete": False},
    "reply_stats": {"ok": True, "queued": 3, "running": 2, "kv_usage": 0.25, "kv_blocks_used": 64,
                    "kv_blocks_total": 256, "prompt_tokens_total": 1000,
                    "completion_tokens_total": 5000, "cached_tokens_total": 128,
                    "jobs_accepted": 12, "jobs_rejected": 1, "jobs_finished": 7, "jobs_failed": 0,
                    "tokens_per_s": 88.5, "uptime_s": 3600.0, "preemptions_total": 2,
                    "spec_drafts_total": 40, "spec_draft_tokens_total": 150, "spec_accepted_tokens_total": 96,
                    "rejected": {"bad_request": 1, "overloaded": 0},
                    "finished": {"length": 6, "stop": 1},
                    "histograms": {"time_to_first_token_seconds": {"count": 7, "sum": 1.75},
                                   "inter_token_latency_seconds": {"count": 4993, "sum": 49.5}}},
    "reply_health": {"ok": True, "status": "serving", "protocol": 1, "model": "smollm2-135m-instruct"},
    "reply_health_draining": {"ok": True, "status": "draining", "protocol": 1, "model": "tiny"},
}
events = {
    "event_accepted": EV_ACCEPTED,
    "event_tokens": EV_TOKENS,
    "event_tokens_logprobs": EV_TOKENS_LP,
    "event_tokens_prompt_logprobs": EV_TOKENS_PROMPT,
    "event_tokens_bytes": EV_TOKENS_BYTES,
    "event_done_stop": EV_DONE,
    "event_done_cancelled_before_first_token": {
        "id": "job-2", "seq": 1, "kind": "done", "finish_reason": "cancelled", "text": "",
        "usage": {"prompt_tokens": 5, "completion_tokens": 0, "cached_tokens": 0},
        "timing": {"queue_ms": 3.0, "ttft_ms": None, "e2e_ms": 3.0}},
    "event_done_length_utf8": {
        "id": "job-3", "seq": 5, "kind": "done", "finish_reason": "length", "text": "héllo ✓",
        "usage": {"prompt_tokens": 70000, "completion_tokens": 300, "cached_tokens": 64},
        "timing": {"queue_ms": 0.0, "ttft_ms": 250.5, "e2e_ms": 9000.75}},
    "event_done_deadline": {
        "id": "job-4", "seq": 2, "kind": "done", "finish_reason": "deadline", "text": "a",
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "cached_tokens": 0},
        "timing": {"queue_ms": 0.5, "ttft_ms": 1.0, "e2e_ms": 100.0}},
    "event_error": {"id": "job-1", "seq": 0, "kind": "error", "code": "bad_request",
                    "message": "max_tokens must be 1 or more"},
    "event_heartbeat": {"kind": "heartbeat", "seq": 42, "ts": 1700000000.5, "status": "serving",
                        "protocol": 1, "running": 2, "waiting": 3, "kv_usage": 0.125,
                        "tokens_per_s": 120.0},
}


def as_json(v):
    """The value for the JSON file: msgpack bin (bytes) as a list of byte values, as OpenAI's
    logprobs write a token's bytes."""
    if isinstance(v, bytes):
        return list(v)
    if isinstance(v, dict):
        return {k: as_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [as_json(x) for x in v]
    return v


def main():
    doc = {
        "protocol": 1,
        "generator": "scripts/make_protocol_vectors.py",
        "requests": requests,
        "replies": [{"name": n, "hex": pack(v).hex(), "value": v} for n, v in replies.items()],
        "events": [{"name": n, "hex": pack(v).hex(), "value": as_json(v),
                    "topic": "sys/" if v["kind"] == "heartbeat" else "job/%s/" % v["id"]}
                   for n, v in events.items()],
    }
    names = [v["name"] for k in ("requests", "replies", "events") for v in doc[k]]
    assert len(names) == len(set(names)), "vector names must be unique"
    text = json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    if "--check" in sys.argv:
        if OUT.read_text(encoding="utf-8") != text:
            sys.exit("%s is stale; re-run scripts/make_protocol_vectors.py" % OUT)
        return
    OUT.write_text(text, encoding="utf-8")
    print("wrote %d requests, %d replies, %d events to %s"
          % (len(requests), len(replies), len(events), OUT))


if __name__ == "__main__":
    main()
