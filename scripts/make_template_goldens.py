#!/usr/bin/env python3
"""Golden chat-template renderings for conveyor's model/text/chat_template.cpp, produced by llama.cpp.

For each template (files from the pinned llama.cpp source's models/templates/, plus SmolLM2's own
template read from its GGUF) this starts llama.cpp's llama-server with
`--jinja --chat-template-file <file>` and the SmolLM2 model on a free loopback port, and posts
each message set to `POST /apply-template` ({"messages": [...], "add_generation_prompt": b});
the server answers {"prompt": "..."} or, when the template refuses the messages
(raise_exception), an error.

Writes tests/data/chat_template_goldens.json:
  llama_src_version  scripts/fetch_llama_src.sh's pinned version (the test checks the installed
                   engine and templates are that version: scripts/build_jinja.sh's stamp)
  reference        "llama.cpp as vendored in llama-cpp-python <version>" and `llama-server --version`
  model, model_sha256   the GGUF llama-server loaded: bos_token / eos_token (their texts, which
                   llama-server passes to the template) and add_bos / add_eos (a leading BOS text
                   is dropped from the prompt when the vocab adds BOS itself) come from it
  bos_token, eos_token, add_bos, add_eos
  now_unix, tz     the time the renders ran (TZ=UTC): llama-server passes date_string/datetime
                   from its clock, and Llama 3.x templates print it
  templates[]      name, file (under models/templates/, or null: source inline), sha256, source
                   (only for the inline one)
  cases[]          template, messages, add_generation_prompt, and prompt or error (llama.cpp's
                   message); or (tool calling) template, tool_set, body (messages, tools,
                   tool_choice, parallel_tool_calls as posted), and prompt or error

Run (needs scripts/fetch_llama_src.sh and scripts/build_llama_cpp.sh, which this calls):
  .venv/bin/python scripts/make_template_goldens.py
"""
import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATES = [
    "Qwen-Qwen2.5-7B-Instruct.jinja",
    "Qwen-Qwen3-0.6B.jinja",
    "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "meta-llama-Llama-3.2-3B-Instruct.jinja",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja",
]
MESSAGE_SETS = {
    "system_user": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "What is the capital of France?"},
    ],
    "user_only": [{"role": "user", "content": "Hello!"}],
    "multi_turn": [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Italy?"},
    ],
    "non_ascii": [
        {"role": "system", "content": "Réponds en français, s'il te plaît."},
        {"role": "user", "content": "Grüße! 你好，世界 🚀 — ça va? नमस्ते 👨‍👩‍👧"},
    ],
    # Mistral's template refuses this (raise_exception); the others render it.
    "user_user": [
        {"role": "user", "content": "First question."},
        {"role": "user", "content": "Second question."},
    ],
}

