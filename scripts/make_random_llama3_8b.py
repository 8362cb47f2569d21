#!/usr/bin/env python3
"""Writes a random-weight GGUF shaped like Llama-3-8B in Q4_K_M's type mix, for memory and speed
benchmarks of an 8B model without downloading one.

Not a model: weights are random quant blocks. They are written block by block (no f32 tensor is
ever built), with fp16 scales chosen so a weight's std is about 0.02 and activations stay finite.
Type mix follows llama-quantize's Q4_K_M (src/llama-quant.cpp): Q4_K everywhere, Q6_K for
output.weight and for attn_v / ffn_down in the layers where use_more_bits() says so; norms F32.
The tokenizer is SmolLM2's BPE vocab (pre 'smollm', which llama.cpp and conveyor both accept),
padded to Llama-3's 128256 tokens with unique normal tokens that no merge produces.

    .venv/bin/python scripts/make_random_llama3_8b.py [OUT.gguf] [--tokenizer-from SmolLM2.gguf]
"""
import argparse
import os
import sys
import time

import numpy as np
import gguf

QK_K = 256
Q4_K_BYTES = 144   # half d; half dmin; u8 scales[12]; u8 qs[128]
Q6_K_BYTES = 210   # u8 ql[128]; u8 qh[64]; i8 scales[16]; half d
N_EMBD, N_LAYER, N_HEAD, N_HEAD_KV, N_FF, N_VOCAB = 4096, 32, 32, 8, 14336, 128256
ROWS_PER_CHUNK = 1024
FILE_TYPE_Q4_K_M = 15


def cache_dir():
    return os.environ.get("CONVEYOR_CACHE") or os.path.expanduser("~/.cache/conveyor")


def use_more_bits(i_layer, n_layer):
    """llama-quant.cpp: the layers whose attn_v / ffn_down Q4_K_M stores as Q6_K."""
    return i_layer < n_layer // 8 or i_layer >= 7 * n_layer // 8 or (i_layer - n_layer // 8) % 3 == 2


def q4_k_blocks(rng, n):
    """n random Q4_K blocks. w = d*sc*q - dmin*m with q in 0..15, sc = m in 1..4, dmin = 7.5*d,
    so each sub-block is centred on 0 and std(w) = d*sc*4.6, about 0.01..0.03."""
    b = np.empty((n, Q4_K_BYTES), dtype=np.uint8)
    d = rng.uniform(1e-3, 2e-3, n).astype(np.float16)
    b[:, 0:2] = d.view(np.uint8).reshape(n, 2)
    b[:, 2:4] = (d.astype(np.float32) * 7.5).astype(np.float16).view(np.uint8).reshape(n, 2)
    sc = rng.integers(1, 5, (n, 8), dtype=np.uint8)
    # get_scale_min_k4 with every value < 16: scales[0:4] = sc[0:4], scales[4:8] = m[0:4],
    # scales[8:12] = sc[4:8] | m[4:8] << 4 (the top two bits of scales[0:8] stay 0).
    b[:, 4:8] = sc[:, 0:4]
    b[:, 8:12] = sc[:, 0:4]
    b[:, 12:16] = sc[:, 4:8] | (sc[:, 4:8] << 4)
    b[:, 16:] = rng.integers(0, 256, (n, 128), dtype=np.uint8)
    return b


def q6_k_blocks(rng, n):
    """n random Q6_K blocks. w = d*scale*(q - 32), q in 0..63, scale in 1..2, d in 5e-4..1e-3."""
    b = np.empty((n, Q6_K_BYTES), dtype=np.uint8)
    b[:, 0:192] = rng.integers(0, 256, (n, 192), dtype=np.uint8)
    b[:, 192:208] = rng.integers(1, 3, (n, 16), dtype=np.uint8)
    b[:, 208:210] = rng.uniform(5e-4, 1e-3, n).astype(np.float16).view(np.uint8).reshape(n, 2)
    return b


Q4_K = gguf.GGMLQuantizationType.Q4_K
Q6_K = gguf.GGMLQuantizationType.Q6_K
F32 = gguf.GGMLQuantizationType.F32
BLOCK = {Q4_K: (Q4_K_BYTES, q4_k_blocks), Q6_K: (Q6_K_BYTES, q6_k_blocks)}


def tensor_plan():
    """(name, (rows, cols), type) in file order; cols is ggml's ne[0] (the input width)."""
    kv = N_EMBD // N_HEAD * N_HEAD_KV
    plan = [("token_embd.weight", (N_VOCAB, N_EMBD), Q4_K)]
    for i in range(N_LAYER):
        more = use_more_bits(i, N_LAYER)
        p = f"blk.{i}."
        plan += [
            (p + "attn_norm.weight", (N_EMBD,), F32),
            (p + "attn_q.weight", (N_EMBD, N_EMBD), Q4_K),
            (p + "attn_k.weight", (kv, N_EMBD), Q4_K),
            (p + "attn_v.weight", (kv, N_EMBD), Q6_K if more else Q4_K),
            (p + "attn_output.weight", (N_EMBD, N_EMBD), Q4_K),
            (p + "ffn_norm.weight", (N_EMBD,), F32),
            (p + "ffn_gate.weight", (N_FF, N_EMBD), Q4_K),
            (p + "ffn_up.weight", (N_FF, N_EMBD), Q4_K),
            (p + "ffn_down.weight", (N_EMBD, N_FF), Q6_K if more else Q4_K),
        ]
    plan += [("output_norm.weight", (N_EMBD,), F32), ("output.weight", (N_VOCAB, N_EMBD), Q6_K)]
    return plan


