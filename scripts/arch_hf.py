"""The Hugging Face folders of scripts/make_arch_models.py: the same weights and vocabulary as its GGUF
files, in the layout a Hugging Face checkpoint has them (unpermuted Q/K, rope_scaling in config.json).

Byte-level BPE models (llama3, qwen2, qwen3) get a tokenizer.json. SentencePiece models (mistral) get
what Llama 2 and Mistral 7B folders ship: tokenizer.model, a SentencePiece ModelProto holding the
GGUF's pieces, scores and types, written with the sentencepiece package's own protobuf classes.
"""
import json
import os

import numpy as np
import safetensors


def rounded(x, dtype):
    """x rounded to dtype, returned as float32 (what both formats then hold exactly)."""
    if dtype == "f32":
        return x
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)  # bf16, round to nearest even
    bits = ((bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)) << np.uint64(16)
    return bits.astype(np.uint32).view(np.float32)


# The pre-tokenizer regexes of Llama 3 and Qwen2 tokenizer.json files (Split, Isolated).
PRE_REGEX = {
    "llama-bpe": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}
DTYPE_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def write_safetensors(path, weights, dtype):
    tensors, keep = {}, []
    for name, x in sorted(weights.items()):
        r = rounded(x, dtype)
        if dtype == "f32":
            data = np.ascontiguousarray(r.astype("<f4"))
        elif dtype == "f16":
            data = np.ascontiguousarray(r.astype("<f2"))
        else:
            data = np.ascontiguousarray((r.view(np.uint32) >> np.uint32(16)).astype("<u2"))
        keep.append(data)
        tensors[name] = safetensors.TensorSpec(dtype=DTYPE_NAMES[dtype], shape=list(x.shape), data_ptr=data.ctypes.data,
                                               data_len=data.nbytes)
    safetensors.serialize_file(tensors, path, {"format": "pt"})


def write_bpe_tokenizer(path, voc, merges):
    """tokenizer.json: byte-level BPE, the leading control tokens as special added tokens."""
    n_special = sum(1 for t in voc["types"] if t == 3)
    tok = {
        "version": "1.0",
        "added_tokens": [{"id": i, "content": voc["tokens"][i], "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i in range(n_special)],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": PRE_REGEX[voc["pre"]]}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(voc["tokens"]) if i >= n_special},
                  "merges": merges},
    }
    with open(path, "w") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)


def write_spm_model(path, voc):
    """tokenizer.model: a SentencePiece BPE ModelProto as Llama 2 / Mistral 7B ship it (byte fallback,
    <unk> <s> </s> at 0 1 2, identity normalizer with a dummy prefix), holding exactly the GGUF's
    pieces, scores and types (SentencePiece's piece types are GGUF's token types, 1..6)."""
    from sentencepiece import sentencepiece_model_pb2 as pb  # needs protobuf (requirements.txt)
    m = pb.ModelProto()
    for text, score, typ in zip(voc["tokens"], voc["scores"], voc["types"]):
        p = m.pieces.add()
        p.piece, p.score, p.type = text, score, typ
    t = m.trainer_spec
    t.model_type = pb.TrainerSpec.BPE
    t.vocab_size = len(voc["tokens"])
    t.byte_fallback = True
    t.unk_id, t.bos_id, t.eos_id, t.pad_id = voc["unk"], voc["bos"], voc["eos"], -1
    n = m.normalizer_spec
    n.name = "identity"
    n.add_dummy_prefix = True
    n.remove_extra_whitespaces = False
    n.escape_whitespaces = True
    with open(path, "wb") as f:
        f.write(m.SerializeToString(deterministic=True))


def write_hf(folder, a, weights, voc, dtype, n_ctx, merges):
    """config.json, model.safetensors, tokenizer.json or tokenizer.model, tokenizer_config.json."""
    os.makedirs(folder, exist_ok=True)
    write_safetensors(os.path.join(folder, "model.safetensors"), weights, dtype)
    cfg = {
        "architectures": [a["hf_arch"]], "model_type": a["model_type"], "hidden_size": a["n_embd"],
        "intermediate_size": a["n_ff"], "num_hidden_layers": a["n_layer"], "num_attention_heads": a["n_head"],
        "num_key_value_heads": a["n_head_kv"], "head_dim": a["head_dim"], "max_position_embeddings": n_ctx,
        "rms_norm_eps": a["eps"], "rope_theta": a["theta"], "vocab_size": a["n_vocab"],
        "tie_word_embeddings": a["tied"], "torch_dtype": DTYPE_NAMES[dtype],
        "hidden_act": "silu", "bos_token_id": voc["bos"], "eos_token_id": voc["eos"],
    }
    if "llama3_scaling" in a:
        cfg["rope_scaling"] = dict(rope_type="llama3", **a["llama3_scaling"])
    if a.get("qkv_bias"):
        cfg["attention_bias"] = True
    if voc["model"] == "llama":
        cfg["sliding_window"] = None  # Mistral 7B v0.2 and later
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    tcfg = {"chat_template": voc["template"], "add_bos_token": voc["add_bos"],
            "bos_token": voc["tokens"][voc["bos"]] if voc["bos"] is not None else None,
            "eos_token": voc["tokens"][voc["eos"]]}
    if voc["model"] == "llama":
        write_spm_model(os.path.join(folder, "tokenizer.model"), voc)
        tcfg.update(add_eos_token=False, unk_token=voc["tokens"][voc["unk"]], tokenizer_class="LlamaTokenizer",
                    legacy=False)
    else:
        write_bpe_tokenizer(os.path.join(folder, "tokenizer.json"), voc, merges)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, indent=2)
