#!/usr/bin/env python3
"""Merge step of scripts/slurm/sweep.sbatch: joins the per-task cgemm-run reports of a sweep
(DIR/report-<task>.json, one per array task) into DIR/sweep.csv and DIR/sweep.jsonl, one row
per GEMM of each task, and prints a table in the style of nccl-tests.

    python3 scripts/slurm/merge_reports.py DIR [--expect N] [--csv FILE] [--jsonl FILE]

--expect N: the array had tasks 0..N-1; a missing report is named and the exit status is 1.
The exit status is also 1 when any task's check failed or a report cannot be read. Both
output files are written whole to a temporary name and renamed, so a reader never sees half
of one. Run it after the array, e.g. as a job with --dependency=afterany:<array job ID>.
"""
import argparse
import csv
import json
import os
import re
import sys

COLUMNS = [
    "task", "name", "collective", "dtype", "batch", "seq_len", "hidden_in", "hidden_out",
    "dp", "tp", "world_size", "backend", "transport", "overlapped_ms", "sequential_ms",
    "speedup", "tflops_per_rank", "path", "passed", "failures", "max_abs_error",
    "max_rel_error", "options", "report",
]


def option_text(value):
    """An option's value as the INI file writes it (on/off for booleans)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def options_of(config):
    """The resolved options, name -> INI text: from the report's "config" object, or from the
    INI text that older reports (those without a "commit" field) held there."""
    if isinstance(config, dict):
        out = {}
        for name, value in config.items():
            if name == "gemm":
                out[name] = "; ".join("%s %s %s %s" % (g["name"], g["collective"], g["hidden_in"],
                                                       g["hidden_out"]) for g in value)
            elif value is not None:
                out[name] = option_text(value)
        return out
    out = {}
    for line in (config or "").splitlines():
        m = re.match(r"^\s*([A-Za-z_]+)\s*=\s*(.*?)\s*$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def rows_of(task, path, report):
    options = options_of(report.get("config"))
    mesh = report.get("mesh", {})
    for g in report.get("gemms", []):
        check = g.get("check", {})
        lhs = g.get("lhs_shape", [])
        out = g.get("out_shape", [])
        seq_first = options.get("transpose_batch_sequence") in ("on", "true", "1", "yes")
        batch, seq = ("", "")
        if len(lhs) == 3:
            batch, seq = (lhs[1], lhs[0]) if seq_first else (lhs[0], lhs[1])
        yield {
            "task": task,
            "name": g.get("name", ""),
            "collective": g.get("collective", ""),
            "dtype": options.get("dtype", ""),
            "batch": batch,
            "seq_len": seq,
            "hidden_in": lhs[-1] if lhs else "",
            "hidden_out": out[-1] if out else "",
            "dp": mesh.get("dp", ""),
            "tp": mesh.get("tp", ""),
            "world_size": report.get("world_size", ""),
            "backend": report.get("backend", ""),
            "transport": g.get("transport", report.get("transport", "")),
            "overlapped_ms": g.get("overlapped_ms", ""),
            # The non-overlapped path: "sequential" in newer reports, "reference" before.
            "sequential_ms": g.get("sequential_ms", g.get("reference_ms", "")),
            "speedup": g.get("speedup", ""),
            "tflops_per_rank": g.get("tflops_per_rank", ""),
            "path": g.get("path", ""),
            "passed": bool(check.get("passed", False)) if check else report.get("passed", False),
            "failures": check.get("failures", ""),
            "max_abs_error": check.get("max_abs_error", ""),
            "max_rel_error": check.get("max_rel_error", ""),
            "options": " ".join(
                "%s = %s" % (name, value) for name, value in options.items()
                if name not in ("config", "report", "trace")),
            "report": os.path.basename(path),
        }


def write_atomic(path, write):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        write(f)
    os.replace(tmp, path)


def fmt(v, spec):
    if v == "" or v is None:
        return "-"
    return format(v, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the sweep's directory of report-<task>.json files")
    ap.add_argument("--expect", type=int, default=None, help="number of array tasks (0..N-1)")
    ap.add_argument("--csv", default=None, help="CSV output (default DIR/sweep.csv)")
    ap.add_argument("--jsonl", default=None, help="JSON Lines output (default DIR/sweep.jsonl)")
    a = ap.parse_args()

    problems = []
    reports = {}
    for f in os.listdir(a.dir):
        m = re.fullmatch(r"report-(\d+)\.json", f)
        if m:
            reports[int(m.group(1))] = os.path.join(a.dir, f)
    if a.expect is not None:
        missing = [t for t in range(a.expect) if t not in reports]
        if missing:
            problems.append("no report from task(s) %s" % ",".join(map(str, missing)))
    rows = []
    for task in sorted(reports):
        try:
            with open(reports[task]) as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            problems.append("task %d: cannot read %s: %s" % (task, reports[task], e))
            continue
        task_rows = list(rows_of(task, reports[task], report))
        if not task_rows:
            problems.append("task %d: no GEMM in %s" % (task, reports[task]))
        rows.extend(task_rows)
    if any(not r["passed"] for r in rows):
        problems.append("failed checks in task(s) %s" % ",".join(
            sorted({str(r["task"]) for r in rows if not r["passed"]})))

    csv_path = a.csv or os.path.join(a.dir, "sweep.csv")
    jsonl_path = a.jsonl or os.path.join(a.dir, "sweep.jsonl")

    def write_csv(f):
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (str(v).lower() if isinstance(v, bool) else v) for k, v in r.items()})

    def write_jsonl(f):
        for r in rows:
            f.write(json.dumps(r, sort_keys=False) + "\n")

    write_atomic(csv_path, write_csv)
    write_atomic(jsonl_path, write_jsonl)

    # The table, as nccl-tests prints its results: a "#" header, one line per result.
    short = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
    cols = [  # (title, unit, width, value)
        ("task", "", 4, lambda r: r["task"]),
        ("name", "", -14, lambda r: r["name"][:14]),
        ("collective", "", -14, lambda r: r["collective"]),
        ("type", "", 5, lambda r: short.get(r["dtype"], r["dtype"])),
        ("B", "", 4, lambda r: r["batch"]),
        ("S", "", 6, lambda r: r["seq_len"]),
        ("K", "", 6, lambda r: r["hidden_in"]),
        ("N", "", 6, lambda r: r["hidden_out"]),
        ("dp", "", 3, lambda r: r["dp"]),
        ("tp", "", 3, lambda r: r["tp"]),
        ("backend", "", -7, lambda r: r["backend"]),
        ("time", "(ms)", 9, lambda r: fmt(r["overlapped_ms"], ".3f")),
        ("TFLOP/s", "(rank)", 8, lambda r: fmt(r["tflops_per_rank"], ".2f")),
        ("time", "(ms)", 9, lambda r: fmt(r["sequential_ms"], ".3f")),
        ("speedup", "", 7, lambda r: fmt(r["speedup"], ".2f")),
        ("#wrong", "", 6, lambda r: r["failures"]),
    ]

    def line(values):
        return " ".join(("%" + str(w) + "s") % v for (_, _, w, _), v in zip(cols, values))

    print("# cgemm sweep: %d report(s), %d GEMM(s) from %s" % (len(reports), len(rows), a.dir))
    print("#")
    lead = sum(abs(w) + 1 for _, _, w, _ in cols[:11])
    print("#  " + " " * lead + "%-18s %9s" % ("    overlapped", "sequential"))
    print("#  " + line([c[0] for c in cols]))
    print(("#  " + line([c[1] for c in cols])).rstrip())
    for r in rows:
        print("   " + line([c[3](r) for c in cols]))
    wrong = sum(int(r["failures"] or 0) for r in rows)
    print("# Out of bounds values : %d %s" % (wrong, "OK" if wrong == 0 else "FAILED"))
    speedups = [r["speedup"] for r in rows if isinstance(r["speedup"], (int, float))]
    if speedups:
        print("# Avg speed-up (sequential / overlapped) : %.3f" % (sum(speedups) / len(speedups)))
    print("# written: %s, %s" % (csv_path, jsonl_path))
    for p in problems:
        print("merge_reports: %s" % p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
