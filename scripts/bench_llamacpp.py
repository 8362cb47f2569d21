#!/usr/bin/env python3
"""llama.cpp's numbers for the same measurements `conveyor step-bench` makes, on the same machine.

Through llama-cpp-python's low-level API: one prefill of --prompt-len tokens, then for each
batch size B, B sequences each holding --context tokens decode one token per step (B tokens
per llama_decode call). Prints a table; --json FILE writes it.

    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install llama-cpp-python==0.3.36 numpy
    /tmp/ref/bin/python scripts/bench_llamacpp.py --batches 1,8,32,128 --json llamacpp.json
"""
import argparse
import json
import os
import time

import llama_cpp


def default_model():
    base = os.environ.get("CONVEYOR_CACHE") or os.path.expanduser("~/.cache/conveyor/models")
    return os.path.join(base, "SmolLM2-135M-Instruct.Q4_1.gguf")


def decode(ctx, batch, entries):
    """entries: list of (token, pos, seq, want_logits)."""
    batch.n_tokens = len(entries)
    for i, (tok, pos, seq, want) in enumerate(entries):
        batch.token[i] = tok
        batch.pos[i] = pos
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = seq
        batch.logits[i] = want
    rc = llama_cpp.llama_decode(ctx, batch)
    if rc != 0:
        raise RuntimeError(f"llama_decode returned {rc}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=default_model())
    ap.add_argument("--batches", default="1,8,32,128")
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json")
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    max_b = max(batches)

    llama_cpp.llama_backend_init()
    mparams = llama_cpp.llama_model_default_params()
    model = llama_cpp.llama_model_load_from_file(args.model.encode(), mparams)
    vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = max(max_b * (args.context + args.steps + 1), args.prompt_len + 16)
    cparams.n_batch = max(args.prompt_len, max_b * args.context)
    cparams.n_ubatch = cparams.n_batch
    cparams.n_seq_max = max_b
    cparams.kv_unified = True  # one KV pool shared by all sequences, as in conveyor
    cparams.n_threads = args.threads
    cparams.n_threads_batch = args.threads
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    batch = llama_cpp.llama_batch_init(cparams.n_batch, 0, max_b)
    mem = llama_cpp.llama_get_memory(ctx)
    out = {"reference": f"llama-cpp-python {llama_cpp.__version__}", "threads": args.threads,
           "context": args.context, "prompt_len": args.prompt_len, "decode": []}

    toks = lambda s, n, off: [(1000 + 7 * (s + off + i)) % vocab for i in range(n)]
    for _ in range(2):  # warm-up, then timed
        llama_cpp.llama_memory_clear(mem, True)
        t0 = time.perf_counter()
        decode(ctx, batch, [(t, i, 0, i == args.prompt_len - 1) for i, t in enumerate(toks(0, args.prompt_len, 0))])
        llama_cpp.llama_get_logits_ith(ctx, -1)
        prefill_ms = (time.perf_counter() - t0) * 1e3
    out["prefill"] = {"tokens": args.prompt_len, "ms": prefill_ms, "tokens_per_s": 1e3 * args.prompt_len / prefill_ms}
    print(f"prefill: {args.prompt_len} tokens in {prefill_ms:.1f} ms = {1e3 * args.prompt_len / prefill_ms:.1f} tokens/s\n")
    print(f"{'batch':>8} {'step ms':>14} {'decode tokens/s':>18}")
    for b in batches:
        llama_cpp.llama_memory_clear(mem, True)
        decode(ctx, batch, [(t, i, s, i == args.context - 1) for s in range(b) for i, t in enumerate(toks(s, args.context, 0))])
        total = 0.0
        for step in range(args.steps + 1):  # step 0 is a warm-up for this batch shape
            pos = args.context + step
            if step == 1:
                total = 0.0
            t0 = time.perf_counter()
            decode(ctx, batch, [(toks(s, 1, pos)[0], pos, s, True) for s in range(b)])
            llama_cpp.llama_get_logits(ctx)
            total += time.perf_counter() - t0
        step_ms = total / args.steps * 1e3
        print(f"{b:>8} {step_ms:>14.2f} {1e3 * b / step_ms:>18.1f}")
        out["decode"].append({"batch": b, "step_ms": step_ms, "tokens_per_s": 1e3 * b / step_ms})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)


if __name__ == "__main__":
    main()
