#!/usr/bin/env python3
"""Writes the fuzz target's seeds: tests/fuzz/corpus/decode/ (one frame per file) and the libFuzzer
dictionary tests/fuzz/decode.dict (the protocol's keys, ops and values, msgpack-encoded).

Seeds: valid requests of every op (submit with prompt, messages, prompt_tokens, every optional
field), known-nasty frames (length claims of 4 GiB, deep nesting, trailing bytes, non-string and
repeated keys, huge ints, floats where ints go, nil values, bin and ext values, invalid UTF-8), and
every request of schemas/vectors/protocol_vectors.json (prefixed "vector-").

Usage: .venv/bin/python scripts/make_fuzz_corpus.py   (needs msgpack; the corpus dir is rewritten)
"""
import json
import pathlib
import struct

import msgpack

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fuzz" / "corpus" / "decode"
DICT = ROOT / "tests" / "fuzz" / "decode.dict"
VECTORS = ROOT / "schemas" / "vectors" / "protocol_vectors.json"

OPS = ["submit", "cancel", "status", "fetch", "stats", "health"]
KEYS = ["op", "id", "prompt", "messages", "prompt_tokens", "role", "content", "max_tokens",
        "temperature", "top_p", "top_k", "min_p", "seed", "stop", "stop_token_ids", "ignore_eos",
        "min_tokens", "priority", "deadline_ms", "logprobs", "stream", "from_seq", "max_events"]
VALUES = ["system", "user", "assistant", "job-1", "batch-7/job.1:a_b"]


def pack(obj, **kw):
    kw.setdefault("use_bin_type", True)  # use_bin_type=False writes bytes as str (invalid UTF-8)
    return msgpack.packb(obj, **kw)


def fixstr(s):
    b = s.encode()
    return bytes([0xA0 | len(b)]) + b


def submit(**fields):
    return {"op": "submit", "id": "job-1", **fields}


