#!/usr/bin/env python3
"""Hugging Face transformers baseline for `conveyor gpu-bench` (docs/gpu.md).

The same Llama-3-8B shape with random bf16 weights (built on the GPU from a LlamaConfig, nothing
downloaded) and the same Anyscale requests (`conveyor gpu-bench --workload-json FILE` writes them:
512-token prompts, capped exponential output lengths, all at t = 0), run two ways:
  static      model.generate over batches of --batch-size in arrival order; a batch runs until its
              longest member is done; throughput counts only the tokens each request asked for;
  continuous  transformers' ContinuousBatchingManager (per-request max_new_tokens) when this
              transformers has it, else the reason it could not run.
Greedy, EOS ignored. Prints a table; --json writes the numbers. Never run in CI (needs a GPU).
"""
import argparse
import json
import sys
import time


def build_model(torch, transformers):
    cfg = transformers.LlamaConfig(
        hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, vocab_size=128256, rope_theta=500000.0, max_position_embeddings=8192,
        rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(cfg)
    model.eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def run_static(torch, model, reqs, batch_size):
    useful = sum(r["output_len"] for r in reqs)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(0, len(reqs), batch_size):
        batch = reqs[i:i + batch_size]
        ids = torch.tensor([r["prompt"] for r in batch], device="cuda")  # all prompts are 512 tokens
        longest = max(r["output_len"] for r in batch)
        with torch.no_grad():
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=longest, min_new_tokens=longest,
                           do_sample=False)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    return {"seconds": dt, "output_tokens": useful, "output_tokens_per_s": useful / dt}


def run_continuous(torch, transformers, model, reqs):
    from transformers.generation import GenerationConfig
    gen = GenerationConfig(max_new_tokens=max(r["output_len"] for r in reqs), do_sample=False, eos_token_id=None,
                           pad_token_id=0)
    manager = model.init_continuous_batching(generation_config=gen)
    manager.start()
    useful = sum(r["output_len"] for r in reqs)
    t0 = time.perf_counter()
    for i, r in enumerate(reqs):
        manager.add_request(input_ids=r["prompt"], request_id=str(i), max_new_tokens=r["output_len"])
    done = 0
    while done < len(reqs):
        if manager.get_result(timeout=60) is None:
            raise RuntimeError(f"no result within 60 s after {done} of {len(reqs)} requests")
        done += 1
    dt = time.perf_counter() - t0
    manager.stop(block=True)
    return {"seconds": dt, "output_tokens": useful, "output_tokens_per_s": useful / dt}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", required=True, help="JSON from conveyor gpu-bench --workload-json")
    ap.add_argument("--batch-size", type=int, default=256, help="static batch size")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N requests (0: all)")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    import torch
    import transformers
    reqs = json.load(open(a.workload))
    if a.limit:
        reqs = reqs[:a.limit]
    out = {"transformers": transformers.__version__, "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0), "requests": len(reqs)}
    model = build_model(torch, transformers)
    for name, fn in (("static", lambda: run_static(torch, model, reqs, a.batch_size)),
                     ("continuous", lambda: run_continuous(torch, transformers, model, reqs))):
        try:
            out[name] = fn()
            print(f"hf {name:10s} {len(reqs)} requests: {out[name]['seconds']:.1f} s, "
                  f"{out[name]['output_tokens_per_s']:.0f} output tokens/s", flush=True)
        except Exception as e:  # report and go on: the other mode's number still counts
            out[name] = {"error": f"{type(e).__name__}: {e}"}
            print(f"hf {name}: could not run: {out[name]['error']}", file=sys.stderr, flush=True)
    if a.json:
        json.dump(out, open(a.json, "w"), indent=2)


if __name__ == "__main__":
    main()
