#!/usr/bin/env python3
"""Turns a bench script's raw.csv into the ratio table, summary.csv and summary.json.

Given several raw.csv files of one bench (runs of the same command at different times), it
pools them as one run: each file's repeats are numbered on from the last one's, so that twenty
repeats in each of three runs read as sixty, and a repeat's two tools are still paired with each
other only. Pool only runs of the same code and options.

raw.csv has one row per tool per repeat per cell: the cell's key columns (named with --keys),
then `repeat`, `tool` (`ref` for the reference tool, `sb` for stowbench), `value` (the figure
compared: bytes/s or objects/s) and `target` (the least acceptable stowbench/reference ratio).
Other columns are carried into summary.json untouched.

For each cell: each tool's figure, min and max, and the ratio of the figures. A cell PASSes when
that ratio reaches its target. The exit status is 0 whatever the verdicts: a MISS is a finding to
read, not a failure of the harness.

A tool's figure is its median, balanced over the order the tools ran in. The scripts alternate
which tool runs first from repeat to repeat, because running second is not the same: on ext4
without a journal, for example, a put that creates files within a minute of the other tool
deleting its own steps over every inode just freed, and a small-file put that ran second read
0.67–0.76× the first (bench/fs-vs-fio.sh, docs/performance/fs-vs-fio.md). So a tool's figure is the
geometric mean of its medians in each position it ran in (first, second, …): each position's
median compares like with like, and an order that comes once more often (an odd number of
repeats) weighs no more than the other. A plain median of all the values would do neither: when
running second is much faster, the values form two clusters and the plain median of an even
number of them falls between the clusters, wherever the values nearest the gap happen to lie
(session 39: the 1 MiB buffered put on one thread, each tool within 4 % of the other in each
position, read 0.909 by plain medians). A tool that ran in one position only keeps its plain
median. summary.json keeps the name `median` for the figure, and `ratio_of_plain_medians`
beside the ratio. The position is read from raw.csv's row order: a script appends each row as
that measurement ends, so within a cell and repeat the rows follow the order the tools ran in.

Each repeat runs the two tools back to back, so its own ratio (stowbench / reference of the same
repeat) cancels the machine's slower drifts. The table also shows the median of those paired
ratios, balanced the same way (the geometric mean of the median over the repeats the reference
ran first and the median over those stowbench ran first), and a distribution-free confidence
interval for it: in each order, the order statistics a binomial(n, 1/2) puts at ≥ 95 % coverage
around that order's median (with fewer than 6 pairs no such interval exists, and min–max, at
1 − 2^(1−n), is used), combined the same way, geometric mean of the lows and of the highs. Its
coverage is the product of the two (both intervals holding their medians at once); with one
order only, that order's interval. A target inside the interval means the repeats cannot tell
the two apart from it.

With --tools (bench/pack-durable.sh) the tools are named instead of `ref` and `sb`, any number
of them, and each --ratio A/B is a column of its own: figure A / figure B. Its target is the
`target` of B's rows in that cell (the reference sets the bar A must clear); an empty target
shows the ratio without a verdict. A tool with no rows in a cell shows "-". Rows are grouped by
the key columns in order, each column's values in the order they first appear.
"""
import argparse
import csv
import json
import math
import os
import statistics
import sys


def fmt(value, scale):
    return f"{value / scale:.1f}" if value is not None else "-"


def spread(values, scale):
    if not values:
        return "-"
    return f"{min(values) / scale:.1f}–{max(values) / scale:.1f}"


def positions(rows):
    """{repeat: {tool: position}} of one cell's rows: 0 for the tool whose row came first in that
    repeat, 1 for the next, … (rows are appended as measurements end)."""
    order = {}
    for row in rows:
        ran = order.setdefault(row["repeat"], {})
        ran.setdefault(row["tool"], len(ran))
    return order


def geometric_mean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def position_groups(values_by_position):
    """The non-empty value lists, in position order."""
    return [v for _, v in sorted(values_by_position.items()) if v]


