#!/usr/bin/env python3
"""Tiny random-weight models of every architecture conveyor runs, as GGUF files and as Hugging Face
folders holding the very same weights.

  python scripts/make_arch_models.py OUT_DIR

writes, for each ARCH in llama3, qwen2, qwen3, mistral:
  OUT_DIR/ARCH.f32.gguf, ARCH.f16.gguf, ARCH.bf16.gguf
      llama.cpp's layout, as its converter (convert_hf_to_gguf.py) writes it: Llama/Mistral Q and K
      rows permuted for its adjacent-pair RoPE, Llama 3's rope_freqs tensor, norms and biases F32.
  OUT_DIR/ARCH.hf-{f32,f16,bf16}/
      config.json, tokenizer_config.json and model.safetensors in Hugging Face's layout (unpermuted
      Q/K; rope_scaling in config.json instead of a tensor), with tokenizer.json (byte-level BPE) or,
      for mistral, the SentencePiece tokenizer.model (scripts/arch_hf.py).
  OUT_DIR/manifest.json   the sha256 of every file written.

The weights come from a splitmix64 stream (exact integer arithmetic, then float32/float16/bfloat16
rounding), so every machine writes byte-identical files; scripts/make_arch_goldens.py records the
GGUF hashes next to llama.cpp's logits and the tests check them before comparing.

Sizes are tiny (hidden 64, 2 layers, a 300-token vocabulary) but every switch of the forward pass is
on: GQA, untied and tied heads, QKV bias (qwen2), per-head q/k RMSNorm with a head dim that is not
hidden/heads (qwen3), Llama 3 RoPE frequency factors, NEOX pairing, SentencePiece vocabulary (mistral).
"""
import argparse
import json
import math
import os
import sys

import gguf
import numpy as np

from arch_hf import rounded, write_hf  # scripts/arch_hf.py
from fetch_model import sha256  # scripts/fetch_model.py

MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)

# Shapes and RoPE per architecture. head_dim differs from n_embd / n_head for qwen3, as in Qwen3.
ARCHS = {
    "llama3": dict(gguf_arch="llama", hf_arch="LlamaForCausalLM", model_type="llama", n_embd=64, n_head=4,
                   n_head_kv=2, head_dim=16, n_ff=128, n_layer=2, theta=500000.0, eps=1e-5, tied=False,
                   vocab="bpe", pre="llama-bpe", llama3_scaling=dict(factor=8.0, low_freq_factor=1.0,
                                                                     high_freq_factor=4.0,
                                                                     original_max_position_embeddings=8192)),
    "qwen2": dict(gguf_arch="qwen2", hf_arch="Qwen2ForCausalLM", model_type="qwen2", n_embd=64, n_head=4,
                  n_head_kv=2, head_dim=16, n_ff=160, n_layer=2, theta=1000000.0, eps=1e-6, tied=True,
                  vocab="bpe", pre="qwen2", qkv_bias=True),
    "qwen3": dict(gguf_arch="qwen3", hf_arch="Qwen3ForCausalLM", model_type="qwen3", n_embd=64, n_head=4,
                  n_head_kv=2, head_dim=32, n_ff=128, n_layer=2, theta=1000000.0, eps=1e-6, tied=False,
                  vocab="bpe", pre="qwen2", qk_norm=True),
    "mistral": dict(gguf_arch="llama", hf_arch="MistralForCausalLM", model_type="mistral", n_embd=64, n_head=4,
                    n_head_kv=1, head_dim=16, n_ff=128, n_layer=2, theta=1000000.0, eps=1e-5, tied=False,
                    vocab="spm"),
}
N_CTX = 512


