#!/usr/bin/env python3
"""Greedy continuations of SmolLM2-135M-Instruct Q4_1 from llama.cpp, for tests/data.

Reference: llama-cpp-python (it builds llama.cpp from source) running greedily (argmax,
ties to the lowest id), flash attention off, F16 KV cache, CPU, twice:
  - "f32": on the same Q4_1 weights dequantized to F32 (written by this script with the gguf
    package), so llama.cpp multiplies in f32 as conveyor does. The tests hold conveyor to these.
  - "native": on the Q4_1 file as is. llama.cpp's CPU backend then rounds every activation row
    to 8 bits (Q8_1) before each product; that rounding amplifies last-bit differences (a
    different BLAS summation order alone moves logits by ~0.8 under it), so no other
    implementation can follow it token for token. Recorded for the comparison in
    docs/benchmarks.md.
For every prompt: the prompt ids, 32 greedy tokens (fewer if an end-of-generation token comes
first, which is then the last id) and llama.cpp's own top-1 minus top-2 logit margin at each
step, so a test can excuse a divergence that follows a near-tie.

Run (about a minute on 2 cores; needs ~600 MB in $TMPDIR):
    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install llama-cpp-python==0.3.36 gguf numpy jinja2
    /tmp/ref/bin/python scripts/make_generation_goldens.py [--model PATH] > tests/data/smollm2_greedy.json
"""
import argparse
import hashlib
import json
import os
import sys
import tempfile

import gguf

import jinja2
import llama_cpp
import numpy as np

N_TOKENS = 32
PROMPTS = [
    ("prose", False, "The history of the printing press begins in"),
    ("code", False, "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"),
    ("numbers", False, "1, 2, 3, 5, 8, 13, 21, 34,"),
    ("arithmetic", False, "Question: What is 12 times 7?\nAnswer:"),
    ("french", False, "La tour Eiffel est situ\u00e9e \u00e0"),
    ("cjk_emoji", False, "\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002 \U0001F600 Tokyo is"),
    ("json", False, "{\"name\": \"conveyor\", \"language\": \"C++\", \"features\": ["),
    ("chat_capital", True, "What is the capital of France?"),
    ("chat_haiku", True, "Write a haiku about a data pipeline."),
    ("chat_code", True, "Write a Python function that reverses a string."),
]


def default_model():
    base = os.environ.get("CONVEYOR_CACHE") or os.path.expanduser("~/.cache/conveyor/models")
    return os.path.join(base, "SmolLM2-135M-Instruct.Q4_1.gguf")


def dequantize_to_f32(src, dst):
    """Writes `src` with every tensor dequantized to F32 and the metadata unchanged."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, r.fields["general.architecture"].contents())
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, field.contents(), field.types[0], sub_type=field.types[-1])
        else:
            w.add_key_value(key, field.contents(), field.types[0])
    for t in r.tensors:
        data = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w.add_tensor(t.name, data.reshape([int(x) for x in reversed(t.shape)]), raw_dtype=gguf.GGMLQuantizationType.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def greedy(llm, ids):
    """N_TOKENS greedy ids (stopping after an end-of-generation id) and the top-2 margins."""
    eog = {llm.token_eos(), 0}
    llm.reset()
    llm.eval(ids)
    out, margins = [], []
    for _ in range(N_TOKENS):
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float32)
        top2 = np.argsort(-logits, kind="stable")[:2]
        tok = int(np.argmax(logits))
        out.append(tok)
        margins.append(round(float(logits[top2[0]] - logits[top2[1]]), 5))
        if tok in eog:
            break
        llm.eval([tok])
    return out, margins


def render_chat(template, user_text):
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=[{"role": "user", "content": user_text}], add_generation_prompt=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=default_model())
    args = ap.parse_args()
    with open(args.model, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    native = llama_cpp.Llama(model_path=args.model, n_ctx=512, n_threads=2, flash_attn=False, verbose=False)
    template = native.metadata["tokenizer.chat_template"]
    prompts = []
    for name, chat, text in PROMPTS:
        full = render_chat(template, text) if chat else text
        prompts.append((name, chat, full, native.tokenize(full.encode("utf-8"), add_bos=False, special=chat)))
    native_runs = [greedy(native, ids) for _, _, _, ids in prompts]
    del native
    with tempfile.TemporaryDirectory() as tmp:
        f32_path = os.path.join(tmp, "f32.gguf")
        dequantize_to_f32(args.model, f32_path)
        f32 = llama_cpp.Llama(model_path=f32_path, n_ctx=512, n_threads=2, flash_attn=False, verbose=False)
        f32_runs = [greedy(f32, ids) for _, _, _, ids in prompts]
        detok = lambda toks: f32.detokenize(toks).decode("utf-8", errors="replace")
        cases = []
        for (name, chat, full, ids), (toks, margins), (ntoks, nmargins) in zip(prompts, f32_runs, native_runs):
            cases.append({"name": name, "chat": chat, "text": full, "prompt_ids": ids, "tokens": toks, "margins": margins,
                          "native_tokens": ntoks, "native_margins": nmargins, "completion": detok(toks)})
            print(f"{name}: {cases[-1]['completion']!r}", file=sys.stderr)
        del f32
    json.dump({"reference": f"llama-cpp-python {llama_cpp.__version__} (llama.cpp CPU, greedy, flash_attn off, f16 KV); "
                            "tokens/margins: weights dequantized to F32; native_*: the Q4_1 file as is",
               "model_sha256": digest, "n_tokens": N_TOKENS, "cases": cases}, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()
