#!/usr/bin/env python3
"""conveyor's CPU executor against llama.cpp on this machine, both sides back to back (issue 13).

Measurements (--only picks some; llama3-8b runs only when named):
  decode   single-stream decode tok/s: `conveyor generate` vs `llama-bench -p 0 -n 128` (tg128)
  steps    decode steps at batch 1/8/32/128 over 128-token contexts: `conveyor step-bench` vs
           `llama-batched-bench` (S_TG): both time B-token steps, one token per sequence, each
           sequence attending its own 128..143 cached tokens; both compute logits for every row
  prefill  one 512-token prompt: step-bench's prefill vs `llama-bench -p 512 -n 0` (pp512)
  serve    64-token prompts, 64 output tokens, 1/4/32 jobs at once: output tok/s and median TTFT;
           `conveyor serve` + `conveyor bench --workload file` vs `llama-server` + a streaming
           /completion client (bench_cpu_vs_llamacpp_util.py), the same prompt token ids both sides
  memory   peak RSS (VmHWM) while serving 32 jobs with the same KV size (llama-server -c 6144,
           F16 KV; conveyor --kv-cache-bytes = that many tokens' fp16 K and V)
  llama3-8b  decode tok/s and peak RSS on scripts/make_random_llama3_8b.py's file (32 tokens)

Ratio = conveyor / llama.cpp. Targets (issue 13): single stream >= 1.2x; steps at batch 8/32/128
>= 1.5x; prefill 512 >= 1.5x; serving 1/4/32 jobs >= 1.2/1.5/1.5x output tok/s with a lower median
TTFT; RSS <= 1.2x; the 8B-shaped model within 6 GiB resident (its tok/s compared, no target).
llama.cpp comes from scripts/build_llama_cpp.sh (run automatically when missing). Table on stdout,
progress on stderr; every server started here is stopped on exit, error or Ctrl-C.

    .venv/bin/python scripts/bench_cpu_vs_llamacpp.py [--only decode,steps] [--json out.json]
"""
import argparse
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_cpu_vs_llamacpp_util import (  # noqa: E402
    check, drive_llama, free_port, log, proc_status, run, server_log, start_server, stop_all, stop_server, tmp_root,
    keep_tmp, wait_health, wait_quiet)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("CONVEYOR_CACHE") or os.path.expanduser("~/.cache/conveyor")
ALL = ["decode", "steps", "prefill", "serve", "memory"]
BATCHES, CONTEXT, STEPS, PROMPT_LEN = [1, 8, 32, 128], 128, 16, 512
SERVE_IN, SERVE_OUT, SERVE_JOBS, TOKENS_PER_SLOT = 64, 64, [1, 4, 32], 192
PROMPT = "The history of the printing press begins in the fifteenth century, when"