def nbytes(shape, qtype):
    if qtype == F32:
        return 4 * int(np.prod(shape))
    rows, cols = shape
    return rows * (cols // QK_K) * BLOCK[qtype][0]


def read_tokenizer(path):
    r = gguf.GGUFReader(path)

    def scalar(key):
        f = r.fields.get(key)
        return None if f is None else f.contents()

    tok = {
        "tokens": scalar("tokenizer.ggml.tokens"),
        "types": [int(t) for t in scalar("tokenizer.ggml.token_type")],
        "merges": scalar("tokenizer.ggml.merges"),
        "pre": scalar("tokenizer.ggml.pre") or "default",
        "template": scalar("tokenizer.chat_template"),
    }
    for k in ("bos", "eos", "unknown", "padding"):
        tok[k] = scalar(f"tokenizer.ggml.{k}_token_id")
    return tok


def add_metadata(w, tok):
    w.add_name("random Llama-3-8B shape (not a model)")
    w.add_file_type(FILE_TYPE_Q4_K_M)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(8192)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(N_VOCAB)
    tokens, types = list(tok["tokens"]), list(tok["types"])
    known = set(tokens)
    i = len(tokens)
    while len(tokens) < N_VOCAB:
        t = f"zzfiller{i}"  # ASCII: the same bytes in GPT-2's byte-level alphabet; no merge builds it
        assert t not in known
        tokens.append(t)
        types.append(int(gguf.TokenType.NORMAL))
        i += 1
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(tok["pre"])
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(tok["merges"])
    w.add_add_bos_token(False)
    for k, fn in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id),
                  ("unknown", w.add_unk_token_id), ("padding", w.add_pad_token_id)):
        if tok[k] is not None:
            fn(int(tok[k]))
    if tok["template"]:
        w.add_chat_template(tok["template"])


def pad(f, align):
    n = (-f.tell()) % align
    if n:
        f.write(b"\0" * n)


def write_data(f, plan, align, seed):
    rng = np.random.default_rng(seed)
    total = sum(nbytes(s, t) for _, s, t in plan)
    done, start = 0, time.time()
    for name, shape, qtype in plan:
        pad(f, align)
        if qtype == F32:
            np.ones(shape, dtype=np.float32).tofile(f)
        else:
            rows, cols = shape
            size, make = BLOCK[qtype]
            for r0 in range(0, rows, ROWS_PER_CHUNK):
                n = min(ROWS_PER_CHUNK, rows - r0) * (cols // QK_K)
                make(rng, n).tofile(f)
        done += nbytes(shape, qtype)
        if name.endswith("ffn_down.weight") or name in ("token_embd.weight", "output.weight"):
            print(f"  {name}: {done / 2**30:.2f} / {total / 2**30:.2f} GiB, {time.time() - start:.0f} s", file=sys.stderr)
    pad(f, align)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=os.path.join(cache_dir(), "models", "random-llama3-8b.Q4_K_M.gguf"))
    ap.add_argument("--tokenizer-from", default=os.path.join(cache_dir(), "models", "SmolLM2-135M-Instruct.Q4_1.gguf"),
                    help="GGUF whose gpt2/BPE tokenizer is copied (padded to 128256 tokens)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true", help="overwrite an existing file")
    args = ap.parse_args()
    if os.path.exists(args.out) and not args.force:
        print(f"{args.out} exists (--force to rewrite)", file=sys.stderr)
        print(args.out)
        return 0
    if not os.path.exists(args.tokenizer_from):
        sys.exit(f"tokenizer source {args.tokenizer_from} not found. HINT: .venv/bin/python scripts/fetch_model.py")
    plan = tensor_plan()
    total = sum(nbytes(s, t) for _, s, t in plan)
    print(f"writing {args.out}: {len(plan)} tensors, {total / 2**30:.2f} GiB of weights", file=sys.stderr)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".part"
    w = gguf.GGUFWriter(tmp, "llama")
    add_metadata(w, read_tokenizer(args.tokenizer_from))
    for name, shape, qtype in plan:
        w.add_tensor_info(name, shape, np.dtype(np.float32), nbytes(shape, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    f = w.fout[0]
    write_data(f, plan, w.data_alignment, args.seed)
    f.close()
    os.replace(tmp, args.out)
    print(f"done: {os.path.getsize(args.out) / 2**30:.2f} GiB", file=sys.stderr)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
