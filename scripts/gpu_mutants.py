#!/usr/bin/env python3
"""Mutation check of the CUDA executor against the CUDA emulation tier (docs/gpu-emulator.md).

Seeds realistic GPU-code defects, one at a time, into a *scratch copy* of the source tree (the
working tree's gpu/ is only ever read), rebuilds the `gpu_emu_tests` target there (ninja, ccache,
`nice`), runs every test case of the emulated suite in its own process and reports which cases
catch each mutant (killed) or none (SURVIVED).

  scripts/gpu_mutants.py                      # every mutant, forward thread order
  scripts/gpu_mutants.py --only rope_k_not_rotated --orders all
  scripts/gpu_mutants.py --list               # the mutants, and whether each snippet still matches

Each mutant is one exact textual substitution (file under gpu/, original snippet, replacement,
what it breaks). A mutant whose snippet is not found exactly once in the working tree's file is
refused (reported as "stale"), so the list stays honest as gpu/ changes.

Layout of --work (default build-mutants/ in the repository, git-ignored):
  src/    a copy of the working tree (git's tracked and untracked-but-not-ignored files)
  build/  the CMake/ninja build of src/ (Release, no nvcc: only the emulated tier is built)
  build-asan/  the same with ASan+UBSan (--sanitize)
  tmp/    TMPDIR of the test processes (their tiny GGUF files), emptied after each case

Each test case runs in its own process (a fault of the emulator is sticky for the rest of a
process, as on a GPU), under a timeout: min(--case-timeout, what is left of --timeout for the
mutant). A failing case is classified by what its output shows: `check` (a BOOST_TEST against
the CPU reference failed), `exception` (a CUDA/cuBLASLt error or a C++ exception), `emu-fault` or
`emu-deadlock` (the emulator's fault and deadlock detection, docs/gpu-emulator.md), `misaligned`
(UBSan's alignment check, in every build), `crash` (a signal), `sanitizer` (ASan/UBSan, with
--sanitize), `timeout`. The reverse order runs with the finite poison (CONVEYOR_EMU_POISON=finite),
as ctest's gpu_emu_reverse does, and a random order with blocks interleaved in waves
(CONVEYOR_EMU_BLOCKS=interleave), as ctest's gpu_emu_random does. A mutant that does not compile is a "compile error": reported
separately, not a kill.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

REPO = Path(__file__).resolve().parent.parent
TARGET = "gpu_emu_tests"
ORDERS_ALL = ["forward", "reverse", "random:12345"]
TEST_DIRS = ["tests/gpu", "tests/gpu_emu/tests"]  # the emulated suite's test sources


from gpu_mutant_list import MUTANTS, Mutant  # noqa: E402  (the defects, one file of data)
from gpu_mutant_report import markdown, short, text_table  # noqa: E402
import gpu_mutant_run  # noqa: E402
from gpu_mutant_run import list_cases, run_suite  # noqa: E402


# --------------------------------------------------------------------------------------------------
# helpers

def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def snippet_count(m: Mutant, root: Path = REPO) -> int:
    """How often the mutant's original snippet occurs in the working tree's file (read only)."""
    p = root / m.file
    if not p.is_file():
        return 0
    return p.read_text().count(m.original)


def tree_files(repo: Path) -> list[str]:
    """The working tree as git sees it: tracked files plus untracked files not ignored."""
    out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         check=True, capture_output=True).stdout
    return sorted({f for f in out.decode().split("\0") if f and (repo / f).is_file()})


def sync_tree(repo: Path, dst: Path) -> int:
    """Makes dst a copy of the working tree. Files are compared by content; a changed file is
    rewritten (fresh mtime, so ninja rebuilds what depends on it), an unchanged one is left alone."""
    files = tree_files(repo)
    keep = set(files)
    changed = 0
    for rel in files:
        src, out = repo / rel, dst / rel
        data = src.read_bytes()
        if out.is_file() and out.read_bytes() == data:
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        shutil.copymode(src, out)
        changed += 1
    for p in sorted(dst.rglob("*"), reverse=True):
        rel = p.relative_to(dst).as_posix()
        if p.is_file() and rel not in keep:
            p.unlink()
            changed += 1
        elif p.is_dir() and not any(p.iterdir()):
            p.rmdir()
    return changed


def run_logged(cmd: list[str], cwd: Path | None = None, env: dict | None = None) -> tuple[int, str]:
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       errors="replace")
    return p.returncode, p.stdout


class Workspace:
    def __init__(self, work: Path, jobs: int, sanitize: bool = False):
        self.work = work
        self.src = work / "src"
        self.sanitize = sanitize
        self.build = work / ("build-asan" if sanitize else "build")
        self.tmp = work / "tmp"
        self.jobs = jobs
        # The scratch copy must never be the working tree itself.
        if self.src.resolve() == REPO:
            raise SystemExit(f"refusing a scratch tree at {self.src}: that is the working tree")
        self.binary = self.build / "tests" / "gpu_emu" / TARGET

    def prepare(self, tests_at: str | None = None) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.work / ".lock", "w")  # one run per scratch tree (held until exit)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"another gpu_mutants.py run uses {self.work}; wait for it or pass another --work")
        self.src.mkdir(parents=True, exist_ok=True)
        n = sync_tree(REPO, self.src)
        log(f"scratch tree {self.src}: {n} file(s) refreshed from the working tree")
        if tests_at:  # the GPU tiers' tests as they were at a revision (what an older suite catches)
            for d in TEST_DIRS:
                for p in (self.src / d).glob("*"):
                    if p.is_file():
                        p.unlink()
            listing = subprocess.run(["git", "-C", str(REPO), "ls-tree", "-r", "--name-only", tests_at, "--", *TEST_DIRS],
                                     check=True, capture_output=True, text=True).stdout.split()
            for rel in listing:
                if Path(rel).parent.as_posix() not in TEST_DIRS:
                    continue
                data = subprocess.run(["git", "-C", str(REPO), "show", f"{tests_at}:{rel}"], check=True,
                                      capture_output=True).stdout
                (self.src / rel).write_bytes(data)
            log(f"scratch tree: {', '.join(TEST_DIRS)} as at {tests_at} ({len(listing)} files)")
        if not (self.build / "build.ninja").is_file():
            log(f"configuring {self.build} (Release{', ASan+UBSan' if self.sanitize else ''}, ccache, ninja, no nvcc)")
            rc, out = run_logged(["nice", "cmake", "-S", str(self.src), "-B", str(self.build), "-G", "Ninja",
                                  "-DCMAKE_BUILD_TYPE=Release", "-DCONVEYOR_CUDA=OFF",
                                  f"-DCONVEYOR_SANITIZE={'ON' if self.sanitize else 'OFF'}"])
            if rc != 0:
                sys.stderr.write(out[-4000:])
                raise SystemExit("cmake configure failed")

    def compile(self) -> tuple[bool, str, float]:
        t0 = time.monotonic()
        rc, out = run_logged(["nice", "ninja", "-C", str(self.build), f"-j{self.jobs}", TARGET])
        return rc == 0, out, time.monotonic() - t0

    def scratch(self, rel: str) -> Path:
        p = (self.src / rel).resolve()
        assert p.is_relative_to(self.src.resolve()) and p != (REPO / rel).resolve(), p
        return p


# --------------------------------------------------------------------------------------------------
# the suite

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="run only this mutant (repeatable, or comma-separated)")
    ap.add_argument("--list", action="store_true", help="list the mutants and check their snippets, run nothing")
    ap.add_argument("--jobs", type=int, default=1, help="build parallelism (default 1)")
    ap.add_argument("--orders", default="forward",
                    help="thread orders, comma-separated from forward,reverse,random:SEED, or 'all' (default forward)")
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="seconds one mutant's suite may take per order (default 900)")
    ap.add_argument("--case-timeout", type=float, default=0.0,
                    help="seconds per test case (default: max(120, 8 x the case's unmutated time))")
    ap.add_argument("--work", type=Path, default=REPO / "build-mutants", help="scratch directory (default build-mutants/)")
    ap.add_argument("--tests-at", metavar="REV",
                    help="run against the tests in tests/gpu and tests/gpu_emu/tests as at git revision REV "
                         "(gpu/ stays the working tree's)")
    ap.add_argument("--sanitize", action="store_true",
                    help="build with AddressSanitizer and UBSan (-DCONVEYOR_SANITIZE=ON, build-asan/ in --work): "
                         "slower, but sees shared-memory overruns the Release emulator cannot")
    ap.add_argument("--json", type=Path, help="write the report as JSON here")
    ap.add_argument("--markdown", type=Path, help="write the table as Markdown here")
    args = ap.parse_args()

    orders = ORDERS_ALL if args.orders == "all" else [o.strip() for o in args.orders.split(",") if o.strip()]
    for o in orders:
        if o not in ("forward", "reverse") and not re.fullmatch(r"random(:\d+)?", o):
            ap.error(f"unknown thread order {o!r}")
    names = {m.name for m in MUTANTS}
    assert len(names) == len(MUTANTS), "duplicate mutant names"
    only = [n for arg in args.only for n in arg.split(",") if n]
    for n in only:
        if n not in names:
            ap.error(f"no mutant named {n!r} (see --list)")
    selected = [m for m in MUTANTS if not only or m.name in only]

    counts = {m.name: snippet_count(m) for m in selected}
    if args.list:
        for m in selected:
            ok = "ok" if counts[m.name] == 1 else f"STALE ({counts[m.name]} matches)"
            print(f"{m.name:<40} {m.file:<24} {ok:<8} {m.breaks}")
        return 0 if all(c == 1 for c in counts.values()) else 1
    stale = [m for m in selected if counts[m.name] != 1]
    for m in stale:
        log(f"REFUSED {m.name}: its snippet occurs {counts[m.name]} time(s) in {m.file}, not exactly once")
    if only and stale:
        return 2

    started = time.monotonic()
    ws = Workspace(args.work.resolve(), args.jobs, args.sanitize)
    ws.prepare(args.tests_at)
    # What the scratch tree was copied from: the run uses only this copy, so the working tree may
    # change while it goes on. Each mutant applies to (and is undone to) its file as copied here.
    originals = {m.file: ws.scratch(m.file).read_text() for m in selected}
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "gpu", "tests/gpu", "tests/gpu_emu"],
                           capture_output=True, text=True).stdout.split("\n")
    dirty = [d[3:] for d in dirty if d.strip()]

    def restore_all() -> None:
        for m in selected:
            dst = ws.scratch(m.file)
            if dst.read_text() != originals[m.file]:
                dst.write_text(originals[m.file])

    def on_signal(signum, _frame):
        child = gpu_mutant_run._current_child
        if child is not None:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        restore_all()
        log(f"interrupted (signal {signum}); the scratch tree is restored, the working tree was never touched")
        raise SystemExit(130)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    # Baseline: the unmutated tree builds, and every case passes (or skips) in every order.
    log(f"building {TARGET} (unmutated, -j{args.jobs})")
    ok, out, secs = ws.compile()
    if not ok:
        sys.stderr.write(out[-6000:])
        raise SystemExit("the unmutated tree does not build")
    log(f"built in {secs:.0f} s")
    cases = list_cases(ws.binary)
    if not cases:
        raise SystemExit("could not list the test cases")
    baseline: dict[str, dict] = {}
    active: list[str] = []
    for order in orders:
        log(f"baseline run, order {order}: {len(cases)} cases")
        res = run_suite(ws, cases, order, 1e9, {c: 1800.0 for c in cases})
        baseline[order] = res
        for c, r in res.items():
            if r["status"] == "fail":
                log(f"  baseline FAILS {c} ({r['reason']}): excluded from the kill check\n{r['tail'][-800:]}")
    for c in cases:
        if all(baseline[o][c]["status"] == "pass" for o in orders):
            active.append(c)
    skipped = [c for c in cases if any(baseline[o][c]["status"] == "skip" for o in orders)]
    base_secs = {c: max(baseline[o][c]["seconds"] for o in orders) for c in active}
    log(f"{len(active)} cases pass unmutated ({sum(base_secs.values()):.0f} s per order, slowest order); "
        f"{len(skipped)} skip: {', '.join(short(c) for c in skipped)}")
    case_cap = {c: args.case_timeout if args.case_timeout > 0 else max(120.0, 8 * base_secs[c]) for c in active}

    results = []
    for idx, m in enumerate(selected, 1):
        entry = {"name": m.name, "file": m.file, "breaks": m.breaks, "original": m.original,
                 "replacement": m.replacement, "orders": orders, "killed_by": {}, "build_seconds": 0.0,
                 "test_seconds": 0.0, "cases": {}}
        if counts[m.name] != 1:
            entry["result"] = f"stale ({counts[m.name]} matches)"
            results.append(entry)
            continue
        log(f"[{idx}/{len(selected)}] {m.name} ({m.file}): {m.breaks}")
        dst = ws.scratch(m.file)
        orig = originals[m.file]
        try:
            dst.write_text(orig.replace(m.original, m.replacement, 1))
            ok, out, secs = ws.compile()
            entry["build_seconds"] = round(secs, 1)
            if not ok:
                entry["result"] = "compile error"
                entry["compile_log"] = out[-3000:]
                log(f"  compile error ({secs:.0f} s)")
                results.append(entry)
                continue
            log(f"  built in {secs:.0f} s")
            t0 = time.monotonic()
            for order in orders:
                res = run_suite(ws, active, order, args.timeout, case_cap)
                for c, r in res.items():
                    entry["cases"].setdefault(c, {})[order] = {k: (round(v, 2) if k == "seconds" else v)
                                                               for k, v in r.items() if k != "tail" or r["status"] == "fail"}
                    if r["status"] == "fail":
                        entry["killed_by"].setdefault(c, []).append((order, r["reason"]))
            entry["test_seconds"] = round(time.monotonic() - t0, 1)
            entry["result"] = "killed" if entry["killed_by"] else "survived"
            how = sorted({x for v in entry["killed_by"].values() for _, x in v})
            log(f"  {entry['result'].upper()}" + (f" by {len(entry['killed_by'])} case(s) ({', '.join(how)})"
                                                   if entry["killed_by"] else "") + f", tests {entry['test_seconds']:.0f} s")
        finally:
            dst.write_text(orig)
        results.append(entry)

    killed = sum(r["result"] == "killed" for r in results)
    survived = sum(r["result"] == "survived" for r in results)
    compile_errors = sum(r["result"] == "compile error" for r in results)
    scored = killed + survived + compile_errors
    report = {
        "commit": commit,
        "dirty": ", ".join(dirty) if dirty else "none in gpu/ or tests/gpu*",
        "orders": orders,
        "build": "ASan+UBSan" if args.sanitize else "Release",
        "tests_at": args.tests_at or "working tree",
        "cases": active,
        "skipped_cases": skipped,
        "killed": killed,
        "survived": survived,
        "compile_errors": compile_errors,
        "stale": len(stale),
        "scored": scored,
        "kill_rate": killed / scored if scored else 0.0,
        "run_seconds": round(time.monotonic() - started, 1),
        "mutants": [{k: (dict((c, [list(x) for x in v]) for c, v in r[k].items()) if k == "killed_by" else r[k])
                     for k in r} for r in results],
    }
    sys.stdout.write(text_table(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