def gguf_shape(path):
    import gguf
    r = gguf.GGUFReader(path)

    def get(key, default=None):
        f = r.fields.get("llama." + key)
        return int(f.contents()) if f is not None else default
    n_head = get("attention.head_count")
    return {"n_layer": get("block_count"), "n_head_kv": get("attention.head_count_kv", n_head),
            "head_dim": get("attention.key_length", get("embedding_length") // n_head)}


class Bench:
    def __init__(self, args):
        self.a = args
        self.rows, self.commands, self.raw, self.notes, self.busy = [], [], {}, [], {}
        self.llama_served = {}  # jobs -> (llama-server result, command) from serve()
        self.llama = lambda tool: os.path.join(args.llama_dir, tool)
        # conveyor's --threads where this binary has it; otherwise (all cores) taskset when fewer.
        helps = subprocess.run([args.conveyor, "generate", "--help"], capture_output=True, text=True).stdout
        self.conv_threads = ["--threads", str(args.threads)] if "--threads" in helps else []
        self.taskset = None if self.conv_threads or args.threads >= os.cpu_count() else f"0-{args.threads - 1}"

    def row(self, name, conv, llama, unit, higher_better=True, target=None):
        """target: the ratio to reach (>= when higher_better, else <=), or None for a comparison only."""
        ratio = conv / llama if conv is not None and llama else None
        ok = None if ratio is None or target is None else (ratio >= target if higher_better else ratio <= target)
        text = "—" if target is None else ("≥ " if higher_better else "≤ ") + f"{target:.2f}×"
        self.rows.append({"measurement": name, "unit": unit, "conveyor": conv, "llama_cpp": llama, "ratio": ratio,
                          "target": text, "meets_target": ok})

    def cmd(self, what, conv, llama, conv_note="", llama_note=""):
        self.commands.append((what, shlex.join(conv) + conv_note, shlex.join(llama) + llama_note))

    def llama_bench(self, p, n, model=None, limit_as=None):
        cmd = [self.llama("llama-bench"), "-m", model or self.a.model, "-p", str(p), "-n", str(n), "-t", str(self.a.threads), "-o", "json"]
        rc, out, err, rss, _ = run(cmd, limit_as=limit_as)
        check(rc, out, err, "llama-bench")
        res = json.loads(out)[0]
        return res["avg_ts"], rss, cmd, res

    # -- measurements --
    def decode(self):
        conv_cmd = [self.a.conveyor, "generate", "--model", self.a.model, "--temperature", "0", "--ignore-eos",
                    "--max-tokens", "128", "--prompt", PROMPT] + self.conv_threads
        rates = []
        for _ in range(3):
            rc, out, err, _, _ = run(conv_cmd, taskset=self.taskset)
            check(rc, out, err, "conveyor generate")
            rates.append(parse_generate(err))
        llama_ts, _, llama_cmd, res = self.llama_bench(0, 128)
        self.raw["decode"] = {"conveyor_runs": rates, "llama_bench": res}
        self.row("decode, single stream (tg128)", statistics.median(rates), llama_ts, "tok/s", target=1.2)
        self.cmd("decode", conv_cmd, llama_cmd, " (3 runs, median)")

    def step_bench(self, steps, prefill):
        path = os.path.join(tmp_root, "steps.json")
        batches = BATCHES if steps else [1]
        conv_cmd = [self.a.conveyor, "step-bench", "--model", self.a.model, "--batches", ",".join(map(str, batches)),
                    "--context", str(CONTEXT), "--steps", str(STEPS), "--prompt-len", str(PROMPT_LEN), "--json", path] + self.conv_threads
        rc, out, err, _, _ = run(conv_cmd, taskset=self.taskset)
        check(rc, out, err, "conveyor step-bench")
        with open(path) as f:
            conv = json.load(f)
        self.raw["step_bench"] = conv
        # step-bench's first line names the kernels' ISA and whether weights were repacked.
        self.kernels = next((ln.split(": ", 1)[1] for ln in out.splitlines() + err.splitlines() if ": math " in ln), None)
        if steps:
            # One run per batch size: -npl 1,8,32,128 in one run gives every run 128 KV streams
            # (n_seq_max = the largest -npl), which made batch 1 ~50x slower than llama-bench's tg.
            lines = []
            for batch in BATCHES:
                llama_cmd = [self.llama("llama-batched-bench"), "-m", self.a.model, "-c", str(batch * (CONTEXT + STEPS)),
                             "-b", "2048", "-ub", "512", "-npp", str(CONTEXT), "-ntg", str(STEPS), "-npl", str(batch),
                             "-t", str(self.a.threads), "--output-format", "jsonl"]
                rc, out, err, _, _ = run(llama_cmd)
                check(rc, out, err, "llama-batched-bench")
                lines += [json.loads(ln) for ln in (out + err).splitlines() if ln.startswith("{") and "speed_tg" in ln]
            self.raw["batched_bench"] = lines
            by_b = {ln["pl"]: ln["speed_tg"] for ln in lines}
            for d in conv["decode"]:
                self.row(f"decode step, batch {d['batch']}, ctx {CONTEXT}", d["tokens_per_s"], by_b.get(d["batch"]), "tok/s",
                         target=1.5 if d["batch"] >= 8 else None)
            note = f" (the last run; one run per B in {BATCHES}: -c B*{CONTEXT + STEPS} -npl B)"
            self.cmd("steps (+ prefill)", conv_cmd, llama_cmd, llama_note=note)
        if prefill:
            llama_ts, _, llama_cmd, res = self.llama_bench(PROMPT_LEN, 0)
            self.raw["prefill_llama_bench"] = res
            self.row(f"prefill, {PROMPT_LEN} tokens", conv["prefill"]["tokens_per_s"], llama_ts, "tok/s", target=1.5)
            self.cmd("prefill", conv_cmd, llama_cmd)

    def prompts(self, n, seed):
        rng = np.random.default_rng(seed)
        return [[int(t) for t in rng.integers(100, 32000, SERVE_IN)] for _ in range(n)]

    def serve_conveyor(self, jobs_list, extra, label):
        ports = [free_port() for _ in range(3)]
        router, pub, pull = (f"tcp://127.0.0.1:{p}" for p in ports)
        state = tempfile.mkdtemp(dir=tmp_root, prefix="state.")
        cmd = [self.a.conveyor, "serve", "--model", self.a.model, "--router", router, "--pub", pub, "--pull", pull,
               "--state-dir", state, "--max-num-seqs", "32"] + self.conv_threads + extra
        srv = start_server(cmd, "conveyor-" + label, self.taskset)
        results = {}
        try:
            for jobs in jobs_list:
                prompts = self.prompts(num_prompts(jobs), jobs)
                data = os.path.join(tmp_root, f"prompts-{jobs}.jsonl")
                with open(data, "w") as f:
                    for p in prompts:
                        f.write(json.dumps({"prompt_tokens": p, "max_tokens": SERVE_OUT}) + "\n")
                out = os.path.join(tmp_root, f"conveyor-{label}-{jobs}.json")
                bench = [self.a.conveyor, "bench", "--router", router, "--pub", pub, "--workload", "file", "--dataset", data,
                         "--ignore-eos", "--num-prompts", str(len(prompts)), "--output-len", str(SERVE_OUT),
                         "--max-concurrency", str(jobs), "--temperature", "0", "--connect-timeout", "120",
                         "--no-progress", "--json", out]
                rc, o, e, _, _ = run(bench)
                if srv.poll() is not None:
                    raise RuntimeError("conveyor serve exited:\n" + server_log(srv))
                check(rc, o, e, "conveyor bench")
                with open(out) as f:
                    res = json.load(f)
                results[jobs] = {"output_tok_s": res["output_throughput"], "median_ttft_ms": res["median_ttft_ms"],
                                 "completed": res.get("completed"), "bench_cmd": shlex.join(bench), **proc_status(srv.pid)}
        finally:
            stop_server(srv)
        return results, cmd

    def serve_llama(self, jobs, ctx):
        port = free_port()
        cmd = [self.llama("llama-server"), "-m", self.a.model, "-np", str(jobs), "-c", str(ctx), "-t", str(self.a.threads),
               "--host", "127.0.0.1", "--port", str(port)]
        srv = start_server(cmd, f"llama-server-{jobs}")
        try:
            wait_health(srv, port)
            res = drive_llama(port, self.prompts(num_prompts(jobs), jobs), jobs, SERVE_OUT)
            res.update(proc_status(srv.pid))
        finally:
            stop_server(srv)
        return res, cmd

    def serve(self):
        conv, conv_cmd = self.serve_conveyor(SERVE_JOBS, [], "serve")
        self.raw["serve"] = {"conveyor": conv, "llama_cpp": {}}
        for jobs in SERVE_JOBS:
            llama, llama_cmd = self.serve_llama(jobs, jobs * TOKENS_PER_SLOT)
            self.raw["serve"]["llama_cpp"][jobs] = llama
            self.llama_served[jobs] = (llama, llama_cmd)
            self.row(f"serve {jobs} jobs: output", conv[jobs]["output_tok_s"], llama["output_tok_s"], "tok/s",
                     target=1.2 if jobs == 1 else 1.5)
            self.row(f"serve {jobs} jobs: median TTFT", conv[jobs]["median_ttft_ms"], llama["median_ttft_ms"], "ms", False,
                     target=1.0)
            self.cmd(f"serve {jobs} jobs", conv_cmd, llama_cmd, " + " + conv[jobs]["bench_cmd"],
                     " + streaming /completion client (scripts/bench_cpu_vs_llamacpp_util.py)")

    def memory(self):
        jobs = max(SERVE_JOBS)
        tokens = jobs * TOKENS_PER_SLOT
        s = gguf_shape(self.a.model)
        kv_bytes = tokens * s["n_layer"] * 2 * s["n_head_kv"] * s["head_dim"] * 2
        conv, conv_cmd = self.serve_conveyor([jobs], ["--kv-cache-bytes", str(kv_bytes)], "memory")
        # llama-server's side is the serve measurement's run at this many jobs when there was one.
        llama, llama_cmd = self.llama_served.get(jobs) or self.serve_llama(jobs, tokens)
        self.raw["memory"] = {"kv_tokens": tokens, "kv_bytes": kv_bytes, "conveyor": conv[jobs], "llama_cpp": llama}
        self.row(f"peak RSS serving {jobs} jobs, KV {tokens} tok ({kv_bytes / 2**20:.0f} MiB fp16)",
                 conv[jobs]["VmHWM"], llama["VmHWM"], "MiB", False, target=1.2)
        self.cmd("memory", conv_cmd, llama_cmd)

    def llama3_8b(self):
        path = self.a.llama3_8b_model
        if not os.path.exists(path):
            raise RuntimeError(f"{path} missing. HINT: .venv/bin/python scripts/make_random_llama3_8b.py")
        conv_cmd = [self.a.conveyor, "generate", "--model", path, "--temperature", "0", "--ignore-eos",
                    "--max-tokens", "32", "--prompt", PROMPT] + self.conv_threads
        limit = int(self.a.llama3_8b_limit_gb * 2**30)
        rc, out, err, conv_rss, secs = run(conv_cmd, limit_as=limit, taskset=self.taskset)
        conv_ts = parse_generate(err) if rc == 0 else None
        if rc != 0:
            self.notes.append(f"llama3-8b: conveyor generate failed (exit {rc}) after {secs:.0f} s at peak RSS {conv_rss:.0f} MiB "
                              f"under ulimit -v {self.a.llama3_8b_limit_gb:g} GiB: {err.strip().splitlines()[-1][:300]}")
            log(self.notes[-1])
            conv_rss = None
        llama_ts, llama_rss, llama_cmd, res = self.llama_bench(0, 32, model=path, limit_as=limit)
        self.raw["llama3_8b"] = {"conveyor_rc": rc, "conveyor_stderr_tail": err[-1000:], "llama_bench": res}
        self.row("llama3-8b (random Q4_K_M): decode", conv_ts, llama_ts, "tok/s")
        self.row("llama3-8b (random Q4_K_M): peak RSS", conv_rss, llama_rss, "MiB", False)
        if conv_rss is not None:
            self.notes.append(f"llama3-8b: conveyor's peak RSS {conv_rss:.0f} MiB "
                              f"{'within' if conv_rss <= 6144 else 'over'} the 6 GiB target")
        note = f" (ulimit -v {self.a.llama3_8b_limit_gb:g} GiB)"
        self.cmd("llama3-8b", conv_cmd, llama_cmd, note, note)


def num_prompts(jobs):
    return max(8, 2 * jobs)


def parse_generate(stderr):
    """`decode: 127 tokens in 1234.5 ms (102.9 tokens/s)` -> 102.9"""
    for line in stderr.splitlines():
        if "decode:" in line and "tokens/s" in line:
            return float(line.rsplit("(", 1)[1].split()[0])
    raise RuntimeError("no decode timing in conveyor generate's stderr:\n" + stderr[-1000:])


def machine():
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "load_avg": list(os.getloadavg())}


def commit():
    try:
        c = subprocess.check_output(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], text=True).strip()
        dirty = subprocess.check_output(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], text=True).strip()
        return c + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def fmt(v):
    return "—" if v is None else f"{v:.2f}" if abs(v) < 100 else f"{v:.1f}"