class Stream:
    """splitmix64, vectorised: the same numbers on every machine and numpy version."""

    def __init__(self, seed):
        self.state = np.uint64(seed)

    def uniform(self, n):  # in [-1, 1)
        idx = np.arange(1, n + 1, dtype=np.uint64)
        with np.errstate(over="ignore"):
            z = self.state + idx * np.uint64(0x9E3779B97F4A7C15)
            self.state = z[-1] if n else self.state
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            z = z ^ (z >> np.uint64(31))
        return ((z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53) * 2.0 - 1.0


# ---------------------------------------------------------------- vocabularies

def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BPE_MERGES = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ s", "r e", "Ġ w", "a t", "e n", "Ġ o",
              "Ġ c", "i s", "o r", "Ġ b", "a n", "Ġ f", "e s", "Ġ p", "a l", "Ġ m", "i t", "Ġ d", "a r",
              "Ġ h", "l e", "Ġ i", "o u", "Ġ l", "in g", "Ġ n", "e d", "Ġt h", "Ġ y", "o f", "Ġt o"]


def bpe_vocab(specials):
    """Byte-level BPE: specials, the 256 byte tokens, then each merge's result."""
    b2u = bytes_to_unicode()
    tokens = list(specials) + [b2u[b] for b in range(256)]
    known = set(tokens)
    for m in BPE_MERGES:
        left, right = m.split(" ")
        assert left in known and right in known, m
        if left + right not in known:
            tokens.append(left + right)
            known.add(left + right)
    types = [3] * len(specials) + [1] * (len(tokens) - len(specials))
    return tokens, types


SPM_PIECES = ["▁", "e", "t", "a", "o", "n", "▁t", "he", "▁the", "in", "▁a", "er", "on", "▁s", "re", "▁w", "at",
              "en", "▁o", "▁c", "is", "or", "▁b", "an", "▁f", "es", "▁p", "al", "▁m", "it", "▁d", "ar", "▁h",
              "le", "▁i", "ou", "▁l", "ing", "▁n", "ed", "▁th", "▁y", "of", "▁to", "▁of", "▁and", "▁is"]


