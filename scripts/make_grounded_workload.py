#!/usr/bin/env python3
"""Builds the benchmark workloads of issue 30 (speculative decoding) from public-domain text.

  tools/bench/data/grounded.jsonl  jobs whose answers mostly copy their prompt: field extraction to
                                   JSON, summaries quoting the source, light rewrites, spelling fixes;
                                   one passage of 100-320 words (about 150-400 tokens) per job
  tools/bench/data/open.jsonl      open-ended questions with nothing to copy (the non-grounded side
                                   of scripts/bench_spec.py's output check)

Both are `conveyor bench --workload file --dataset F` lines: {"messages": [{"role": "user",
"content": ...}], "max_tokens": N} plus "id", "task" and "source", which the reader ignores.
The sources are committed beside them (tools/bench/data/README.md names their origins):
kjv_excerpts.txt (extracted from Debian's bible-kjv-text with --extract-kjv) and
us_documents.txt. Deterministic: the same sources give the same bytes.

    python3 scripts/make_grounded_workload.py                # rewrite both .jsonl files
    python3 scripts/make_grounded_workload.py --check        # exit 1 if they are stale
    python3 scripts/make_grounded_workload.py --extract-kjv  # re-extract kjv_excerpts.txt (apt-get install bible-kjv)
"""
import argparse
import json
import math
import os
import random
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tools", "bench", "data")
SOURCES = ["kjv_excerpts.txt", "us_documents.txt"]
MAX_WORDS = 250  # a passage; about 1.3 SmolLM2 tokens a word
SEED = 30  # the number: the spelling mistakes are drawn from random.Random(SEED)

# Narrative chapters full of names, places and dates (for extraction), plus some poetry and
# letters (for rewrites). `bible` spellings; the headings are the books' full names.
KJV_REFS = ["Gen11:10-32", "Gen14:1-24", "Gen23:1-20", "Exo2:1-25", "Num13:1-33", "Ruth1:1-22", "Ruth4:1-22",
            "1Sa17:38-51", "1Ki10:1-29", "2Ki25:1-30", "Ezra1:1-11", "Esther3:1-15", "Dan1:1-21", "Jonah1:1-17",
            "Mat2:1-23", "Luke2:1-20", "Acts27:1-20", "Ecc3:1-15", "1Co13:1-13"]

# kind -> (max_tokens, prompt with {ref} and {text}). The phrasings are the ones, of several tried,
# after which SmolLM2-135M-Instruct copies most from the passage (a bigger model copies anyway).
TASKS = {
    "extract_entities": (192, "Extract the names of the people, the places, and the dates or times mentioned in the "
                              "passage below. Answer with JSON only, with exactly these keys: "
                              '{"people": [...], "places": [...], "dates": [...]}. Copy every name exactly as '
                              "it is written in the passage.\n\nPassage ({ref}):\n{text}"),
    "summary_quotes": (192, "Passage ({ref}):\n{text}\n\nWrite a summary of this passage that quotes its key "
                            "sentences verbatim, in quotation marks."),
    "rewrite_plain": (256, "Rewrite this passage in modern English, sentence by sentence:\n\n{text}"),
    "extract_quotes": (256, "Extract the people mentioned in the passage below as JSON: a list of "
                            '{"name": ..., "quote": ...}, where quote is the sentence of the passage that '
                            "mentions them, copied exactly.\n\nPassage ({ref}):\n{text}"),
    "fix_errors": (256, "Correct the spelling and punctuation mistakes in the passage below.\n\nPassage ({ref}):"
                        "\n{text}\n\nWrite out the whole corrected passage."),
}

OPEN_SUBJECTS = ["a lighthouse keeper", "a city garden", "the first day of school", "a lost umbrella",
                 "a robot learning to paint", "a winter market", "an old bridge", "a friendly dragon"]
OPEN_QUESTIONS = [
    (160, "Write a short story about {}."),
    (128, "Write a poem of eight lines about {}."),
    (128, "Describe {} to someone who has never seen one, in a single paragraph."),
    (160, "Invent a dialogue between two friends arguing about {}."),
]


def read_sections(path):
    """[(title, [unit, ...])]: '=== title' starts a section, each other non-comment line is a unit."""
    sections = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#") or not line.strip():
                continue
            if line.startswith("=== "):
                sections.append((line[4:].strip(), []))
            elif not sections:
                sys.exit(f"{path}: text before the first '=== title' line")
            else:
                sections[-1][1].append(line.strip())
    return sections


def words(text):
    return len(text.split())


def sentences(unit):
    """Splits an over-long unit after '.', ';' or ':' followed by a space."""
    parts = re.split(r"(?<=[.;:])\s+", unit)
    return [p for p in parts if p]


def chunk(units):
    """Consecutive units packed into passages of about equal length, at most about MAX_WORDS words:
    a section of n words gives ceil(n / MAX_WORDS) passages."""
    pieces = []
    for u in units:
        pieces += sentences(u) if words(u) > MAX_WORDS else [u]
    k = max(1, math.ceil(sum(map(words, pieces)) / MAX_WORDS))
    target = sum(map(words, pieces)) / k
    passages, cur, n = [], [], 0
    for p in pieces:
        w = words(p)
        if cur and len(passages) < k - 1 and abs(n + w - target) > abs(n - target):
            passages.append(cur)
            cur, n = [], 0
        cur.append(p)
        n += w
    passages.append(cur)
    return passages


def passages_of(file_name):
    """[(source title, passage text)] in document order. Bible verses run on as prose; the
    documents' paragraphs stay paragraphs."""
    sep = " " if file_name.startswith("kjv") else "\n"
    out = []
    for title, units in read_sections(os.path.join(DATA, file_name)):
        for p in chunk(units):
            out.append((title, sep.join(p)))
    return out


