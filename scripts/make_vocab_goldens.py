#!/usr/bin/env python3
"""Golden tokenizer data from llama.cpp itself for the Qwen2, SentencePiece (Llama 2 / Mistral) and
Llama 3 vocabularies that ship with llama.cpp's source (models/ggml-vocab-*.gguf, vocab-only GGUFs
of the real tokenizers).

Ids come from llama.cpp's `llama-tokenize` (scripts/build_llama_cpp.sh builds it), run once per text
and flag set with --ids --no-escape on a file holding the exact bytes:
  ids          add_special = false (--no-bos), parse_special as recorded (--no-parse-special)
  ids_special  add_special = true (BOS/EOS as the vocabulary wants them)
llama-tokenize cannot turn ids back into text, so the text side comes from scripts/llama_ref/llama_detokenize.cpp
(scripts/llama_ref/build.sh llama_detokenize builds it against the same llama.cpp libraries):
  detokenized          llama_detokenize(ids, remove_special=false, unparse_special=false)
  detokenized_special  the same with unparse_special=true
  pieces               llama_token_to_piece(id, lstrip=0, special=false) per id, as hex (a piece
                       may be part of a UTF-8 character)
and, per vocabulary, llama.cpp's n_tokens, bos, eos, add_bos, add_eos and end-of-generation ids.

Writes tests/data/vocab_goldens.json (stable layout, deterministic: fixed inputs, no sampling).
Texts: scripts/tokenizer_texts.py (shared with make_tokenizer_goldens.py) plus EXTRA below.

  scripts/make_vocab_goldens.py [--out tests/data/vocab_goldens.json]
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

from tokenizer_texts import TEXTS

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION = "0.3.36"  # llama-cpp-python sdist whose vendored llama.cpp scripts/fetch_llama_src.sh pins
VOCABS = ["ggml-vocab-qwen2.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf"]

BOTH = (False, True)
# Texts that exercise what the three vocabularies add: SentencePiece's <s>, </s>, <unk>, the space
# prefix after special tokens and the literal U+2581; Qwen's </s> (a normal token llama.cpp makes
# control and end-of-generation), its user-defined [PAD...] tokens and ChatML; Llama 3's headers.
EXTRA = [
    ("<s>", BOTH),
    ("</s>", BOTH),
    ("<unk>", BOTH),
    ("<s>Hello</s> world<s> again", BOTH),
    ("<s> <s>  x</s>\n</s>", BOTH),
    (" leading space", BOTH),
    ("literal \u2581 lower one eighth block\u2581\u2581x", BOTH),
    ("[PAD151646] and [PAD151935]x", BOTH),
    ("<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\n</s>?<|im_end|>\n<|im_start|>assistant\n", BOTH),
    ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n", BOTH),
    ("12345678901234567890 1 22 333 4444 55555", BOTH),
    ("\u00e9\u0301\u0327 \U0001F9D1\u200D\U0001F4BB \u0915\u094D\u0937 \u0e01\u0e33", BOTH),
]


def sh(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def tokenize(exe, vocab, text, add_special, parse_special):
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write(text.encode("utf-8"))
        path = f.name
    try:
        cmd = [exe, "-m", vocab, "-f", path, "--ids", "--no-escape", "--log-disable"]
        if not add_special:
            cmd.append("--no-bos")
        if not parse_special:
            cmd.append("--no-parse-special")
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    line = [ln for ln in out.splitlines() if ln.startswith("[")][-1]
    return json.loads(line)


def detokenize(exe, vocab, id_lists):
    """One llama-detokenize run for all sequences: (detokenized, detokenized_special, pieces)."""
    stdin = "".join(" ".join(map(str, ids)) + "\n" for ids in id_lists)
    out = subprocess.run([exe, vocab], input=stdin, check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        plain, special, pieces = line.split(" ")
        rows.append((bytes.fromhex(plain).decode("utf-8"), bytes.fromhex(special).decode("utf-8"),
                     [] if pieces == "-" else pieces.split(",")))
    assert len(rows) == len(id_lists), "llama-detokenize answered %d of %d lines" % (len(rows), len(id_lists))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "data", "vocab_goldens.json"))
    args = ap.parse_args()

    src = sh(os.path.join(HERE, "fetch_llama_src.sh"))
    detok = sh(os.path.join(HERE, "llama_ref", "build.sh"), "llama_detokenize")
    tok = os.path.join(os.path.dirname(detok), "llama-tokenize")
    if not os.access(tok, os.X_OK):
        sys.exit(f"{tok} missing. HINT: run scripts/build_llama_cpp.sh (it builds llama-tokenize)")
    version = subprocess.run([tok, "--version"], capture_output=True, text=True)
    version = (version.stdout + version.stderr).splitlines()[0].strip()

    doc = {
        "reference": f"llama.cpp vendored in llama-cpp-python {VERSION} ({version}); ids from llama-tokenize, "
                     "text from scripts/llama_ref/llama_detokenize.cpp",
        "llama_cpp_python": VERSION,
        "vocabs": [],
    }
    for name in VOCABS:
        path = os.path.join(src, "models", name)
        with open(path, "rb") as f:
            data = f.read()
        info = json.loads(sh(detok, path, "--info"))
        cases = []
        for text, flags in TEXTS + EXTRA:
            for special in flags:
                cases.append({
                    "text": text,
                    "parse_special": special,
                    "ids": tokenize(tok, path, text, False, special),
                    "ids_special": tokenize(tok, path, text, True, special),
                })
        for case, (plain, special, pieces) in zip(cases, detokenize(detok, path, [c["ids"] for c in cases])):
            case.update(detokenized=plain, detokenized_special=special, pieces=pieces)
        doc["vocabs"].append({"file": name, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
                              **info, "cases": cases})
        print(f"{name}: {len(cases)} cases", file=sys.stderr)

    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
