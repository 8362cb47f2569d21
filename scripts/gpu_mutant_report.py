"""scripts/gpu_mutants.py's report: the table of mutants and the cases that killed each, as Markdown
(docs/gpu-emulator.md) and as text."""
from __future__ import annotations


def short(case: str) -> str:
    return case.rsplit("/", 1)[-1]


def killed_by_text(r: dict) -> str:
    """Killing cases grouped by how they caught the mutant; a case that caught it in only some of
    the orders run names them."""
    if r["result"] == "killed":
        groups: dict[str, list[str]] = {}
        for case, how in r["killed_by"].items():
            orders = [o for o in r["orders"] if any(o == x for x, _ in how)]
            name = short(case) + ("" if len(orders) == len(r["orders"]) else f" [{','.join(orders)}]")
            for reason in sorted({x for _, x in how}):
                groups.setdefault(reason, []).append(name)
        return "; ".join(f"{reason}: {', '.join(names)}" for reason, names in groups.items())
    if r["result"] == "survived":
        return "**SURVIVED**"
    return r["result"]


def summary_markdown(report: dict) -> str:
    """Per file of gpu/: how many mutants, how many killed, and how the kills showed (a mutant
    counts once per way it was caught)."""
    files: dict[str, list[dict]] = {}
    for r in report["mutants"]:
        files.setdefault(r["file"].removeprefix("gpu/"), []).append(r)
    lines = ["| file | mutants | killed | survived | how (mutants) |", "|---|---|---|---|---|"]
    for f, rs in sorted(files.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        hows: dict[str, int] = {}
        for r in rs:
            for reason in sorted({x for how in r.get("killed_by", {}).values() for _, x in how}):
                hows[reason] = hows.get(reason, 0) + 1
        killed = sum(r["result"] == "killed" for r in rs)
        caught = ", ".join(f"{k} {v}" for k, v in sorted(hows.items(), key=lambda kv: -kv[1]))
        lines.append(f"| {f} | {len(rs)} | {killed} | {sum(r['result'] == 'survived' for r in rs)} | {caught} |")
    lines.append(f"| **all** | **{report['scored']}** | **{report['killed']}** | **{report['survived']}** | "
                 f"**{100 * report['kill_rate']:.1f}% killed** |")
    return "\n".join(lines) + "\n"


def markdown(report: dict) -> str:
    lines = [
        f"Commit `{report['commit']}` (plus working-tree changes: {report['dirty']}), tests: "
        f"{report['tests_at']}, build: {report['build']}, orders: "
        f"{', '.join(report['orders'])}, run time {report['run_seconds'] / 60:.1f} min; "
        f"kill rate **{report['killed']}/{report['scored']} = {100 * report['kill_rate']:.1f}%** "
        f"({report['survived']} survived, {report['compile_errors']} compile error(s), {report['stale']} stale).",
        "",
        "| # | mutant | file | what it breaks | killed by (how) |",
        "|---|---|---|---|---|",
    ]
    for i, r in enumerate(report["mutants"], 1):
        lines.append(f"| {i} | `{r['name']}` | {r['file'].removeprefix('gpu/')} | {r['breaks']} | {killed_by_text(r)} |")
    return summary_markdown(report) + "\n" + "\n".join(lines) + "\n"


def text_table(report: dict) -> str:
    rows = [("mutant", "file", "result", "killed by (how)")]
    for r in report["mutants"]:
        rows.append((r["name"], r["file"].removeprefix("gpu/"), r["result"], killed_by_text(r).replace("**", "")))
    w = [max(len(row[i]) for row in rows[:]) for i in range(3)]
    out = []
    for row in rows:
        out.append(f"{row[0]:<{w[0]}}  {row[1]:<{w[1]}}  {row[2]:<{w[2]}}  {row[3]}")
    out.append("")
    out.append(f"kill rate {report['killed']}/{report['scored']} = {100 * report['kill_rate']:.1f}% "
               f"({report['survived']} survived, {report['compile_errors']} compile error(s), {report['stale']} stale); "
               f"run time {report['run_seconds'] / 60:.1f} min")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------


if __name__ == "__main__":
    # Renders a saved report again: scripts/gpu_mutant_report.py build-mutants/report.json > report.md
    import json
    import sys
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/gpu_mutant_report.py REPORT.json  (written by scripts/gpu_mutants.py --json)")
    sys.stdout.write(markdown(json.loads(open(sys.argv[1]).read())))