def interleave(groups):
    """Round-robin over the groups, so any prefix of the jobs mixes the sources."""
    out, i = [], 0
    while any(i < len(g) for g in groups):
        out += [g[i] for g in groups if i < len(g)]
        i += 1
    return out


def add_mistakes(text, rng):
    """About one word in twelve misspelt (two letters swapped, one dropped or doubled), some commas
    and semicolons dropped, some sentence starts lower-cased. Draws only rng.random()."""
    out = []
    for w in text.split(" "):
        core = re.match(r"^([A-Za-z]+)(.*)$", w, re.S)
        r = rng.random()
        if core and len(core.group(1)) >= 4 and r < 0.08:
            s, tail = core.group(1), core.group(2)
            i = 1 + int(rng.random() * (len(s) - 2))  # an interior letter
            kind = rng.random()
            if kind < 0.4:
                s = s[:i] + s[i + 1] + s[i] + s[i + 2:]
            elif kind < 0.7:
                s = s[:i] + s[i + 1:]
            else:
                s = s[:i] + s[i] + s[i:]
            w = s + tail
        if w.endswith((",", ";")) and rng.random() < 0.3:
            w = w[:-1]
        out.append(w)
    text = " ".join(out)
    return re.sub(r"([.?!] )([A-Z])", lambda m: m.group(1) + (m.group(2).lower() if rng.random() < 0.3 else m.group(2)), text)


def grounded_jobs():
    groups = [passages_of(name) for name in SOURCES]
    # One group per section, so the documents alternate too.
    by_section = []
    for g in groups:
        titles = []
        for title, _ in g:
            if title not in titles:
                titles.append(title)
        by_section += [[p for p in g if p[0] == t] for t in titles]
    rng = random.Random(SEED)
    kinds = list(TASKS)
    jobs = []
    for n, (title, text) in enumerate(interleave(by_section)):
        kind = kinds[n % len(kinds)]
        max_tokens, template = TASKS[kind]
        if kind == "fix_errors":
            text = add_mistakes(text, rng)
        content = template.replace("{ref}", title).replace("{text}", text)
        jobs.append({"id": f"g{n:03d}", "task": kind, "source": title, "max_tokens": max_tokens,
                     "messages": [{"role": "user", "content": content}]})
    return jobs


def open_jobs():
    jobs = []
    for n, subject in enumerate(OPEN_SUBJECTS):
        for q, (max_tokens, question) in enumerate(OPEN_QUESTIONS):
            jobs.append({"id": f"o{len(jobs):03d}", "task": "open", "source": "-", "max_tokens": max_tokens,
                         "messages": [{"role": "user", "content": question.format(subject)}]})
    return jobs


def render(jobs):
    return "".join(json.dumps(j, ensure_ascii=False) + "\n" for j in jobs)


def extract_kjv(path):
    """Writes the KJV_REFS chapters, one verse a line, from Debian's `bible` (bible-kjv)."""
    lines = ["# The King James Version of the Bible (1611): public domain (see README.md).",
             "# Extracted by scripts/make_grounded_workload.py --extract-kjv with `bible` from Debian's",
             "# bible-kjv-text 4.38. Format: '=== Book chapter:verses', then one verse a line.", ""]
    for ref in KJV_REFS:
        try:
            out = subprocess.run(["bible", "-l100000", ref], capture_output=True, text=True, check=True,
                                 stdin=subprocess.DEVNULL).stdout
        except FileNotFoundError:
            sys.exit("`bible` not found. HINT: apt-get install bible-kjv")
        heading = [ln for ln in out.splitlines() if ln.strip()][0].strip()  # e.g. "Genesis 14"
        verses = [re.sub(r"^\s*\d+\s+", "", ln) for ln in out.splitlines() if re.match(r"^\s+\d+\s", ln)]
        span = ref.split(":")[1]
        if not verses or len(verses) != int(span.split("-")[1]) - int(span.split("-")[0]) + 1:
            sys.exit(f"bible {ref}: expected the verses {span}, got {len(verses)} lines:\n{out[:500]}")
        lines += [f"=== {heading}:{span}"] + verses + [""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    print(f"wrote {path} ({len(KJV_REFS)} passages)", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--out-dir", default=DATA, help="where grounded.jsonl and open.jsonl go")
    ap.add_argument("--check", action="store_true", help="compare with the files in --out-dir instead of writing")
    ap.add_argument("--extract-kjv", action="store_true", help="first re-extract kjv_excerpts.txt with `bible`")
    args = ap.parse_args()
    if args.extract_kjv:
        extract_kjv(os.path.join(DATA, "kjv_excerpts.txt"))
    outputs = {"grounded.jsonl": grounded_jobs(), "open.jsonl": open_jobs()}
    stale = []
    for name, jobs in outputs.items():
        path, text = os.path.join(args.out_dir, name), render(jobs)
        if args.check:
            try:
                with open(path, encoding="utf-8") as f:
                    same = f.read() == text
            except FileNotFoundError:
                same = False
            if not same:
                stale.append(path)
            continue
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        lens = [words(j["messages"][0]["content"]) for j in jobs]
        kinds = {}
        for j in jobs:
            kinds[j["task"]] = kinds.get(j["task"], 0) + 1
        print(f"wrote {path}: {len(jobs)} jobs, prompts {min(lens)}-{max(lens)} words, {kinds}", file=sys.stderr)
    if stale:
        print("stale: " + ", ".join(stale) + ". HINT: python3 scripts/make_grounded_workload.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
