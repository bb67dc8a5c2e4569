#!/usr/bin/env python3
"""torch.mm on chunks of the sizes of cgemm's schedules: the floor of chunking (peer for cgemm-bench --parts).

A benchmark harness, not part of cgemm. One process, one GPU, no communication. For each
case of cgemm-bench's sweep, each collective GEMM and each tp, it times torch.mm on one
rank's whole local GEMM and, back to back, on the tp * chunks_per_rank chunks a schedule
splits it into; cgemm-bench --parts chunking --torch_chunks FILE puts both beside cgemm's.

    python3 bench/peers/torch_chunking.py --out DIR [--cases standard,small] [--tp 2,4,8]
    python3 bench/peers/torch_chunking.py --dry-run        # the shapes only; needs no torch

Local GEMMs (bf16, row-major), as cgemm-bench's (launcher/bench/parts/chunked_gemm.cpp):
    all_gather:     [B*S, K] @ [K, N/tp]     chunks of B*S/(tp*c) rows
    reduce_scatter: [B*S, K/tp] @ [K/tp, N]  chunks of B*S/(tp*c) rows
A chunk here is one 2-D torch.mm on B*S/(tp*c) contiguous rows, written in place (out=).
For B = 1 that is exactly cgemm's chunk. For a batch-first case (B > 1) cgemm's chunk is one
strided batched GEMM of the same FLOPs (c = 1: B blocks of S/tp rows; c > 1: B/c whole
blocks), so this floor is the same size and at least as easy.

Method: CUDA events, --warmup untimed rounds, then --iters rounds; each round times the whole
GEMM and each chunked version once (interleaved, so drifts hit all alike), after a short GPU
sleep so the host has enqueued the work before the GPU reaches it. The lhs rotates over
enough copies to exceed twice the 60 MB L2. Medians are written.

Output: DIR/torch_chunks.csv with case, collective, tp, chunks (= tp * chunks per rank),
m, n, k (the whole local GEMM), chunk_rows, whole_ms, chunks_ms, ratio.
Exit status: 0 ok, 2 bad options.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import sys

# name -> (batch, seq, all_gather (hidden_in, hidden_out), reduce_scatter (hidden_in, hidden_out)):
# cgemm-bench's cases (launcher/bench/bench_config.cpp).
CASES = {
    "standard": (4, 8192, (4096, 8192), (8192, 4096)),
    "llama70b": (1, 8192, (8192, 28672), (28672, 8192)),
    "gpt3_175b": (1, 4096, (12288, 49152), (49152, 12288)),
    "small": (1, 2048, (4096, 4096), (4096, 4096)),
}
COLUMNS = ["case", "collective", "tp", "chunks", "m", "n", "k", "chunk_rows", "whole_ms",
           "chunks_ms", "ratio"]


def int_list(text):
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of integers")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"'{text}': each value must be >= 1")
    return values


def chunk_study_args(doc, out_file, default_tp, argv=None):
    """The options of a study of local GEMMs and their chunks (this script's and
    torch_scaled_mm.py's), parsed and checked."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--out", help=f"folder for {out_file} (required unless --dry-run)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of the cases")
    ap.add_argument("--tp", type=int_list, default=default_tp, help="tp values of the local GEMMs")
    ap.add_argument("--chunks-per-rank", type=int_list, default=[1, 4],
                    help="chunks per rank (a schedule has tp * this chunks)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed rounds")
    ap.add_argument("--iters", type=int, default=20, help="timed rounds (median reported)")
    ap.add_argument("--l2-mib", type=float, default=60, help="L2 size; the lhs rotates past twice it")
    ap.add_argument("--dry-run", action="store_true", help="print the problems and exit")
    args = ap.parse_args(argv)
    args.case_names = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in args.case_names if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; choose from {list(CASES)}")
    if args.warmup < 0 or args.iters < 1 or not args.l2_mib > 0:
        ap.error("--warmup >= 0, --iters >= 1, --l2-mib > 0")
    if not args.dry_run and not args.out:
        ap.error("--out DIR is required (except with --dry-run)")
    return args


def parse_args(argv=None):
    return chunk_study_args(__doc__, "torch_chunks.csv", [2, 4, 8], argv)


def problems(args):
    """(case, collective, tp, m, n, k, [chunks per rank that split the sequence])."""
    out = []
    for name in args.case_names:
        batch, seq, ag, rs = CASES[name]
        for collective, (k_in, n_out) in (("all_gather", ag), ("reduce_scatter", rs)):
            for tp in args.tp:
                split = n_out if collective == "all_gather" else k_in
                counts = [c for c in args.chunks_per_rank if seq % (tp * c) == 0]
                if split % tp or not counts:
                    print(f"skipped: {name} {collective} tp {tp} (does not split)", flush=True)
                    continue
                m = batch * seq
                n, k = (n_out // tp, k_in) if collective == "all_gather" else (n_out, k_in // tp)
                out.append((name, collective, tp, m, n, k, counts))
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    todo = problems(args)
    if args.dry_run:
        for name, coll, tp, m, n, k, counts in todo:
            chunks = ", ".join(f"{tp * c} x {m // (tp * c)} rows" for c in counts)
            print(f"{name:<10} {coll:<14} tp {tp}: {m} x {n} x {k}; chunks: {chunks}")
        return 0
    import torch  # only here: --dry-run and --help need no torch

    dev = torch.device("cuda")
    sleep = getattr(torch.cuda, "_sleep", None)
    rows_out = []
    for name, coll, tp, m, n, k, counts in todo:
        lhs_bytes = m * k * 2
        sets = max(2, math.ceil(2 * args.l2_mib * (1 << 20) / lhs_bytes))
        gen = torch.Generator(device=dev)
        gen.manual_seed(1234)
        xs = [torch.randn((m, k), device=dev, dtype=torch.bfloat16, generator=gen) for _ in range(sets)]
        w = torch.randn((k, n), device=dev, dtype=torch.bfloat16, generator=gen).mul_(1 / math.sqrt(k))
        out = torch.empty((m, n), device=dev, dtype=torch.bfloat16)
        turn = [0]

        def next_x():
            turn[0] += 1
            return xs[turn[0] % sets]

        def whole():
            torch.mm(next_x(), w, out=out)

        def chunked(pieces):
            rows = m // pieces

            def run():
                x = next_x()
                for p in range(pieces):
                    torch.mm(x[p * rows:(p + 1) * rows], w, out=out[p * rows:(p + 1) * rows])
            return run

        fns = [whole] + [chunked(tp * c) for c in counts]
        for _ in range(args.warmup):
            for f in fns:
                f()
        times = [[] for _ in fns]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(args.iters):
            for i, f in enumerate(fns):
                torch.cuda.synchronize()
                if sleep is not None:
                    sleep(1_000_000)
                start.record()
                f()
                end.record()
                end.synchronize()
                times[i].append(start.elapsed_time(end))
        med = [statistics.median(t) for t in times]
        for i, c in enumerate(counts):
            row = {"case": name, "collective": coll, "tp": tp, "chunks": tp * c, "m": m, "n": n,
                   "k": k, "chunk_rows": m // (tp * c), "whole_ms": med[0], "chunks_ms": med[i + 1],
                   "ratio": med[i + 1] / med[0]}
            rows_out.append(row)
            print(f"{name:<10} {coll:<14} tp {tp} {tp * c:>3} chunks: whole {med[0]:.3f} ms, "
                  f"chunks {med[i + 1]:.3f} ms, ratio {row['ratio']:.3f}", flush=True)
        del xs, w, out
        torch.cuda.empty_cache()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "torch_chunks.csv")
    with open(path, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=COLUMNS)
        wr.writeheader()
        for r in rows_out:
            wr.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
