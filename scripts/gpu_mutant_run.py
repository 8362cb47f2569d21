"""scripts/gpu_mutants.py's test runner: the emulated suite's cases, each in its own process under a
timeout, classified by what its output shows (check, exception, emu-fault, emu-deadlock, crash,
timeout)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from gpu_mutant_report import short


def list_cases(binary: Path) -> list[str]:
    p = subprocess.run([str(binary), "--list_content"], capture_output=True, text=True)
    text = p.stdout + p.stderr
    cases, stack = [], []
    for line in text.splitlines():
        m = re.match(r"^( *)([A-Za-z0-9_]+)\*?(\s|$)", line)
        if not m:
            continue
        depth = len(m.group(1)) // 4
        stack = stack[:depth] + [m.group(2)]
        cases.append((depth, "/".join(stack)))
    # leaves only: an entry followed by a deeper one is a suite
    leaves = [name for i, (d, name) in enumerate(cases) if not (i + 1 < len(cases) and cases[i + 1][0] > d)]
    return leaves


def order_env(order: str) -> dict:
    """The environment of ctest's run in `order`: the reverse run also has the finite poison, the
    random run interleaves waves of blocks at their barriers."""
    env = dict(os.environ)
    for k in ("CONVEYOR_EMU_ORDER", "CONVEYOR_EMU_POISON", "CONVEYOR_EMU_BLOCKS"):
        env.pop(k, None)
    if order != "forward":
        env["CONVEYOR_EMU_ORDER"] = order
    if order == "reverse":
        env["CONVEYOR_EMU_POISON"] = "finite"
    elif order != "forward":
        env["CONVEYOR_EMU_BLOCKS"] = "interleave"
    return env


_current_child: subprocess.Popen | None = None


def run_case(binary: Path, case: str, order: str, timeout: float, tmp: Path) -> dict:
    """One test case in its own process group. Returns {status, reason, seconds, tail}."""
    global _current_child
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True, exist_ok=True)
    env = order_env(order)
    env["TMPDIR"] = str(tmp)
    cmd = [str(binary), f"--run_test={case}", "--color_output=no", "--log_level=test_suite", "--report_level=no"]
    t0 = time.monotonic()
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    _current_child = child
    timed_out = False
    try:
        raw, _ = child.communicate(timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(child.pid, signal.SIGKILL)
        raw, _ = child.communicate()
    finally:
        _current_child = None
    secs = time.monotonic() - t0
    out = raw.decode(errors="replace")
    shutil.rmtree(tmp, ignore_errors=True)
    rc = child.returncode
    if timed_out:
        return {"status": "fail", "reason": "timeout", "seconds": secs, "tail": evidence(out)}
    if rc == 0:
        ran = re.search(r'Leaving test case "' + re.escape(short(case)) + '"', out) is not None
        return {"status": "pass" if ran else "skip", "reason": "", "seconds": secs, "tail": ""}
    if rc < 0:
        sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        return {"status": "fail", "reason": "crash", "seconds": secs, "tail": f"killed by {sig}\n" + evidence(out)}
    emu = re.search(r"CUDA emulator: ([^\]\n]*)", out)
    if re.search(r"runtime error: [^\n]*misaligned address", out):
        reason = "misaligned"  # every build: UBSan's alignment check (tests/gpu_emu/CMakeLists.txt)
    elif re.search(r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error: ", out):
        reason = "sanitizer"  # --sanitize builds: ASan/UBSan stopped the process
    elif emu and "deadlock" in emu.group(1):
        reason = "emu-deadlock"
    elif emu:
        reason = "emu-fault"
    elif re.search(r"fatal error: in \"[^\"]*\": (memory access violation|signal: )", out):
        reason = "crash"  # a signal Boost.Test caught: device memory is host memory here
    elif re.search(r"fatal error: in |uncaught exception", out):
        reason = "exception"
    else:
        reason = "check"
    return {"status": "fail", "reason": reason, "seconds": secs, "tail": evidence(out)}


def evidence(out: str) -> str:
    """The first error lines of a failing case (what caught the mutant), else the output's end."""
    errs = [ln.strip()[:400] for ln in out.splitlines()
            if ("error" in ln or "ERROR: " in ln or "SUMMARY: " in ln) and "is skipped because" not in ln]
    if errs:
        return "\n".join(errs[:4])
    return "\n".join(ln for ln in out.splitlines() if "is skipped because" not in ln)[-1500:]


def run_suite(ws, cases: list[str], order: str, budget: float, case_cap: dict[str, float]) -> dict:
    results, t0 = {}, time.monotonic()
    for c in cases:
        left = budget - (time.monotonic() - t0)
        if left <= 0:
            results[c] = {"status": "not-run", "reason": "mutant timeout spent", "seconds": 0.0, "tail": ""}
            continue
        results[c] = run_case(ws.binary, c, order, min(left, case_cap.get(c, left)), ws.tmp)
    return results


# --------------------------------------------------------------------------------------------------
# reporting
