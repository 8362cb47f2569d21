"""tools/gpu_mutants.py's report: the table of mutants and the cases that killed each, as Markdown
(docs/gpu.md) and as text."""
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
    return "\n".join(lines) + "\n"


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
