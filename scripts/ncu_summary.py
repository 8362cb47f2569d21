#!/usr/bin/env python3
"""Summarise an Nsight Compute CSV (`ncu --csv --page raw --metrics gpu__time_duration.sum,
dram__bytes_read.sum,dram__bytes_write.sum ...`) of `conveyor gpu-bench` into one table per step.

Steps are cut at each `embedding_gather_kernel` (the first kernel of every forward pass); kernels
of one name and grid are summed within a step, with their DRAM rate. docs/gpu.md §8 shows the
table of the first H200 run. Standard library only (it runs on the GPU machine).

  scripts/ncu_summary.py ncu.csv [--steps N]     # N: how many steps to print (default 4)
"""
import argparse
import collections
import csv
import sys


def load(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f)]
    head = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if head is None:
        sys.exit(f"ncu_summary.py: {path} has no ncu CSV header (a row starting with ID)")
    hdr, data = rows[head], rows[head + 2:]  # the row after the header holds the units
    col = {name: hdr.index(name) for name in hdr}
    need = ["Kernel Name", "Grid Size", "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"]
    missing = [n for n in need if n not in col]
    if missing:
        sys.exit(f"ncu_summary.py: {path} lacks {', '.join(missing)}: profile with the metrics this script's doc names")
    num = lambda s: float(s.replace(",", "")) if s else 0.0
    out = []
    for r in data:
        name = r[col["Kernel Name"]].split("(")[0].replace("void ", "").replace("conveyor::<unnamed>::", "")
        out.append((name, r[col["Grid Size"]], num(r[col["gpu__time_duration.sum"]]),
                    num(r[col["dram__bytes_read.sum"]]) + num(r[col["dram__bytes_write.sum"]])))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=4)
    a = ap.parse_args()
    kernels = load(a.csv)
    steps, cur = [], []
    for k in kernels:
        if k[0].startswith("embedding_gather") and cur:
            steps.append(cur)
            cur = []
        cur.append(k)
    steps.append(cur)
    for i, step in enumerate(steps[: a.steps]):
        ns = sum(k[2] for k in step)
        gb = sum(k[3] for k in step) / 1e9
        print(f"step {i}: {len(step)} kernels, {ns / 1e3:.1f} us of kernel time, {gb:.2f} GB, "
              f"{gb * 1e9 / ns if ns else 0:.0f} GB/s")
        agg = collections.OrderedDict()
        for name, grid, t, b in step:
            e = agg.setdefault((name[:48], grid), [0, 0.0, 0.0])
            e[0] += 1
            e[1] += t
            e[2] += b
        for (name, grid), (n, t, b) in agg.items():
            print(f"  {name:48s} grid {grid:14s} x{n:<4d} {t / 1e3:9.1f} us  {t / n / 1e3:8.1f} us each  "
                  f"{b / t if t else 0:6.0f} GB/s")


if __name__ == "__main__":
    main()
