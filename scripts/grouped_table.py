#!/usr/bin/env python3
"""Joins cgemm-bench --parts grouped's CSV with bench/peers/torch_grouped_mm.py's into one table.

    python3 scripts/grouped_table.py CGEMM_PARTS_GROUPED_CSV [TORCH_GROUPED_MM_CSV]

Rows join on (tokens, groups, k, n, sizes); a case missing on the torch side keeps empty torch
cells. Prints one Markdown table: each path's median ms and TFLOP/s (over the real ragged work,
2 * tokens * K * N), then the better cgemm path over the better torch call (the issue's target:
<= 1.00x on every case), the group sizes' agreement check (cgemm's grouped and tiles vs loop),
then the device tiles (sizes read on the device: capturable), eager and replayed from a CUDA
graph, against the tiles (not in "best cgemm": they compute up to G 128 rows more).
Standard library only. Exit status: 0, or 2 when a file cannot be read.
"""

import csv
import sys


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def cell(ms, tf):
    return "" if ms is None else f"{ms:.3f} ms ({tf:.0f})"


def device_cells(r, tiles_ms):
    """The device tiles' four cells (empty where the CSV predates them or they did not run)."""
    dm, gm = num(r.get("device_ms")), num(r.get("device_graph_ms"))
    if r.get("device_path", "not run") == "not run" or dm is None:
        return " | | | " + r.get("device_path", "")
    ratio = f"{dm / tiles_ms:.2f}x" if tiles_ms else ""
    gcell = "" if gm is None else f"{gm:.3f} ms"
    return (f"{cell(dm, num(r.get('device_tflops')))} | {gcell} | {ratio} | "
            f"{r.get('device_rel_diff', '')}, {r.get('device_graph_same', '')}")


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        cg = read(argv[1])
        th = read(argv[2]) if len(argv) == 3 else []
    except OSError as e:
        print(f"grouped_table.py: {e}", file=sys.stderr)
        return 2
    key = lambda r: (r["tokens"], r["groups"], r["k"], r["n"], r["sizes"])
    torch = {key(r): r for r in th}
    print("| tokens x G x K x N | sizes | cgemm loop | cgemm cuBLAS grouped | cgemm cuBLASLt tiles "
          "| dense GEMM floor | torch._grouped_mm | loop of torch.mm | best cgemm / best torch "
          "| max rel diff (grouped, tiles) | device tiles eager | device tiles graph "
          "| device eager / tiles | device rel diff, graph = eager |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in cg:
        t = torch.get(key(r), {})
        lm, gm, dm = num(r["loop_ms"]), num(r["grouped_ms"]), num(r["dense_ms"])
        tim = num(r.get("tiles_ms"))
        tgm, tlm = num(t.get("grouped_mm_ms")), num(t.get("loop_ms"))
        best_c = min(v for v in (lm, gm, tim) if v is not None)
        torch_ms = [v for v in (tgm, tlm) if v is not None]
        ratio = f"{best_c / min(torch_ms):.2f}x" if torch_ms else ""
        gpath = r.get("grouped_path", "")
        gcell = cell(gm, num(r["grouped_tflops"]))
        if gpath and gpath != "cublas_grouped":
            gcell += f" [{gpath}]"
        tpath = r.get("tiles_path", "")
        tcell = cell(tim, num(r.get("tiles_tflops")))
        if tpath and tpath != "cublaslt_tiles":
            tcell += f" [{tpath}]"
        print(f"| {r['case']} | {r['sizes']} | {cell(lm, num(r['loop_tflops']))} | {gcell} | "
              f"{tcell} | {cell(dm, num(r['dense_tflops']))} | "
              f"{cell(tgm, num(t.get('grouped_mm_tflops')))} | "
              f"{cell(tlm, num(t.get('loop_tflops')))} | {ratio} | "
              f"{r['max_rel_diff']}, {r.get('tiles_rel_diff', '')} | "
              f"{device_cells(r, tim)} |")
    print("\nms: medians; (n): TFLOP/s over the real ragged work. best / best < 1: cgemm faster.")
    notes = [f"{r['case']} {r['sizes']}: {r['note']}" for r in th if r.get("note")]
    if notes:
        print("torch notes:\n" + "\n".join("  " + n for n in notes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
