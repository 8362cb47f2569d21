"""Process and HTTP helpers for scripts/bench_cpu_vs_llamacpp.py: runs commands with their peak RSS,
starts servers it can always stop (start_new_session; stop_all() on exit), reads VmRSS/VmHWM, and a
small streaming client for llama-server's /completion (TTFT from the first streamed token).
"""
import atexit
import http.client
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

servers = []  # every server Popen started here; stopped by stop_all()
tmp_root = tempfile.mkdtemp(prefix="bench_cpu_vs_llamacpp.")  # logs, prompts, results; removed at exit
keep_tmp = []  # append anything to keep tmp_root (after a failure)
atexit.register(lambda: keep_tmp or shutil.rmtree(tmp_root, ignore_errors=True))


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, limit_as=None, taskset=None):
    """Runs cmd to completion. Returns (rc, stdout, stderr, peak RSS MiB, seconds)."""
    if taskset:
        cmd = ["taskset", "-c", taskset] + cmd
    log("$ " + " ".join(cmd))
    out, err = tempfile.TemporaryFile(dir=tmp_root), tempfile.TemporaryFile(dir=tmp_root)
    pre = (lambda: resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))) if limit_as else None
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=out, stderr=err, preexec_fn=pre)
    try:
        _, status, ru = os.wait4(p.pid, 0)
    except BaseException:
        p.kill()
        p.wait()
        raise
    p.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0), err.seek(0)
    return p.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"), ru.ru_maxrss / 1024, time.time() - t0


def check(rc, out, err, what):
    if rc != 0:
        raise RuntimeError(f"{what} failed (exit {rc}):\n{(out + err)[-2000:]}")


def start_server(cmd, name, taskset=None):
    if taskset:
        cmd = ["taskset", "-c", taskset] + cmd
    log("$ " + " ".join(cmd))
    logf = open(os.path.join(tmp_root, f"{name}.log"), "wb")
    p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    p.log_path = logf.name
    servers.append(p)
    return p


def server_log(p):
    with open(p.log_path, errors="replace") as f:
        return f.read()[-2000:]


def stop_server(p, drain_s=15):
    """SIGINT (conveyor serve drains, llama-server exits), then SIGKILL after drain_s."""
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=drain_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if p in servers:
        servers.remove(p)


def stop_all():
    for p in list(servers):
        stop_server(p, drain_s=3)  # aborting: running jobs need no drain


def proc_status(pid):
    """VmRSS and VmHWM of a live process, MiB."""
    vals = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                vals[k] = int(v.split()[0]) / 1024
    return vals


def wait_health(srv, port, timeout=300):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if srv.poll() is not None:
            raise RuntimeError("llama-server exited:\n" + server_log(srv))
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError("llama-server not healthy after %d s:\n%s" % (timeout, server_log(srv)))


def one_request(port, prompt, n_predict):
    """Streams one /completion. Returns (send time, first-token time, end time, output tokens).
    llama-server holds back a token that ends in an incomplete UTF-8 sequence; it counts from the
    final event's tokens_predicted."""
    body = json.dumps({"prompt": prompt, "n_predict": n_predict, "ignore_eos": True, "stream": True,
                       "temperature": 0, "cache_prompt": True})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t_send = time.time()
    c.request("POST", "/completion", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"llama-server answered {r.status}: {r.read()[:500]!r}")
    t_first, n_tokens = None, 0
    for raw in r:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        ev = json.loads(line[5:])
        if ev.get("stop"):
            n_tokens = ev.get("tokens_predicted", n_tokens)
            break
        n_tokens += max(1, len(ev.get("tokens") or []))
        if t_first is None:
            t_first = time.time()
    c.close()
    return t_send, t_first, time.time(), n_tokens


def drive_llama(port, prompts, jobs, n_predict):
    """Sends prompts with at most `jobs` in flight; output tok/s over the run, median TTFT."""
    t0 = time.time()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        res = list(pool.map(lambda p: one_request(port, p, n_predict), prompts))
    dur = max(r[2] for r in res) - t0
    ttfts = [(r[1] - r[0]) * 1000 for r in res if r[1] is not None]
    total = sum(r[3] for r in res)
    return {"output_tok_s": total / dur, "median_ttft_ms": statistics.median(ttfts), "completed": len(res),
            "output_tokens": total, "duration_s": dur}


def cpu_busy(seconds=2.0):
    """Fraction of all cores busy over `seconds` (call while nothing of ours runs: others' load)."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]  # total, idle + iowait
    t0, i0 = sample()
    time.sleep(seconds)
    t1, i1 = sample()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def wait_quiet(max_wait_s, busy_below=0.10):
    """Waits (up to max_wait_s) until other processes leave the CPU mostly idle; returns the last busy fraction."""
    t0 = time.time()
    busy = cpu_busy()
    while busy >= busy_below and time.time() - t0 < max_wait_s:
        log(f"CPU {busy:.0%} busy with other work; waiting (up to {max_wait_s:.0f} s, --wait-quiet)")
        busy = cpu_busy(5.0)
    return busy
