"""HTTP scale (issue 26): N concurrent streaming chat requests against `conveyor serve --device sim`
(each step sleeps as one H100 would for Llama-3-8B), with slow-loris connections (headers sent a
byte at a time) and stalled bodies (Content-Length 100, one byte sent) held open throughout, while
a probe asks /health every 20 ms. Measured: whether every stream completed ([DONE] after a
finish_reason), how many streams were open at once, /health latency (p50, p99, max) and the
server's resident memory before and with every stream open.

Plain asyncio sockets, no HTTP library: the requests are written by hand, the chunked SSE bodies
read until `data: [DONE]`. run_scale() is shared by scripts/http_scale.py and test_http_scale.py.
"""
import asyncio
import json
import multiprocessing
import re
import socket
import statistics
import subprocess
import time

HTTP_LINE = re.compile(r"OpenAI-compatible HTTP at http://([\d.]+):(\d+)/v1")


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


class Probe:
    """/health every period_s from its own process with blocking sockets, so the latency measured
    is the server's, not the wait of the load generator's busy event loop."""

    def __init__(self, host, port, period_s=0.02):
        self.lat_ms, self.failures = [], 0
        self._stop = multiprocessing.Event()
        self._out = multiprocessing.Queue()
        self._proc = multiprocessing.Process(target=Probe._run, args=(host, port, period_s, self._stop, self._out), daemon=True)
        self._proc.start()

    @staticmethod
    def _run(host, port, period_s, stop, out):
        lat, failures = [], 0
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                with socket.create_connection((host, port), timeout=5) as s:
                    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    data = b""
                    while True:
                        b = s.recv(4096)
                        if not b:
                            break
                        data += b
                if data.startswith(b"HTTP/1.1 200"):
                    lat.append((time.monotonic() - t0) * 1000.0)
                else:
                    failures += 1
            except OSError:
                failures += 1
            time.sleep(period_s)
        out.put((lat, failures))

    def stop(self):
        self._stop.set()
        self.lat_ms, self.failures = self._out.get(timeout=30)
        self._proc.join(10)


async def stream_one(host, port, i, max_tokens, state):
    body = json.dumps({"messages": [{"role": "user", "content": "stream %d" % i}], "max_tokens": max_tokens,
                       "stream": True, "ignore_eos": True}).encode()
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body)) + body
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection(host, port), 30)
        w.write(req)
        await w.drain()
        head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 120)
        if not head.startswith(b"HTTP/1.1 200"):
            state["bad_status"] += 1
            w.close()
            return
        state["open_now"] += 1
        state["open_max"] = max(state["open_max"], state["open_now"])
        text = b""
        while True:
            chunk = await asyncio.wait_for(r.read(65536), 300)
            if not chunk:
                break
            text += chunk
        state["open_now"] -= 1
        w.close()
        if b"data: [DONE]" in text and b'"finish_reason":"length"' in text:
            state["complete"] += 1
        else:
            state["incomplete"] += 1
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
        state["errors"] += 1


async def slow_loris(host, port, stop, state):
    """Headers one byte a second: the server drops it at its header deadline; it reconnects."""
    line = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    while not stop.is_set():
        try:
            r, w = await asyncio.open_connection(host, port)
            state["loris_connections"] += 1
            for b in line:
                if stop.is_set():
                    break
                w.write(bytes([b]))
                await w.drain()
                await asyncio.sleep(1.0)
            w.close()
        except OSError:
            await asyncio.sleep(0.5)


async def stalled_body(host, port, stop, state):
    """Headers with Content-Length 100, then one body byte, then nothing."""
    while not stop.is_set():
        try:
            r, w = await asyncio.open_connection(host, port)
            w.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
            await w.drain()
            state["stalled_connections"] += 1
            await r.read()  # until the server gives up on it
            w.close()
        except OSError:
            await asyncio.sleep(0.5)


async def scenario(host, port, pid, streams, max_tokens, loris, stalled):
    stop = asyncio.Event()
    probe, state = Probe(host, port), {k: 0 for k in ("complete", "incomplete", "errors", "bad_status", "open_now", "open_max",
                                             "loris_connections", "stalled_connections")}
    tasks = [asyncio.create_task(slow_loris(host, port, stop, state)) for _ in range(loris)]
    tasks += [asyncio.create_task(stalled_body(host, port, stop, state)) for _ in range(stalled)]
    await asyncio.sleep(1.0)
    rss_before = rss_mb(pid)
    peak = {"rss": rss_before, "open": 0}

    async def sample():
        while not stop.is_set():
            if state["open_now"] >= peak["open"]:
                peak["open"], peak["rss"] = state["open_now"], max(peak["rss"], rss_mb(pid))
            await asyncio.sleep(0.05)
    tasks.append(asyncio.create_task(sample()))
    t0 = time.monotonic()
    await asyncio.gather(*(stream_one(host, port, i, max_tokens, state) for i in range(streams)))
    wall = time.monotonic() - t0
    stop.set()
    probe.stop()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    lat = sorted(probe.lat_ms) or [float("nan")]
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]  # noqa: E731
    growth = (peak["rss"] - rss_before) / max(1, peak["open"])
    return {"streams": streams, "max_tokens": max_tokens, "slow_loris": loris, "stalled_bodies": stalled,
            "complete": state["complete"], "incomplete": state["incomplete"], "errors": state["errors"],
            "bad_status": state["bad_status"], "open_at_once_max": state["open_max"], "wall_s": round(wall, 2),
            "health_probes": len(probe.lat_ms), "health_failures": probe.failures,
            "health_p50_ms": round(statistics.median(lat), 2), "health_p99_ms": round(pct(0.99), 2),
            "health_max_ms": round(lat[-1], 2), "rss_before_mb": round(rss_before, 1), "rss_peak_mb": round(peak["rss"], 1),
            "rss_growth_kb_per_stream": round(growth * 1024, 1),
            "loris_connections": state["loris_connections"], "stalled_connections": state["stalled_connections"]}


def run_scale(binary, streams=1000, max_tokens=64, loris=200, stalled=70, extra=()):
    args = [binary, "serve", "--device", "sim", "--no-journal", "--router", "tcp://127.0.0.1:*", "--pub", "tcp://127.0.0.1:*",
            "--pull", "tcp://127.0.0.1:*", "--http-port", "0", "--max-num-seqs", str(max(256, streams)),
            "--num-kv-blocks", "60000", *extra]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        host = port = None
        deadline = time.monotonic() + 60
        lines = []
        while host is None:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("serve exited:\n" + "".join(lines))
            lines.append(line)
            m = HTTP_LINE.search(line)
            if m:
                host, port = m.group(1), int(m.group(2))
            if time.monotonic() > deadline:
                raise RuntimeError("no HTTP line:\n" + "".join(lines))
        import threading
        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # keep the pipe drained
        return asyncio.run(scenario(host, port, proc.pid, streams, max_tokens, loris, stalled))
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