# Tool calling (model/text/tool_chat.cpp): the same templates rendering tools and a call history,
# as llama-server's /apply-template renders them (its oaicompat chat parsing: tools, tool_choice,
# parallel_tool_calls). Not for SmolLM2's template (no tools: conveyor's generic format differs on
# purpose).
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TOOL_SETS = {
    "tools_auto": {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER_TOOL]},
    "tools_required": {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER_TOOL],
                       "tool_choice": "required", "parallel_tool_calls": False},
    "tool_history": {"messages": [
        {"role": "system", "content": "Use tools when they help."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call00001", "content": "18 C and sunny"}], "tools": [WEATHER_TOOL]},
}


def sh(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gguf_string(reader, key):
    f = reader.fields[key]
    return bytes(f.parts[f.data[0]]).decode("utf-8")


def gguf_scalar(reader, key, default=None):
    if key not in reader.fields:
        return default
    f = reader.fields[key]
    return f.parts[f.data[0]].tolist()[0]


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def render_all(server, model, template_file, env, tools=True):
    port = free_port()
    cmd = [server, "-m", model, "--jinja", "--chat-template-file", template_file, "--host", "127.0.0.1",
           "--port", str(port), "-c", "512", "-np", "1", "-t", "1", "--no-webui"]
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.time() + 120
        while True:
            if proc.poll() is not None:
                log.seek(0)
                sys.exit(f"llama-server exited ({proc.returncode}) for {template_file}:\n{log.read().decode()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.time() > deadline:
                sys.exit(f"llama-server did not become healthy for {template_file}")
            time.sleep(0.3)
        out = []
        for name, messages in MESSAGE_SETS.items():
            for agp in (True, False):
                status, body = post(f"http://127.0.0.1:{port}/apply-template",
                                    {"messages": messages, "add_generation_prompt": agp})
                case = {"messages_name": name, "messages": messages, "add_generation_prompt": agp}
                if status == 200:
                    case["prompt"] = body["prompt"]
                else:
                    case["error"] = body.get("error", {}).get("message", json.dumps(body))
                out.append(case)
        for name, body in (TOOL_SETS.items() if tools else []):
            status, got = post(f"http://127.0.0.1:{port}/apply-template", body)
            case = {"tool_set": name, "body": body}
            if status == 200:
                case["prompt"] = got["prompt"]
            else:
                case["error"] = got.get("error", {}).get("message", json.dumps(got))
            out.append(case)
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    cache = os.environ.get("CONVEYOR_CACHE", os.path.expanduser("~/.cache/conveyor"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(cache, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "chat_template_goldens.json"))
    args = ap.parse_args()

    src = sh(os.path.join(ROOT, "scripts", "fetch_llama_src.sh"))
    bindir = sh(os.path.join(ROOT, "scripts", "build_llama_cpp.sh"))
    server = os.path.join(bindir, "llama-server")
    version = sh("sed", "-n", "s/^version=//p", os.path.join(ROOT, "scripts", "fetch_llama_src.sh"))
    server_version = subprocess.run([server, "--version"], capture_output=True, text=True)
    server_version = (server_version.stdout + server_version.stderr).strip().splitlines()[0]

    reader = gguf.GGUFReader(args.model)
    tokens = reader.fields["tokenizer.ggml.tokens"]
    token_text = lambda i: bytes(tokens.parts[tokens.data[i]]).decode("utf-8")
    smol_source = gguf_string(reader, "tokenizer.chat_template")
    with open(args.model, "rb") as f:
        model_sha = hashlib.file_digest(f, "sha256").hexdigest()

    env = dict(os.environ, TZ="UTC")
    templates, cases = [], []
    with tempfile.TemporaryDirectory() as tmp:
        smol_file = os.path.join(tmp, "SmolLM2-135M-Instruct.jinja")
        with open(smol_file, "w", encoding="utf-8") as f:
            f.write(smol_source)
        todo = [(name, os.path.join(src, "models", "templates", name), True) for name in TEMPLATES]
        todo.append(("SmolLM2-135M-Instruct (GGUF)", smol_file, False))
        for attempt in range(2):  # a render across midnight (UTC) would mix two dates: run again
            now = int(time.time())
            templates, cases = [], []
            for name, path, from_src in todo:
                data = open(path, "rb").read()
                t = {"name": name, "file": name if from_src else None, "sha256": sha256_bytes(data)}
                if not from_src:
                    t["source"] = data.decode("utf-8")
                templates.append(t)
                print(f"rendering {name}", file=sys.stderr)
                for c in render_all(server, args.model, path, env, tools=from_src):
                    cases.append({"template": name, **c})
            if time.strftime("%Y%m%d", time.gmtime(now)) == time.strftime("%Y%m%d", time.gmtime()):
                break

    doc = {
        "reference": f"llama.cpp as vendored in llama-cpp-python {version} ({server_version})",
        "llama_src_version": version,
        "generated_by": "scripts/make_template_goldens.py (llama-server --jinja --chat-template-file, POST /apply-template)",
        "model": os.path.basename(args.model),
        "model_sha256": model_sha,
        "bos_token": token_text(gguf_scalar(reader, "tokenizer.ggml.bos_token_id")),
        "eos_token": token_text(gguf_scalar(reader, "tokenizer.ggml.eos_token_id")),
        "add_bos": bool(gguf_scalar(reader, "tokenizer.ggml.add_bos_token", False)),
        "add_eos": bool(gguf_scalar(reader, "tokenizer.ggml.add_eos_token", False)),
        "now_unix": now,
        "tz": "UTC",
        "templates": templates,
        "cases": cases,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_err = sum("error" in c for c in cases)
    print(f"{sum('tool_set' in c for c in cases)} of them tool cases", file=sys.stderr)
    print(f"wrote {args.out}: {len(cases)} cases ({n_err} refused by their template)", file=sys.stderr)


if __name__ == "__main__":
    main()
