"""Clients for scripts/bench_spec.py: conveyor's HTTP intake (/tokenize, /detokenize, chat answers for
the output check), llama-server's /completion on token ids (output tok/s and draft counts), one
`llama-lookup` run, and the machine's description. Processes are started and stopped with
scripts/bench_cpu_vs_llamacpp_util.py.
"""
import http.client
import json
import os
import platform
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def http_json(port, method, path, body=None, timeout=900):
    """One request to 127.0.0.1:port. Returns (status, parsed JSON or the raw text)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, None if body is None else json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        raw = r.read().decode(errors="replace")
    finally:
        c.close()
    try:
        return r.status, json.loads(raw)
    except ValueError:
        return r.status, raw


def ok_json(port, method, path, body=None, what=None):
    status, res = http_json(port, method, path, body)
    if status != 200:
        raise RuntimeError(f"{what or path} answered {status}: {str(res)[:500]}")
    return res


def parallel(fn, items, concurrency):
    """fn over items with at most `concurrency` in flight; results in the items' order. On an
    error or a signal it returns at once (requests in flight end when their server is stopped)."""
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency))
    try:
        return list(pool.map(fn, items))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def read_jobs(path):
    jobs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                j = json.loads(line)
                if "messages" not in j:
                    raise RuntimeError(f"{path}:{n}: the output check needs \"messages\" jobs")
                j.setdefault("id", f"line{n}")
                jobs.append(j)
    if not jobs:
        raise RuntimeError(f"{path}: no jobs")
    return jobs


# -- conveyor (HTTP intake) --

def conveyor_tokenize(port, messages):
    """The prompt ids a chat job with these messages gets (the chat template applied)."""
    return ok_json(port, "POST", "/tokenize", {"messages": messages}, "conveyor /tokenize")["tokens"]


def conveyor_detokenize(port, ids):
    return ok_json(port, "POST", "/detokenize", {"tokens": ids}, "conveyor /detokenize")["prompt"]


def conveyor_answer(port, job, ignore_eos=False):
    """One greedy chat answer: {"id", "text", "tokens", "finish"}."""
    body = {"messages": job["messages"], "max_tokens": job.get("max_tokens", 128), "temperature": 0}
    if ignore_eos:
        body["ignore_eos"] = True
    res = ok_json(port, "POST", "/v1/chat/completions", body, "conveyor /v1/chat/completions")
    choice = res["choices"][0]
    return {"id": job["id"], "text": choice["message"].get("content") or "", "finish": choice.get("finish_reason"),
            "tokens": res.get("usage", {}).get("completion_tokens")}


def conveyor_metrics(port):
    """The Prometheus lines that mention speculation (empty when there are none, or no /metrics)."""
    try:
        status, text = http_json(port, "GET", "/metrics", timeout=10)
    except OSError:
        return []
    if status != 200 or not isinstance(text, str):
        return []
    return [ln for ln in text.splitlines() if not ln.startswith("#") and re.search(r"spec|draft|accept", ln)]


def compare_answers(off, on):
    """Pairs answers by id. Returns [{"id", "at": first differing character, "off", "on"}]."""
    by_id = {a["id"]: a for a in on}
    diffs = []
    for a in off:
        b = by_id.get(a["id"])
        if b is None or a["text"] != b["text"] or a["tokens"] != b["tokens"]:
            t1, t2 = a["text"], (b or {}).get("text", "")
            at = next((i for i, (x, y) in enumerate(zip(t1, t2)) if x != y), min(len(t1), len(t2)))
            diffs.append({"id": a["id"], "at": at, "off": t1[max(0, at - 40):at + 80], "on": t2[max(0, at - 40):at + 80],
                          "tokens_off": a["tokens"], "tokens_on": (b or {}).get("tokens")})
    return diffs


# -- llama.cpp --

def llama_completion(port, ids, n_predict, ignore_eos=False):
    """One greedy /completion on token ids (not streamed)."""
    body = {"prompt": ids, "n_predict": n_predict, "temperature": 0, "cache_prompt": True, "stream": False,
            "ignore_eos": ignore_eos}
    res = ok_json(port, "POST", "/completion", body, "llama-server /completion")
    t = res.get("timings", {})
    return {"text": res.get("content", ""), "tokens": res.get("tokens_predicted", 0),
            "draft_n": t.get("draft_n", 0), "draft_accepted": t.get("draft_n_accepted", 0)}


def drive_llama_ids(port, prompts, concurrency, ignore_eos=False):
    """prompts: [(ids, max_tokens)]. Output tok/s over the whole run, as conveyor bench's
    output_throughput (all output tokens / first send to last answer)."""
    t0 = time.time()
    res = parallel(lambda p: llama_completion(port, p[0], p[1], ignore_eos), prompts, concurrency)
    dur = time.time() - t0
    total = sum(r["tokens"] for r in res)
    drafted, accepted = sum(r["draft_n"] for r in res), sum(r["draft_accepted"] for r in res)
    return {"output_tok_s": total / dur, "output_tokens": total, "duration_s": dur, "completed": len(res),
            "draft_n": drafted, "draft_accepted": accepted, "texts": [r["text"] for r in res]}


def llama_lookup_once(binary, model, text, n_predict, threads, n_draft, ctx):
    """One `llama-lookup` run on a rendered prompt. Returns prompt/output tokens and the seconds of
    its prompt pass plus decoding (its own timers: model loading excluded)."""
    cmd = [binary, "-m", model, "-p", text, "-n", str(n_predict), "-t", str(threads), "-c", str(ctx),
           "--temp", "0", "--spec-draft-n-max", str(n_draft)]
    # errors="replace": the generated text may stop inside a UTF-8 sequence
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=600)
    log = p.stdout + p.stderr
    if p.returncode != 0:
        raise RuntimeError(f"llama-lookup failed (exit {p.returncode}): {log[-1500:]}")

    def grab(pattern):
        m = re.search(pattern, log)
        if not m:
            raise RuntimeError(f"llama-lookup: no '{pattern}' in its log: {log[-1500:]}")
        return m.groups()
    enc_n, enc_s = grab(r"encoded\s+(\d+) tokens in\s+([\d.]+) seconds")
    dec_n, dec_s = grab(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds")
    drafted, = grab(r"n_drafted\s+=\s+(\d+)")
    accepted, = grab(r"n_accept\s+=\s+(\d+)")
    return {"prompt_tokens": int(enc_n), "tokens": int(dec_n), "seconds": float(enc_s) + float(dec_s),
            "draft_n": int(drafted), "draft_accepted": int(accepted), "cmd": cmd}


# -- the machine --

def _cpu_jiffies():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), sum(v) - v[3] - v[4]  # total, busy (all but idle and iowait)


def _proc_jiffies(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime, all threads
    except (OSError, IndexError, ValueError):
        return 0


def wait_quiet(max_wait_s, log, hold_s=10.0, busy_below=0.10):
    """Waits (up to max_wait_s) until other processes have left the CPU under busy_below for
    hold_s seconds in a row (a gap between two compiler runs is not quiet). Returns the last
    busy fraction."""
    t0 = time.time()
    busy, quiet_since = 1.0, None
    while True:
        total0, busy0 = _cpu_jiffies()
        time.sleep(1.0)
        total, b = _cpu_jiffies()
        busy = (b - busy0) / max(1, total - total0)
        now = time.time()
        quiet_since = (quiet_since or now) if busy < busy_below else None
        if quiet_since is not None and now - quiet_since >= hold_s:
            return busy
        if now - t0 >= max_wait_s:
            return busy
        if int(now - t0) % 30 == 0:
            log(f"CPU {busy:.0%} busy with other work; waiting (up to {max_wait_s:.0f} s, --wait-quiet)")


class OtherLoad:
    """The share of the machine's CPU time that other processes took while a measurement ran:
    all busy time less ours (this process, its finished children, and the live pids given)."""

    def __init__(self, pids):
        self.pids = list(pids)
        self.total0, self.busy0 = _cpu_jiffies()
        self.own0 = self._own()

    def _own(self):
        t = os.times()
        hz = os.sysconf("SC_CLK_TCK")
        return t.user + t.system + t.children_user + t.children_system + sum(map(_proc_jiffies, self.pids)) / hz

    def share(self):
        total, busy = _cpu_jiffies()
        hz = os.sysconf("SC_CLK_TCK")
        if total <= self.total0:
            return 0.0
        other = (busy - self.busy0) / hz - (self._own() - self.own0)
        return max(0.0, other / ((total - self.total0) / hz))


def machine():
    cpu, flags = platform.processor(), set()
    with open("/proc/cpuinfo") as f:
        for ln in f:
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
            elif ln.startswith("flags"):
                flags = set(ln.split(":", 1)[1].split())
    isa = [x for x in ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni",
                       "avx512_bf16", "amx_tile", "amx_int8") if x in flags]
    return {"cpu": cpu, "cores": os.cpu_count(), "isa": isa, "load_avg": list(os.getloadavg()),
            "kernel": platform.release()}


def commit():
    try:
        c = subprocess.check_output(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], text=True).strip()
        dirty = subprocess.check_output(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                                        text=True).strip()
        return c + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