def spm_vocab():
    """SentencePiece (Llama 2 / Mistral 7B style): <unk> <s> </s>, 256 byte pieces, scored pieces."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + SPM_PIECES
    types = [2, 3, 3] + [6] * 256 + [1] * len(SPM_PIECES)
    scores = [0.0, 0.0, 0.0] + [0.0] * 256 + [-float(i) for i in range(len(SPM_PIECES))]
    return tokens, types, scores


QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"]


# ---------------------------------------------------------------- weights

def hf_weights(a):
    """The model's tensors in Hugging Face layout (name -> float32 array, row-major [out, in])."""
    rng = Stream(0xC0FFEE + sum(map(ord, a["name"])))
    d, hd, nh, nkv, ff, nv = a["n_embd"], a["head_dim"], a["n_head"], a["n_head_kv"], a["n_ff"], a["n_vocab"]

    def mat(rows, cols, scale=None):
        s = scale if scale is not None else 1.0 / math.sqrt(cols)
        return (rng.uniform(rows * cols) * s * math.sqrt(3.0)).astype(np.float32).reshape(rows, cols)

    def norm(n):
        return (1.0 + 0.1 * rng.uniform(n)).astype(np.float32)

    # A tied head scores each token by its embedding; at full scale the last input token's own
    # embedding dominates and greedy repeats it, so tied models get small embeddings.
    w = {"model.embed_tokens.weight": mat(nv, d, 0.1 if a["tied"] else 1.0)}
    for l in range(a["n_layer"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = norm(d)
        w[p + "self_attn.q_proj.weight"] = mat(nh * hd, d)
        w[p + "self_attn.k_proj.weight"] = mat(nkv * hd, d)
        w[p + "self_attn.v_proj.weight"] = mat(nkv * hd, d)
        if a.get("qkv_bias"):
            w[p + "self_attn.q_proj.bias"] = (0.5 * rng.uniform(nh * hd)).astype(np.float32)
            w[p + "self_attn.k_proj.bias"] = (0.5 * rng.uniform(nkv * hd)).astype(np.float32)
            w[p + "self_attn.v_proj.bias"] = (0.5 * rng.uniform(nkv * hd)).astype(np.float32)
        if a.get("qk_norm"):
            w[p + "self_attn.q_norm.weight"] = norm(hd)
            w[p + "self_attn.k_norm.weight"] = norm(hd)
        w[p + "self_attn.o_proj.weight"] = mat(d, nh * hd)
        w[p + "post_attention_layernorm.weight"] = norm(d)
        w[p + "mlp.gate_proj.weight"] = mat(ff, d)
        w[p + "mlp.up_proj.weight"] = mat(ff, d)
        w[p + "mlp.down_proj.weight"] = mat(d, ff)
    w["model.norm.weight"] = norm(d)
    if not a["tied"]:
        w["lm_head.weight"] = mat(nv, d)
    return w


def permute(w, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute: HF's half-split RoPE rows -> adjacent pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(a):
    """convert_hf_to_gguf.py's rope_freqs for rope_scaling.rope_type == "llama3"."""
    s = a["llama3_scaling"]
    freqs = 1.0 / (a["theta"] ** (np.arange(0, a["head_dim"], 2, dtype=np.float32) / a["head_dim"]))
    low_wl = s["original_max_position_embeddings"] / s["low_freq_factor"]
    high_wl = s["original_max_position_embeddings"] / s["high_freq_factor"]
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(s["factor"])
        else:
            smooth = (s["original_max_position_embeddings"] / wl - s["low_freq_factor"]) / (
                s["high_freq_factor"] - s["low_freq_factor"])
            out.append(1.0 / ((1 - smooth) / s["factor"] + smooth))
    return np.array(out, dtype=np.float32)


# ---------------------------------------------------------------- writers

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
          "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
LLAMA3_CHAT = ("{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
               "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
               "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
MISTRAL_CHAT = ("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
                "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token }}"
                "{% endif %}{% endfor %}")


def vocab_of(a):
    if a["vocab"] == "spm":
        tokens, types, scores = spm_vocab()
        return dict(model="llama", tokens=tokens, types=types, scores=scores, bos=1, eos=2, unk=0,
                    add_bos=True, template=MISTRAL_CHAT)
    if a["name"] == "llama3":
        tokens, types = bpe_vocab(LLAMA3_SPECIALS)
        return dict(model="gpt2", pre=a["pre"], tokens=tokens, types=types, bos=0, eos=2, add_bos=True,
                    template=LLAMA3_CHAT)
    tokens, types = bpe_vocab(QWEN_SPECIALS)
    return dict(model="gpt2", pre=a["pre"], tokens=tokens, types=types, bos=None, eos=2, add_bos=False,
                template=CHATML)


def gguf_tensor(w, name, x, dtype):
    x = rounded(x, dtype)
    if dtype == "f32" or x.ndim == 1:  # norms, biases, rope factors stay F32, as llama.cpp's converter keeps them
        w.add_tensor(name, x.astype(np.float32))
    elif dtype == "f16":
        w.add_tensor(name, x.astype(np.float16))
    else:
        raw = (x.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
        w.add_tensor(name, raw.view(np.uint8).reshape(x.shape[0], x.shape[1] * 2), raw_dtype=gguf.GGMLQuantizationType.BF16)


# One layer's tensors, in file order: (GGUF name, Hugging Face name, present in every architecture).
LAYER_TENSORS = (
    ("attn_norm.weight", "input_layernorm.weight", True),
    ("attn_q.weight", "self_attn.q_proj.weight", True),
    ("attn_k.weight", "self_attn.k_proj.weight", True),
    ("attn_v.weight", "self_attn.v_proj.weight", True),
    ("attn_q.bias", "self_attn.q_proj.bias", False),
    ("attn_k.bias", "self_attn.k_proj.bias", False),
    ("attn_v.bias", "self_attn.v_proj.bias", False),
    ("attn_q_norm.weight", "self_attn.q_norm.weight", False),
    ("attn_k_norm.weight", "self_attn.k_norm.weight", False),
    ("attn_output.weight", "self_attn.o_proj.weight", True),
    ("ffn_norm.weight", "post_attention_layernorm.weight", True),
    ("ffn_gate.weight", "mlp.gate_proj.weight", True),
    ("ffn_up.weight", "mlp.up_proj.weight", True),
    ("ffn_down.weight", "mlp.down_proj.weight", True),
)


def write_gguf(path, a, weights, voc, dtype):
    w = gguf.GGUFWriter(path, a["gguf_arch"])
    w.add_name(f"tiny-{a['name']}")
    w.add_context_length(N_CTX)
    for add, key in ((w.add_embedding_length, "n_embd"), (w.add_block_count, "n_layer"),
                     (w.add_feed_forward_length, "n_ff"), (w.add_head_count, "n_head"),
                     (w.add_head_count_kv, "n_head_kv"), (w.add_key_length, "head_dim"),
                     (w.add_value_length, "head_dim"), (w.add_rope_dimension_count, "head_dim"),
                     (w.add_rope_freq_base, "theta"), (w.add_layer_norm_rms_eps, "eps")):
        add(a[key])
    w.add_vocab_size(a["n_vocab"])
    # The vocabulary's keys in file order; a key the vocabulary lacks (pre, scores, bos, unk) is left out.
    for add, key in ((w.add_tokenizer_model, "model"), (w.add_tokenizer_pre, "pre"), (w.add_token_list, "tokens"),
                     (w.add_token_types, "types"), (w.add_token_scores, "scores")):
        if voc.get(key) is not None:
            add(voc[key])
    if "scores" in voc:
        w.add_add_space_prefix(True)
    else:
        w.add_token_merges(BPE_MERGES)
    for add, key in ((w.add_bos_token_id, "bos"), (w.add_eos_token_id, "eos"), (w.add_unk_token_id, "unk"),
                     (w.add_add_bos_token, "add_bos"), (w.add_chat_template, "template")):
        if voc.get(key) is not None:
            add(voc[key])

    nh, nkv = a["n_head"], a["n_head_kv"]
    permuted = a["gguf_arch"] == "llama"
    gguf_tensor(w, "token_embd.weight", weights["model.embed_tokens.weight"], dtype)
    if "llama3_scaling" in a:
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(a))
    for l in range(a["n_layer"]):
        p, b = f"model.layers.{l}.", f"blk.{l}."
        for gguf_name, hf_name, required in LAYER_TENSORS:
            if not required and p + hf_name not in weights:
                continue
            x = weights[p + hf_name]
            if permuted and gguf_name in ("attn_q.weight", "attn_k.weight"):
                x = permute(x, nh if gguf_name == "attn_q.weight" else nkv)
            gguf_tensor(w, b + gguf_name, x, dtype)
    gguf_tensor(w, "output_norm.weight", weights["model.norm.weight"], dtype)
    if "lm_head.weight" in weights:
        gguf_tensor(w, "output.weight", weights["lm_head.weight"], dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


DTYPES = ("f32", "f16", "bf16")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="output directory")
    ap.add_argument("--arch", action="append", choices=sorted(ARCHS), help="only these (default: all)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    manifest = {}
    for name in args.arch or ARCHS:
        a = dict(ARCHS[name], name=name)
        voc = vocab_of(a)
        a["n_vocab"] = len(voc["tokens"])
        weights = hf_weights(a)
        for dtype in DTYPES:
            path = os.path.join(args.out, f"{name}.{dtype}.gguf")
            write_gguf(path, a, weights, voc, dtype)
            manifest[os.path.basename(path)] = sha256(path)
            folder = os.path.join(args.out, f"{name}.hf-{dtype}")
            write_hf(folder, a, weights, voc, dtype, N_CTX, BPE_MERGES)
            for fn in sorted(os.listdir(folder)):
                manifest[f"{name}.hf-{dtype}/{fn}"] = sha256(os.path.join(folder, fn))
        print(f"make_arch_models: {name}: vocab {a['n_vocab']}, written {', '.join(DTYPES)}", file=sys.stderr)
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