def report(b, info):
    lines = [f"machine: {info['cpu']}, {info['cores']} cores, load average {' '.join('%.2f' % x for x in info['load_avg'])} "
             f"(after: {' '.join('%.2f' % x for x in info['load_avg_after'])}); threads {b.a.threads} both sides",
             f"conveyor {info['commit']} ({b.a.conveyor}); llama.cpp {b.a.llama_dir}; model {b.a.model}",
             f"conveyor kernels: {info['conveyor_kernels']}" + (f" (CONVEYOR_ISA={info['conveyor_isa_cap']})" if info["conveyor_isa_cap"] else ""), "",
             "| measurement | conveyor | llama.cpp | ratio | target |", "|---|---|---|---|---|"]
    for r in b.rows:
        mark = "" if r["meets_target"] is None else " ✓" if r["meets_target"] else " ✗"
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f}×"
        lines.append(f"| {r['measurement']} ({r['unit']}) | {fmt(r['conveyor'])} | {fmt(r['llama_cpp'])} | {ratio}{mark} | {r['target']} |")
    lines += [""] + [f"note: {n}" for n in b.notes] + ["", "commands:"]
    for what, conv, llama in b.commands:
        lines += [f"- {what}: conveyor: `{conv}`", f"  llama.cpp: `{llama}`"]
    return "\n".join(lines)