def balanced(values_by_position):
    """The geometric mean of each position's median (see the module's docstring); the plain
    median with one position only, or when a median is not positive. None without values."""
    groups = position_groups(values_by_position)
    if not groups:
        return None
    medians = [statistics.median(v) for v in groups]
    if len(groups) == 1 or any(m <= 0 for m in medians):
        return statistics.median([x for v in groups for x in v])
    return geometric_mean(medians)


def balanced_interval(values_by_position):
    """(low, high, coverage) for `balanced`: each position's median interval, combined as the
    figure is (geometric means of the lows and of the highs), at the product of the coverages."""
    groups = position_groups(values_by_position)
    if not groups:
        return None, None, None
    intervals = [median_interval(v) for v in groups]
    if len(groups) == 1 or any(low <= 0 for low, _, _ in intervals):
        return median_interval([x for v in groups for x in v])
    return (geometric_mean([i[0] for i in intervals]), geometric_mean([i[1] for i in intervals]),
            math.prod(i[2] for i in intervals))


def plain_median(values):
    """The median of `values`, None without any."""
    return statistics.median(values) if values else None


def figure(rows, tool):
    """`tool`'s figure in one cell: its values grouped by the position it ran in, balanced."""
    order = positions(rows)
    by_position = {}
    for row in rows:
        if row["tool"] == tool:
            by_position.setdefault(order[row["repeat"]][tool], []).append(float(row["value"]))
    return balanced(by_position)


def paired_ratios(rows, num="sb", den="ref"):
    """[(num / den, which of the two ran first)] of each repeat that has both, in repeat order."""
    by_repeat = {}
    for row in rows:
        by_repeat.setdefault(row["repeat"], {})[row["tool"]] = float(row["value"])
    order = positions(rows)
    pairs = [(r, v) for r, v in sorted(by_repeat.items(), key=lambda kv: int(kv[0])) if num in v and den in v]
    return [(v[num] / v[den], num if order[r][num] < order[r][den] else den) for r, v in pairs if v[den]]


def paired(rows, num="sb", den="ref"):
    """Each repeat's own num / den, its median balanced over which of the two ran first, and the
    interval each order's statistics give it (`balanced_interval`)."""
    pairs = paired_ratios(rows, num, den)
    by_first = {}
    for q, first in pairs:
        by_first.setdefault(first, []).append(q)
    by_order = {0: by_first.get(den, []), 1: by_first.get(num, [])}
    low, high, coverage = balanced_interval(by_order)
    return {"ratios": [q for q, _ in pairs], "median": balanced(by_order), "by_first": by_first,
            "low": low, "high": high, "coverage": coverage}


def fmt_interval(low, high, coverage):
    """A paired median's interval as the tables print it."""
    return f"{low:.3f}–{high:.3f}, {coverage * 100:.0f} %" if low is not None else "-"


def median_interval(values):
    """(low, high, coverage) of the median: the k-th smallest and largest values, for the largest
    k whose two-sided binomial(n, 1/2) tail stays within 2.5 % on each side; min and max when no k
    reaches 95 %."""
    n = len(values)
    if n == 0:
        return None, None, None
    ordered = sorted(values)
    tail = lambda k: sum(math.comb(n, i) for i in range(k)) / 2 ** n  # P(X <= k - 1)
    k = 1
    while k + 1 <= n // 2 and tail(k + 1) <= 0.025:
        k += 1
    return ordered[k - 1], ordered[n - k], 1 - 2 * tail(k)


