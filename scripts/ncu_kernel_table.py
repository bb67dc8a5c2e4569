#!/usr/bin/env python3
"""Sums ncu's per-launch GPU times by kernel name: reads DIR/ncu_train_SCALING.csv (ncu --csv
--metrics gpu__time_duration.sum, as scripts/device-fp8-train.sh's step "profile" writes them)
and prints one markdown table per file, the kernels by descending total time."""
import collections
import csv
import glob
import os
import re
import sys


def kernel_times(path):
    with open(path) as f:
        lines = [line for line in f if line.startswith('"')]  # ncu's own log lines start with ==
    rows = []
    for r in csv.DictReader(lines):
        if r.get("Metric Name") == "gpu__time_duration.sum":
            rows.append((r["Kernel Name"], float(r["Metric Value"].replace(",", ""))))
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ncu_kernel_table.py DIR")
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "ncu_train_*.csv"))):
        rows = kernel_times(path)
        total = sum(t for _, t in rows)
        by = collections.defaultdict(lambda: [0, 0.0])
        for name, t in rows:
            key = re.sub(r"\(.*", "", name)[:100]  # the name without its argument list
            by[key][0] += 1
            by[key][1] += t
        print(f"\n### {os.path.basename(path)}: {len(rows)} launches, "
              f"{total / 1e6:.3f} ms of kernel time in all\n")
        print("| kernel | launches | total ms | share |\n| --- | --- | --- | --- |")
        for key, (n, t) in sorted(by.items(), key=lambda kv: -kv[1][1])[:30]:
            print(f"| {key} | {n} | {t / 1e6:.3f} | {100 * t / max(total, 1e-9):.1f}% |")


if __name__ == "__main__":
    main()