def ensure_llama(args):
    need = ["llama-bench", "llama-batched-bench", "llama-server"]
    if all(os.path.exists(os.path.join(args.llama_dir, t)) for t in need):
        return
    if args.no_build:
        sys.exit(f"llama.cpp binaries missing in {args.llama_dir}. HINT: scripts/build_llama_cpp.sh")
    log("llama.cpp not built yet; running scripts/build_llama_cpp.sh (tens of minutes on 2 cores)")
    subprocess.check_call([os.path.join(ROOT, "scripts", "build_llama_cpp.sh")], stdout=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--model", default=os.path.join(CACHE, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="llama.cpp -t; conveyor (all cores) is pinned with taskset when fewer")
    ap.add_argument("--only", default=",".join(ALL), help="comma list of " + ",".join(ALL + ["llama3-8b"]))
    ap.add_argument("--conveyor", default=os.path.join(ROOT, "build", "conveyor"))
    ap.add_argument("--llama-dir", default=os.path.join(CACHE, "llama.cpp-0.3.36", "bin"))
    ap.add_argument("--llama3-8b-model", default=os.path.join(CACHE, "models", "random-llama3-8b.Q4_K_M.gguf"))
    ap.add_argument("--llama3-8b-limit-gb", type=float, default=20, help="address-space cap (ulimit -v) for both 8B runs")
    ap.add_argument("--wait-quiet", type=float, default=0, metavar="S",
                    help="before each measurement wait up to S s for other processes to leave the CPU < 10%% busy")
    ap.add_argument("--no-build", action="store_true", help="fail instead of building llama.cpp when it is missing")
    ap.add_argument("--json", help="write rows, raw results, machine and commands here")
    args = ap.parse_args()
    only = [x.strip() for x in args.only.split(",") if x.strip()]
    unknown = set(only) - set(ALL) - {"llama3-8b"}
    if unknown:
        ap.error(f"unknown measurement(s) {sorted(unknown)}; pick from {ALL + ['llama3-8b']}")
    for path, what in ((args.conveyor, "--conveyor"), (args.model, "--model")):
        if not os.path.exists(path):
            ap.error(f"{what} {path} does not exist")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored (nohup, &)
    ensure_llama(args)
    info = {**machine(), "commit": commit()}
    b = Bench(args)
    ok = False
    try:
        for name, fn in (("decode", b.decode), ("steps", lambda: b.step_bench(True, "prefill" in only)),
                         ("prefill", lambda: b.step_bench(False, True)), ("serve", b.serve), ("memory", b.memory),
                         ("llama3-8b", b.llama3_8b)):
            if name not in only or (name == "prefill" and "steps" in only):
                continue
            busy = wait_quiet(args.wait_quiet)
            b.busy[name] = round(busy, 3)
            if busy >= 0.10:
                b.notes.append(f"{name}: other processes kept the CPU {busy:.0%} busy just before it; numbers are noisy")
            fn()
        ok = True
    finally:
        stop_all()
        if not ok:
            keep_tmp.append(True)
            log(f"server logs and results kept in {tmp_root}")
    info["load_avg_after"] = list(os.getloadavg())
    info["conveyor_kernels"] = getattr(b, "kernels", None) or "(not recorded: run steps or prefill)"
    info["conveyor_isa_cap"] = os.environ.get("CONVEYOR_ISA", "")
    print(report(b, info))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "rows": b.rows, "raw": b.raw, "commands": b.commands, "notes": b.notes, "cpu_busy_before": b.busy,
                       "model": args.model, "threads": args.threads}, f, indent=1)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        stop_all()
        sys.exit(130)