def read_runs(paths):
    """The rows of one or more raw.csv files, as one run. Each file's repeats are renumbered to
    follow the previous file's: positions and pairs are read per repeat, and repeat 1 of a
    second run is another repeat than repeat 1 of the first."""
    rows, offset, columns = [], 0, None
    for path in paths:
        try:
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                run = list(reader)
        except OSError as e:
            sys.exit(f"{path}: cannot read it: {e.strerror}")
        if columns is not None and reader.fieldnames != columns:
            sys.exit(f"{path}: its columns ({','.join(reader.fieldnames or [])}) differ from {paths[0]}'s "
                     f"({','.join(columns)}); pool only raw.csv files of one bench")
        columns = reader.fieldnames
        last = 0
        for line, row in enumerate(run, start=2):
            try:
                repeat = int(row["repeat"])
            except (KeyError, TypeError, ValueError):
                sys.exit(f"{path}:{line}: column repeat must be a whole number, not {row.get('repeat')!r}")
            last = max(last, repeat)
            row["repeat"] = str(repeat + offset)
        rows.extend(run)
        offset += last
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("raw", nargs="+", help="raw.csv of a bench run; several are pooled as one run")
    ap.add_argument("--keys", required=True, help="comma-separated key columns, in table order")
    ap.add_argument("--ref-name", help="the reference tool's name in headings (required without --tools)")
    ap.add_argument("--unit", required=True, help="unit label of value/scale, e.g. MB/s")
    ap.add_argument("--scale", type=float, default=1.0, help="divide values by this for display")
    ap.add_argument("--out", required=True, help="directory for summary.csv and summary.json")
    ap.add_argument("--title", default="")
    ap.add_argument("--tools", help="comma-separated tool names in column order, each optionally NAME=HEADING "
                    "(a full heading; else 'NAME UNIT'); instead of the two tools ref and sb")
    ap.add_argument("--ratio", action="append", default=[], metavar="A/B",
                    help="with --tools: a ratio column, median A / median B (repeatable)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    keys = args.keys.split(",")
    if args.tools:
        return main_tools(args, keys)
    if not args.ref_name:
        ap.error("the following arguments are required: --ref-name")

    rows = read_runs(args.raw)
    cells = {}
    for row in rows:
        cell = cells.setdefault(tuple(row[k] for k in keys), {"ref": [], "sb": [], "target": row["target"], "rows": []})
        cell[row["tool"]].append(float(row["value"]))
        cell["rows"].append(row)

    results = []
    for key, cell in cells.items():
        ref, sb = figure(cell["rows"], "ref"), figure(cell["rows"], "sb")
        ratio = sb / ref if ref and sb is not None else None
        target = float(cell["target"])
        verdict = "-" if ratio is None else ("PASS" if ratio >= target else "MISS")
        pair = paired(cell["rows"])
        ref_plain, sb_plain = plain_median(cell["ref"]), plain_median(cell["sb"])
        results.append({
            **dict(zip(keys, key)),
            "ref_median": ref, "ref_min": min(cell["ref"], default=None), "ref_max": max(cell["ref"], default=None),
            "sb_median": sb, "sb_min": min(cell["sb"], default=None), "sb_max": max(cell["sb"], default=None),
            "repeats": min(len(cell["ref"]), len(cell["sb"])),
            "ratio": ratio, "target": target, "verdict": verdict,
            "ratio_of_plain_medians": sb_plain / ref_plain if ref_plain and sb_plain is not None else None,
            "paired_ratios": pair["ratios"], "paired_median": pair["median"],
            "paired_median_reference_first": plain_median(pair["by_first"].get("ref", [])),
            "paired_median_stowbench_first": plain_median(pair["by_first"].get("sb", [])),
            "paired_low": pair["low"], "paired_high": pair["high"], "paired_coverage": pair["coverage"],
            "raw": cell["rows"],
        })

    u = args.unit
    head = keys + [f"{args.ref_name} {u}", "(min–max)", f"stowbench {u}", "(min–max)", "ratio", "target", "verdict",
                   "paired", "(interval, coverage)"]
    table = [head]
    for r in results:
        table.append([r[k] for k in keys] + [
            fmt(r["ref_median"], args.scale), spread(cells_values(r, "ref"), args.scale),
            fmt(r["sb_median"], args.scale), spread(cells_values(r, "sb"), args.scale),
            f"{r['ratio']:.3f}" if r["ratio"] is not None else "-", f"≥{r['target']:.2f}", r["verdict"],
            f"{r['paired_median']:.3f}" if r["paired_median"] is not None else "-",
            fmt_interval(r["paired_low"], r["paired_high"], r["paired_coverage"]),
        ])
    widths = [max(len(str(row[i])) for row in table) for i in range(len(head))]
    if args.title:
        print(args.title)
    for i, row in enumerate(table):
        print("  ".join(str(c).rjust(w) if j >= len(keys) else str(c).ljust(w) for j, (c, w) in enumerate(zip(row, widths))))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    passed = sum(r["verdict"] == "PASS" for r in results)
    missed = sum(r["verdict"] == "MISS" for r in results)
    print(f"{passed} PASS, {missed} MISS (ratio = stowbench / {args.ref_name}, each a median balanced over which "
          f"tool ran first; min–max over {min((r['repeats'] for r in results), default=0)} repeat(s); paired = median "
          f"of each repeat's own ratio, balanced the same way, with the interval each order's statistics give, combined "
          f"alike; coverage: both at once)")

    with open(f"{args.out}/summary.csv", "w", newline="") as f:
        w = csv.writer(f)
        cols = keys + ["ref_median", "ref_min", "ref_max", "sb_median", "sb_min", "sb_max", "repeats", "ratio", "target", "verdict",
                       "ratio_of_plain_medians", "paired_median", "paired_median_reference_first",
                       "paired_median_stowbench_first", "paired_low", "paired_high", "paired_coverage"]
        w.writerow(cols)
        for r in results:
            w.writerow([r[c] for c in cols])
    with open(f"{args.out}/summary.json", "w") as f:
        json.dump({"reference": args.ref_name, "unit_of_values": "per second (raw, unscaled)", "display_unit": u,
                   "display_scale": args.scale, "cells": results}, f, indent=1)
    return 0


def cells_values(result, tool):
    return [float(r["value"]) for r in result["raw"] if r["tool"] == tool]


def main_tools(args, keys):
    """--tools mode: named tools, one ratio column per --ratio, targets from the denominator's rows."""
    tools, headings = [], {}
    for item in args.tools.split(","):
        name, _, heading = item.partition("=")
        tools.append(name)
        headings[name] = heading or f"{name} {args.unit}"
    ratios = []
    for spec in args.ratio:
        num, _, den = spec.partition("/")
        if num not in tools or den not in tools:
            sys.exit(f"--ratio {spec}: both sides must be among --tools ({', '.join(tools)})")
        ratios.append((num, den))

    rows = read_runs(args.raw)
    cells = {}
    for row in rows:
        if row["tool"] not in tools:
            sys.exit(f"{', '.join(args.raw)}: tool {row['tool']!r} is not among --tools ({', '.join(tools)})")
        cell = cells.setdefault(tuple(row[k] for k in keys), {"values": {t: [] for t in tools}, "targets": {}, "rows": []})
        cell["values"][row["tool"]].append(float(row["value"]))
        if row.get("target", "") != "":
            cell["targets"].setdefault(row["tool"], float(row["target"]))
        cell["rows"].append(row)

    # Rows grouped key column by key column, each key's values in the order they first appear in
    # raw.csv (e.g. every put row before every get row, sizes and thread counts as measured).
    rank = [{} for _ in keys]
    for key in cells:
        for i, v in enumerate(key):
            rank[i].setdefault(v, len(rank[i]))
    results = []
    for key, cell in sorted(cells.items(), key=lambda kv: tuple(rank[i][v] for i, v in enumerate(kv[0]))):
        per_tool = {}
        for t in tools:
            v = cell["values"][t]
            per_tool[t] = {"median": figure(cell["rows"], t), "min": min(v, default=None),
                           "max": max(v, default=None), "n": len(v)}
        per_ratio = {}
        for num, den in ratios:
            a, b = per_tool[num]["median"], per_tool[den]["median"]
            ratio = a / b if a is not None and b else None
            target = cell["targets"].get(den)
            verdict = "-" if ratio is None or target is None else ("PASS" if ratio >= target else "MISS")
            pair = paired(cell["rows"], num, den)
            per_ratio[f"{num}/{den}"] = {"ratio": ratio, "target": target, "verdict": verdict,
                                         "paired_ratios": pair["ratios"], "paired_median": pair["median"],
                                         "paired_low": pair["low"], "paired_high": pair["high"],
                                         "paired_coverage": pair["coverage"]}
        present = [per_tool[t]["n"] for t in tools if per_tool[t]["n"]]
        results.append({**dict(zip(keys, key)), "tools": per_tool, "ratios": per_ratio,
                        "repeats": min(present, default=0), "raw": cell["rows"]})

    # Columns: a tool that has no value in any cell is left out of the table.
    shown = [t for t in tools if any(r["tools"][t]["n"] for r in results)]
    head = list(keys)
    for t in shown:
        head += [headings[t], "(min–max)"]
    for num, den in ratios:
        head += [f"{num}/{den}", "target", "verdict", "paired", "(interval, coverage)"]
    table = [head]
    for r in results:
        line = [r[k] for k in keys]
        for t in shown:
            s = r["tools"][t]
            line += [fmt(s["median"], args.scale), spread(cells_values(r, t), args.scale)]
        for num, den in ratios:
            q = r["ratios"][f"{num}/{den}"]
            line += [f"{q['ratio']:.3f}" if q["ratio"] is not None else "-",
                     f"≥{q['target']:.2f}" if q["target"] is not None else "-", q["verdict"],
                     f"{q['paired_median']:.3f}" if q["paired_median"] is not None else "-",
                     fmt_interval(q["paired_low"], q["paired_high"], q["paired_coverage"])]
        table.append(line)
    widths = [max(len(str(row[i])) for row in table) for i in range(len(head))]
    if args.title:
        print(args.title)
    for i, row in enumerate(table):
        print("  ".join(str(c).rjust(w) if j >= len(keys) else str(c).ljust(w) for j, (c, w) in enumerate(zip(row, widths))))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    verdicts = [q["verdict"] for r in results for q in r["ratios"].values()]
    print(f"{verdicts.count('PASS')} PASS, {verdicts.count('MISS')} MISS (each ratio = figure / figure, each figure a "
          f"median balanced over the order the tools ran in; "
          f"min–max over {min((r['repeats'] for r in results), default=0)} repeat(s); target '-': shown, not judged; "
          f"paired = median of each repeat's own ratio, balanced over which of its two tools ran first, with the "
          f"interval each order's statistics give, combined alike; coverage: both at once)")

    with open(f"{args.out}/summary.csv", "w", newline="") as f:
        w = csv.writer(f)
        cols = list(keys)
        for t in tools:
            cols += [f"{t}_median", f"{t}_min", f"{t}_max", f"{t}_n"]
        for num, den in ratios:
            cols += [f"{num}/{den}_{x}" for x in ("ratio", "target", "verdict", "paired_median", "paired_low", "paired_high", "paired_coverage")]
        w.writerow(cols)
        for r in results:
            line = [r[k] for k in keys]
            for t in tools:
                line += [r["tools"][t][x] for x in ("median", "min", "max", "n")]
            for num, den in ratios:
                line += [r["ratios"][f"{num}/{den}"][x] for x in ("ratio", "target", "verdict", "paired_median", "paired_low", "paired_high", "paired_coverage")]
            w.writerow(line)
    with open(f"{args.out}/summary.json", "w") as f:
        json.dump({"tools": tools, "headings": headings, "ratios": [f"{a}/{b}" for a, b in ratios],
                   "unit_of_values": "per second (raw, unscaled)", "display_unit": args.unit,
                   "display_scale": args.scale, "cells": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
