#!/usr/bin/env python3
"""Turns a bench script's raw.csv into the ratio table, summary.csv and summary.json.

raw.csv has one row per tool per repeat per cell: the cell's key columns (named with --keys),
then `repeat`, `tool` (`ref` for the reference tool, `sb` for stowbench), `value` (the figure
compared: bytes/s or objects/s) and `target` (the least acceptable stowbench/reference ratio).
Other columns are carried into summary.json untouched.

For each cell: median, min and max of each tool's values, and the ratio of the medians. A cell
PASSes when that ratio reaches its target. The exit status is 0 whatever the verdicts: a MISS is
a finding to read, not a failure of the harness.
"""
import argparse
import csv
import json
import statistics
import sys


def fmt(value, scale):
    return f"{value / scale:.1f}" if value is not None else "-"


def spread(values, scale):
    if not values:
        return "-"
    return f"{min(values) / scale:.1f}–{max(values) / scale:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("raw")
    ap.add_argument("--keys", required=True, help="comma-separated key columns, in table order")
    ap.add_argument("--ref-name", required=True, help="the reference tool's name in headings")
    ap.add_argument("--unit", required=True, help="unit label of value/scale, e.g. MB/s")
    ap.add_argument("--scale", type=float, default=1.0, help="divide values by this for display")
    ap.add_argument("--out", required=True, help="directory for summary.csv and summary.json")
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    keys = args.keys.split(",")

    with open(args.raw, newline="") as f:
        rows = list(csv.DictReader(f))
    cells = {}
    for row in rows:
        cell = cells.setdefault(tuple(row[k] for k in keys), {"ref": [], "sb": [], "target": row["target"], "rows": []})
        cell[row["tool"]].append(float(row["value"]))
        cell["rows"].append(row)

    results = []
    for key, cell in cells.items():
        ref = statistics.median(cell["ref"]) if cell["ref"] else None
        sb = statistics.median(cell["sb"]) if cell["sb"] else None
        ratio = sb / ref if ref and sb is not None else None
        target = float(cell["target"])
        verdict = "-" if ratio is None else ("PASS" if ratio >= target else "MISS")
        results.append({
            **dict(zip(keys, key)),
            "ref_median": ref, "ref_min": min(cell["ref"], default=None), "ref_max": max(cell["ref"], default=None),
            "sb_median": sb, "sb_min": min(cell["sb"], default=None), "sb_max": max(cell["sb"], default=None),
            "repeats": min(len(cell["ref"]), len(cell["sb"])),
            "ratio": ratio, "target": target, "verdict": verdict,
            "raw": cell["rows"],
        })

    u = args.unit
    head = keys + [f"{args.ref_name} {u}", "(min–max)", f"stowbench {u}", "(min–max)", "ratio", "target", "verdict"]
    table = [head]
    for r in results:
        table.append([r[k] for k in keys] + [
            fmt(r["ref_median"], args.scale), spread(cells_values(r, "ref"), args.scale),
            fmt(r["sb_median"], args.scale), spread(cells_values(r, "sb"), args.scale),
            f"{r['ratio']:.3f}" if r["ratio"] is not None else "-", f"≥{r['target']:.2f}", r["verdict"],
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
    print(f"{passed} PASS, {missed} MISS (ratio = median stowbench / median {args.ref_name}; "
          f"min–max over {min((r['repeats'] for r in results), default=0)} repeat(s))")

    with open(f"{args.out}/summary.csv", "w", newline="") as f:
        w = csv.writer(f)
        cols = keys + ["ref_median", "ref_min", "ref_max", "sb_median", "sb_min", "sb_max", "repeats", "ratio", "target", "verdict"]
        w.writerow(cols)
        for r in results:
            w.writerow([r[c] for c in cols])
    with open(f"{args.out}/summary.json", "w") as f:
        json.dump({"reference": args.ref_name, "unit_of_values": "per second (raw, unscaled)", "display_unit": u,
                   "display_scale": args.scale, "cells": results}, f, indent=1)
    return 0


def cells_values(result, tool):
    return [float(r["value"]) for r in result["raw"] if r["tool"] == tool]


if __name__ == "__main__":
    sys.exit(main())
