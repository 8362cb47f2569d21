#!/usr/bin/env python3
"""Golden tokenizer data for conveyor's SmolLM2 tokenizer, produced by llama.cpp (llama-cpp-python).

Writes tests/data/smollm2_tokenize.json:
  reference       "llama-cpp-python <version>"
  model_sha256    sha256 of the GGUF the ids come from
  chat_template   tokenizer.chat_template of that GGUF
  cases[]         text, parse_special, ids (llama_tokenize, add_special=False),
                  detokenized / detokenized_special (llama_detokenize with unparse_special
                  False / True, remove_special False), py_detokenize (Llama.detokenize, which
                  differs: it strips a leading space after a BOS id and drops pieces > 32 bytes)
  chat[]          messages, add_generation_prompt, rendered (the GGUF chat template rendered by
                  llama-cpp-python's Jinja2ChatFormatter) and its ids with parse_special=True

Setup and run (deterministic: fixed inputs, no sampling, stable JSON layout):
  pip install llama-cpp-python==0.3.36 gguf numpy
  python scripts/make_tokenizer_goldens.py \
      --model ~/.cache/conveyor/models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --out tests/data/smollm2_tokenize.json
"""
import argparse
import ctypes
import hashlib
import json
import os

import gguf
import llama_cpp
from llama_cpp import Llama
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from tokenizer_texts import TEXTS  # shared with scripts/make_vocab_goldens.py

CHATS = [
    ([{"role": "user", "content": "Hello!"}], True),
    ([{"role": "user", "content": "Hello!"}], False),
    ([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}], True),
    ([{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
      {"role": "user", "content": "And 3+3?"}], True),
    ([{"role": "system", "content": "S"}, {"role": "user", "content": "a"},
      {"role": "assistant", "content": "b"}], False),
    ([{"role": "user", "content": "Ünïcödé 🚀 and\nnewlines\n"}], True),
]


def llama_detokenize(llm, ids, special):
    arr = (llama_cpp.llama_token * len(ids))(*ids)
    size = 64 + 16 * len(ids)
    while True:
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_detokenize(llm._model.vocab, arr, len(ids), buf, size, False, special)
        if n >= 0:
            return buf.raw[:n]
        size = -n + 1


def as_text(b):
    return b.decode("utf-8")  # every golden text is complete UTF-8; fail loudly otherwise


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.expanduser(
        "~/.cache/conveyor/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--out", default="tests/data/smollm2_tokenize.json")
    args = ap.parse_args()

    with open(args.model, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    llm = Llama(model_path=args.model, vocab_only=True, verbose=False)
    template = str(gguf.GGUFReader(args.model).fields["tokenizer.chat_template"].contents())

    cases = []
    for text, flags in TEXTS:
        for special in flags:
            ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
            cases.append({
                "text": text,
                "parse_special": special,
                "ids": ids,
                "detokenized": as_text(llama_detokenize(llm, ids, False)),
                "detokenized_special": as_text(llama_detokenize(llm, ids, True)),
                "py_detokenize": as_text(llm.detokenize(ids)),
            })

    chats = []
    for messages, gen in CHATS:
        fmt = Jinja2ChatFormatter(template=template, eos_token="<|im_end|>", bos_token="<|im_start|>",
                                  add_generation_prompt=gen)
        rendered = fmt(messages=messages).prompt
        chats.append({
            "messages": messages,
            "add_generation_prompt": gen,
            "rendered": rendered,
            "ids": llm.tokenize(rendered.encode("utf-8"), add_bos=False, special=True),
        })

    doc = {
        "reference": "llama-cpp-python " + llama_cpp.__version__,
        "model_sha256": sha,
        "chat_template": template,
        "cases": cases,
        "chat": chats,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases and {len(chats)} chats to {args.out}")


if __name__ == "__main__":
    main()
