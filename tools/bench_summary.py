#!/usr/bin/env python3
"""Rewrite docs/benchmarks.md's "Summary by capability" section from what `make bench-all`
measured (tools/bench-all.sh, decision 0073).

Usage: bench_summary.py DOC RESULTS REFUSED MACHINE
  DOC      the Markdown file whose "## Summary by capability" section is rewritten (up to the
           next "## " heading), atomically: a temporary file beside it, then a rename
  RESULTS  the rows the benches wrote (tools/bench-lib.sh: only rows measured quietly)
  REFUSED  "figure<TAB>why" for each row a bench measured but did not write
  MACHINE  one line: the CPU, its family, the kernel set, the commit, the date

The section keeps its capability table. A capability's "measured" cell becomes the ratios of
its figures (FIGURES below) once the figures table holds every one of them, those not measured
quietly in this run marked; until then it keeps its previous text, marked "not re-measured".
The "### Figures" table below it holds one row per figure: this run's where quiet, the
previous row marked "not re-measured" where not.
"""
import os
import re
import sys
import tempfile

HEAD = "## Summary by capability"
FIG_HEAD = "### Figures measured by `make bench-all`"
FIG_COLS = ("| figure | Strata (or arm A): median (min..max) | peer (or arm B) | A / B, medians "
            "| pairs | load average before → after; other work, cores | bench, commit, date |")
MARK = re.compile(r" \*\(not re-measured[^)]*\)\*$")
NOT_AGAIN = re.compile(r"^\*\(not re-measured[^)]*\)\* ")
# A capability (its first cell's beginning) -> the figures (their names' beginnings) it shows.
FIGURES = {
    "single-device CPU training": ("single device, MLP 784-256-128-10, batch 128",
                                   "single device, MLP 784-256-128-10, batch 32",
                                   "single device, MLP 784-2048-2048-10"),
    "pinned workers, topology": ("all_reduce",),
    "DataParallel, DDP": ("ddp on 2 devices", "dp on 2 devices", "invariant mode"),
    "CUDA accelerator": ("GPU",),
}


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def table(lines, start):
    """The table rows (header and rule excluded) from index start, and the index after it."""
    i = start
    while i < len(lines) and not lines[i].startswith("|"):
        i += 1
    rows = []
    j = i + 2
    while j < len(lines) and lines[j].startswith("|"):
        rows.append(lines[j])
        j += 1
    return lines[i:i + 2], rows, j


def matches(fig, prefixes):
    return any(fig.startswith(p) for p in prefixes)


def short(row):
    """A figure's ratio for the capability table: 'figure: ratio (A / B)'."""
    c = cells(row)
    return "%s: %s×" % (c[0], c[3])


def main():
    doc, results, refused, machine = sys.argv[1:5]
    text = open(doc).read().split("\n")
    try:
        s = text.index(HEAD)
    except ValueError:
        sys.exit("bench_summary: %s has no '%s' section" % (doc, HEAD))
    e = next((i for i in range(s + 1, len(text)) if text[i].startswith("## ")), len(text))
    section = text[s:e]
    cap_head, caps, after = table(section, 1)
    old_figs = []
    if FIG_HEAD in section:
        _, old_figs, _ = table(section, section.index(FIG_HEAD))
    new = {}
    for line in open(results):
        if line.startswith("|"):
            new[cells(line)[0]] = line.rstrip("\n")
    why = {}
    if os.path.exists(refused):
        for line in open(refused):
            if "\t" in line:
                f, w = line.rstrip("\n").split("\t", 1)
                why[f] = w
    figs, seen = [], set()
    for row in old_figs:
        f = cells(row)[0]
        if f in new:
            figs.append(new[f])
        else:
            c = cells(row)
            c[6] = NOT_AGAIN.sub("", c[6])
            c[6] = "*(not re-measured: %s)* %s" % (why.get(f, "not run"), c[6])
            figs.append("| " + " | ".join(c) + " |")
        seen.add(f)
    figs += [new[f] for f in new if f not in seen]
    quiet = [r for r in figs if cells(r)[0] in new]
    out_caps = []
    for row in caps:
        c = cells(row)
        key = next((k for k in FIGURES if c[0].startswith(k)), None)
        if key is None:
            out_caps.append(row)
            continue
        mine = [r for r in figs if matches(cells(r)[0], FIGURES[key])]
        missing = [p for p in FIGURES[key] if not any(cells(r)[0].startswith(p) for r in mine)]
        if not missing:
            c[2] = "; ".join(short(r) + ("" if r in quiet else " *(not re-measured)*")
                             for r in mine)
        else:
            hit = [why[f] for f in why if matches(f, FIGURES[key])]
            c[2] = MARK.sub("", c[2]) + " *(not re-measured by `make bench-all`: %s)*" % (
                hit[0] if hit else "never measured: " + ", ".join(missing))
        out_caps.append("| " + " | ".join(c) + " |")
    body = [HEAD, "",
            "Written by `make bench-all` (tools/bench-all.sh, decision 0073): %s. A figure is "
            "rewritten only when the load average (1 min) was at most 1.5 before its bench, "
            "other work used at most half a core during it, and it had at least 5 alternated "
            "pairs (tools/bench-lib.sh); the others keep their previous text, marked not "
            "re-measured." % machine,
            ""] + cap_head + out_caps + ["", FIG_HEAD, "", FIG_COLS,
                                         "| --- | --- | --- | --- | --- | --- | --- |"] + figs
    out = text[:s] + body + [""] + text[e:]
    d = os.path.dirname(os.path.abspath(doc))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".benchmarks.", suffix=".md")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(out))
    os.chmod(tmp, os.stat(doc).st_mode & 0o777)
    os.replace(tmp, doc)


if __name__ == "__main__":
    main()