def seeds():
    s = {}
    # Valid requests, every op.
    s["submit-prompt"] = pack(submit(prompt="hello"))
    s["submit-messages"] = pack(submit(messages=[
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": ""}]))
    s["submit-prompt-tokens"] = pack(submit(prompt_tokens=[1, 2, 3, 50000, 2**31 - 1]))
    s["submit-every-field"] = pack(submit(
        prompt="héllo ✓ 🚀", max_tokens=64, temperature=0.5, top_p=0.75, top_k=40, min_p=0.125,
        seed=1234, stop=["\n\n", "END"], stop_token_ids=[2, 7], ignore_eos=True, min_tokens=8,
        priority=-3, deadline_ms=60000, logprobs=True, stream=False))
    s["submit-float32"] = pack(submit(prompt="x", temperature=0.7, top_p=0.9, min_p=0.05),
                               use_single_float=True)
    s["submit-group-id"] = pack({"op": "submit", "id": "batch-7/job.1:a_b", "prompt": "x"})
    s["submit-unknown-keys"] = pack(submit(prompt="x", future={"a": [1, 2]}, n=3))
    s["cancel"] = pack({"op": "cancel", "id": "job-1"})
    s["status"] = pack({"op": "status", "id": "job-1"})
    s["fetch"] = pack({"op": "fetch", "id": "job-1", "from_seq": 5, "max_events": 100})
    s["fetch-defaults"] = pack({"op": "fetch", "id": "job-1"})
    s["stats"] = pack({"op": "stats"})
    s["health"] = pack({"op": "health"})
    # Length claims far past the frame: the parser must refuse them before allocating.
    s["array32-4g"] = bytes.fromhex("ddffffffff")
    s["map32-4g"] = bytes.fromhex("dfffffffff")
    s["str32-4g"] = bytes.fromhex("dbffffffff")
    s["bin32-4g"] = bytes.fromhex("c6ffffffff")
    # {"op":"submit","id":"job-1", <one more key>...}: a map of 3 with its third pair to follow.
    head = bytes([0x83]) + fixstr("op") + fixstr("submit") + fixstr("id") + fixstr("job-1")
    s["prompt-tokens-array32-4g"] = head + fixstr("prompt_tokens") + bytes.fromhex("ddffffffff")
    s["prompt-str32-4g"] = head + fixstr("prompt") + bytes.fromhex("dbffffffff")
    # Nesting.
    s["deep-arrays"] = bytes([0x91] * 200) + b"\xc0"
    s["deep-maps"] = (bytes([0x81]) + fixstr("a")) * 50 + b"\xc0"
    nested = {"role": "user", "content": "x"}
    for _ in range(8):
        nested = {"role": "user", "content": nested}
    s["deep-message"] = pack(submit(messages=[nested]))
    # Framing.
    s["trailing-nil"] = pack({"op": "stats"}) + b"\xc0"
    s["two-maps"] = pack({"op": "stats"}) + pack({"op": "health"})
    s["empty-map"] = pack({})
    s["top-level-array"] = pack(["submit", "job-1", "x"])
    s["truncated"] = pack(submit(prompt="hello"))[:-3]
    # Keys.
    s["int-key"] = pack({1: "submit", "op": "stats"})
    s["nil-key"] = bytes([0x82, 0xC0, 0x01]) + fixstr("op") + fixstr("stats")
    s["array-key"] = bytes([0x82, 0x91, 0x01, 0x01]) + fixstr("op") + fixstr("stats")
    s["duplicate-op"] = bytes([0x82]) + fixstr("op") + fixstr("stats") + fixstr("op") + fixstr("health")
    s["duplicate-id"] = head + fixstr("id") + fixstr("job-2")
    s["duplicate-key-not-utf8"] = bytes([0x83, 0xA1, 0xFF, 0x01, 0xA1, 0xFF, 0x01]) + fixstr("op") + fixstr("stats")
    s["message-key-overlong"] = pack(submit(messages=[{b"\xc0\x80": "x"}]), use_bin_type=False)
    # Numbers at and past their bounds, and of the wrong kind.
    s["huge-ints"] = pack(submit(prompt="x", max_tokens=2**64 - 1, seed=2**64 - 1, priority=-2**63,
                                 deadline_ms=2**63 - 1, top_k=2**31))
    s["fetch-from-seq-2p63"] = pack({"op": "fetch", "id": "job-1", "from_seq": 2**63})
    s["fetch-from-seq-u64max"] = pack({"op": "fetch", "id": "job-1", "from_seq": 2**64 - 1})
    s["floats-for-ints"] = pack(submit(prompt_tokens=[1.0, 2.0], max_tokens=4.0, top_k=1.5))
    s["float-extremes"] = pack(submit(prompt="x", temperature=1e300, top_p=1.0000000001,
                                      min_p=5e-324))
    s["float-nan-inf"] = pack(submit(prompt="x", temperature=float("nan"), top_p=float("inf")))
    s["float-negative-zero"] = pack(submit(prompt="x", temperature=-0.0, min_p=-0.0))
    s["float32-max"] = (b"\x84" + head[1:] + fixstr("prompt") + fixstr("x") + fixstr("temperature")
                        + b"\xca" + struct.pack(">f", 3.4e38))
    s["temperature-u64max"] = pack(submit(prompt="x", temperature=2**64 - 1))
    s["min-tokens-over-max"] = pack(submit(prompt="x", max_tokens=4, min_tokens=5))
    s["bools-as-ints"] = pack(submit(prompt="x", stream=1, logprobs=0, ignore_eos=1))
    # Nil, bin, ext and bad strings where values go.
    s["all-nil"] = pack({k: None for k in KEYS if k != "op"} | {"op": "submit"})
    s["id-nil"] = pack(submit(prompt="x") | {"id": None})
    s["prompt-bin"] = pack(submit(prompt=b"hello"))
    s["id-ext"] = head[:-6] + b"\xd4\x01\x02" + fixstr("prompt") + fixstr("x")  # fixext1 as the id
    s["timestamp-ext"] = bytes([0x81]) + fixstr("op") + b"\xd6\xff\x00\x00\x00\x01"
    s["op-not-utf8"] = bytes([0x81]) + fixstr("op") + b"\xa3\xed\xa0\x80"
    s["id-not-utf8"] = bytes([0x82]) + fixstr("op") + fixstr("cancel") + fixstr("id") + b"\xa2\xc3\x28"
    s["unknown-op-long"] = pack({"op": "x" * 300, "id": "job-1"})
    s["stop-many-long"] = pack(submit(prompt="x", stop=["s" * 1025] + ["t"] * 70))
    s["stop-token-ids-many"] = pack(submit(prompt="x", stop_token_ids=list(range(1100))))
    s["messages-extra-keys"] = pack(submit(messages=[{"role": "user", "content": "x", "name": "a"}]))
    s["messages-bad-role"] = pack(submit(messages=[{"role": "tool", "content": "x"}]))
    return s


def vector_seeds():
    vectors = json.loads(VECTORS.read_text())
    return {"vector-" + v["name"].replace("_", "-"): bytes.fromhex(v["hex"])
            for v in vectors["requests"] if v["hex"]}


def dictionary():
    def entry(b):
        return '"' + "".join(chr(c) if 0x20 <= c < 0x7F and chr(c) not in '"\\' else f"\\x{c:02x}"
                             for c in b) + '"'
    lines = ["# libFuzzer dictionary for fuzz_decode, written by scripts/make_fuzz_corpus.py.",
             "# The protocol's keys, ops and values as msgpack fixstrs, and msgpack type bytes."]
    for word in KEYS + OPS + VALUES:
        lines.append(entry(fixstr(word)))
    for marker in ["c0", "c2", "c3", "ca", "cb", "cc", "cd", "ce", "cf", "d0", "d3", "d9", "da",
                   "dc", "dd", "de", "df", "c4", "d4", "ffffffff", "7fffffff", "80000000"]:
        lines.append(entry(bytes.fromhex(marker)))
    return "\n".join(lines) + "\n"


def main():
    all_seeds = seeds() | vector_seeds()
    CORPUS.mkdir(parents=True, exist_ok=True)
    for old in CORPUS.iterdir():
        old.unlink()
    for name, frame in sorted(all_seeds.items()):
        (CORPUS / name).write_bytes(frame)
    DICT.write_text(dictionary())
    print(f"wrote {len(all_seeds)} seeds to {CORPUS.relative_to(ROOT)} and {DICT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
