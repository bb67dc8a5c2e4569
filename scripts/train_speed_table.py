#!/usr/bin/env python3
"""train_speed_table.py DIR: the speed table of cgemm-train's timed passes against PyTorch's.

Reads DIR/cgemm_<case>.json (cgemm-train --report with --timed_passes) and
DIR/torch_train_mlp.csv (bench/peers/torch_train_mlp.py), made in the same call by
scripts/device-train.sh, and prints a Markdown table: per case the median ms of a forward and
backward pass, tokens/s and TFLOP/s of each, and cgemm's tokens/s over torch's.
"""

import csv
import json
import os
import sys


def main(d):
    torch = {}
    path = os.path.join(d, "torch_train_mlp.csv")
    if os.path.exists(path):
        with open(path) as f:
            torch = {r["case"]: r for r in csv.DictReader(f)}
    print("| case | B x S, H -> F | cgemm ms | cgemm tokens/s | cgemm TFLOP/s | torch ms | "
          "torch TFLOP/s | cgemm / torch (tokens/s) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for case in ("demo", "standard", "llama70b"):
        p = os.path.join(d, "cgemm_%s.json" % case)
        log = os.path.join(d, "cgemm_%s.log" % case)
        if not os.path.exists(p) and not os.path.exists(log) and case not in torch:
            continue  # not asked for
        r = json.load(open(p)) if os.path.exists(p) else {}
        t = r.get("timed_pass")
        if t:
            c = r["config"]
            shape = "%d x %d, %d -> %d" % (c["batch"], c["seq_len"], c["hidden"], c["ffn"])
            row = [case, shape, "%.3f" % t["median_ms"],
                   "%.3g M" % (t["tokens_per_second"] / 1e6), "%.0f" % t["tflops"]]
        else:
            row = [case, "", "failed (see cgemm_%s.log)" % case, "", ""]
        if case in torch and torch[case].get("median_ms"):
            tm = float(torch[case]["median_ms"])
            row += ["%.3f" % tm, torch[case]["tflops"],
                    "%.3fx" % (tm / t["median_ms"]) if t else ""]
        else:
            row += ["failed or missing", "", ""]
        print("| " + " | ".join(row) + " |")
    graph_table(d)
    return 0


def graph_table(d):
    """With CUDA graphs (device-train.sh's graph step): cgemm_<case>_graph.json (cgemm-train
    --cuda_graph on) and torch_train_mlp_graph.csv (the peer with --graph), beside the eager
    ones: the pass in ms each way and the ratios."""
    path = os.path.join(d, "torch_train_mlp_graph.csv")
    if not os.path.exists(path):
        return
    with open(path) as f:
        tgraph = {r["case"]: float(r["median_ms"]) for r in csv.DictReader(f)}
    teager = {}
    if os.path.exists(os.path.join(d, "torch_train_mlp.csv")):
        with open(os.path.join(d, "torch_train_mlp.csv")) as f:
            teager = {r["case"]: float(r["median_ms"]) for r in csv.DictReader(f)}

    def cgemm_ms(case, suffix):
        p = os.path.join(d, "cgemm_%s%s.json" % (case, suffix))
        t = json.load(open(p)).get("timed_pass") if os.path.exists(p) else None
        return t["median_ms"] if t else None

    def ratio(a, b):
        return "%.3fx" % (a / b) if a and b else ""

    print()
    print("| case | cgemm eager ms | cgemm graph ms | torch eager ms | torch graph ms | "
          "cgemm graph vs torch eager | cgemm graph vs torch graph | cgemm graph vs cgemm eager |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for case in ("demo", "standard", "llama70b"):
        if case not in tgraph:
            continue
        ce, cg = cgemm_ms(case, ""), cgemm_ms(case, "_graph")
        te, tg = teager.get(case), tgraph[case]
        cells = [case] + ["%.3f" % v if v else "missing" for v in (ce, cg, te, tg)]
        cells += [ratio(te, cg), ratio(tg, cg), ratio(ce, cg)]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: train_speed_table.py DIR")
    sys.exit(main(sys.argv[1]))
