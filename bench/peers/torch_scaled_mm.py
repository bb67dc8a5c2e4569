#!/usr/bin/env python3
"""torch._scaled_mm (FP8 e4m3, per-tensor scales, bf16 out) against torch.mm on the sweep's GEMMs.

A benchmark harness, not part of cgemm: the FP8 peer of cgemm-bench --scaling current. One
process, one GPU, no communication. For each case of cgemm-bench's sweep, each collective GEMM
and each tp it times, on one rank's local GEMM [M, K] @ [K, N] (tp 1: the whole GEMM of the
sweep, the shapes of cgemm-bench's tp-1 rows):

    bf16_ms         torch.mm on bf16
    fp8_ms          torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16): a [M, K]
                    row-major e4m3, b [K, N] column-major e4m3 (b = w.t().contiguous().t()),
                    scales 0-d float32 tensors (scale_inv = amax / 448), use_fast_accum off
                    (torch's default: the call the issue's figures come from)
    fp8_fast_ms     the same with use_fast_accum=True (cgemm's default, as TE's)
    fp8_chunks_ms   torch._scaled_mm back to back on the tp x chunks-per-rank row chunks a
                    schedule splits the GEMM into (the FP8 chunking table; torch_chunking.py
                    is its bf16 twin)
    quantize_x_ms   torch's own per-tensor cast of the bf16 x: amax = x.abs().max(), scale =
                    448 / amax, (x * scale).to(torch.float8_e4m3fn)
    quantize_w_ms   the same for w [K, N], into the column-major b (a transposed copy, as
                    cgemm and TE quantize a weight for a Hopper FP8 GEMM)
    quant_gemm_ms   both casts then fp8 (the "quantize + GEMM" of one call, in torch)

    python3 bench/peers/torch_scaled_mm.py --out DIR [--cases standard,small] [--tp 1,2,4,8]
    python3 bench/peers/torch_scaled_mm.py --dry-run        # the shapes only; needs no torch

Local GEMMs, as torch_chunking.py's (cgemm's launcher/bench/parts/chunked_gemm.cpp):
    all_gather:     [B*S, K] @ [K, N/tp]     chunks of B*S/(tp*c) rows
    reduce_scatter: [B*S, K/tp] @ [K/tp, N]  chunks of B*S/(tp*c) rows

Method: CUDA events, --warmup untimed rounds, then --iters rounds; each round runs every timed
call once (interleaved, so drifts hit all alike), each after a short GPU sleep so the host has
enqueued the work before the GPU reaches it. x (bf16 and its e4m3 copy) rotates over enough
copies to exceed twice the 60 MB L2. Inputs: x normal of std 1, w normal of std 1/sqrt(K).
Medians are written.

Output: DIR/torch_scaled_mm.csv, one row per case, collective, tp and chunks (= tp x chunks
per rank): case, collective, tp, chunks, m, n, k, chunk_rows, then the times above (the whole
GEMM's repeated on each chunks row of a problem), bf16_tflops, fp8_tflops, fp8_speedup
(bf16_ms / fp8_ms), chunks_ratio (fp8_chunks_ms / fp8_ms). cgemm-bench's CSV joins on case,
collective, m, n, k at tp 1.
Exit status: 0 ok, 2 bad options.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_chunking import CASES, chunk_study_args  # noqa: E402  (the sweep's shapes, one list)

FP8_MAX = 448.0  # float8_e4m3fn
COLUMNS = ["case", "collective", "tp", "chunks", "m", "n", "k", "chunk_rows", "bf16_ms", "fp8_ms",
           "fp8_fast_ms", "fp8_chunks_ms", "quantize_x_ms", "quantize_w_ms", "quant_gemm_ms",
           "bf16_tflops", "fp8_tflops", "fp8_speedup", "chunks_ratio"]


def parse_args(argv=None):
    return chunk_study_args(__doc__, "torch_scaled_mm.csv", [1, 2, 4, 8], argv)


def problems(args):
    """(case, collective, tp, m, n, k, [chunks per rank that split the rows into FP8 chunks])."""
    out = []
    for name in args.case_names:
        batch, seq, ag, rs = CASES[name]
        for collective, (k_in, n_out) in (("all_gather", ag), ("reduce_scatter", rs)):
            for tp in args.tp:
                split = n_out if collective == "all_gather" else k_in
                m = batch * seq
                n, k = (n_out // tp, k_in) if collective == "all_gather" else (n_out, k_in // tp)
                # torch._scaled_mm wants every dim a multiple of 16, the chunks' rows too.
                counts = [c for c in args.chunks_per_rank
                          if seq % (tp * c) == 0 and (m // (tp * c)) % 16 == 0]
                if split % tp or n % 16 or k % 16 or not counts:
                    print(f"skipped: {name} {collective} tp {tp} (does not split)", flush=True)
                    continue
                out.append((name, collective, tp, m, n, k, counts))
    return out


def per_tensor_cast(torch, t, fp8):
    """torch's own current scaling: (t * scale).to(fp8) with scale = 448 / amax; the scale_inv
    as a 0-d float32 tensor."""
    amax = t.abs().max().float().clamp_(min=1e-12)
    scale = FP8_MAX / amax
    return (t.float() * scale).to(fp8), (1.0 / scale)


def time_rounds(torch, fns, warmup, iters):
    sleep = getattr(torch.cuda, "_sleep", None)
    for _ in range(warmup):
        for f in fns:
            f()
    times = [[] for _ in fns]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(iters):
        for i, f in enumerate(fns):
            torch.cuda.synchronize()
            if sleep is not None:
                sleep(1_000_000)
            start.record()
            f()
            end.record()
            end.synchronize()
            times[i].append(start.elapsed_time(end))
    return [statistics.median(t) for t in times]


def measure(torch, args, name, coll, tp, m, n, k, counts):
    dev = torch.device("cuda")
    fp8 = torch.float8_e4m3fn
    sets = max(2, math.ceil(2 * args.l2_mib * (1 << 20) / (m * k * 2)))
    gen = torch.Generator(device=dev)
    gen.manual_seed(1234)
    xs = [torch.randn((m, k), device=dev, dtype=torch.bfloat16, generator=gen) for _ in range(sets)]
    w = torch.randn((k, n), device=dev, dtype=torch.bfloat16, generator=gen).mul_(1 / math.sqrt(k))
    qx = [per_tensor_cast(torch, x, fp8) for x in xs]
    # b column-major [K, N]: stored [N, K] (the notes' b = w.t().contiguous().t()).
    b_rows, sb = per_tensor_cast(torch, w.t().contiguous(), fp8)
    b = b_rows.t()
    out = torch.empty((m, n), device=dev, dtype=torch.bfloat16)
    turn = [0]

    def nxt():
        turn[0] += 1
        return turn[0] % sets

    def scaled(a, sa, fast, dst):
        return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                use_fast_accum=fast, out=dst)

    # out= keeps the chunks writing in place, as cgemm's; older builds without it allocate.
    try:
        scaled(qx[0][0], qx[0][1], False, out)
    except (TypeError, RuntimeError):
        def scaled(a, sa, fast, dst):  # noqa: F811
            dst.copy_(torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                       use_fast_accum=fast))

    def bf16():
        torch.mm(xs[nxt()], w, out=out)

    def fp8_whole(fast):
        def run():
            a, sa = qx[nxt()]
            scaled(a, sa, fast, out)
        return run

    def fp8_chunks(pieces):
        rows = m // pieces

        def run():
            a, sa = qx[nxt()]
            for p in range(pieces):
                scaled(a[p * rows:(p + 1) * rows], sa, False, out[p * rows:(p + 1) * rows])
        return run

    def quantize_x():
        per_tensor_cast(torch, xs[nxt()], fp8)

    def quantize_w():
        per_tensor_cast(torch, w.t(), fp8)[0].contiguous()

    def quant_gemm():
        a, sa = per_tensor_cast(torch, xs[nxt()], fp8)
        bq, sbq = per_tensor_cast(torch, w.t(), fp8)
        torch._scaled_mm(a, bq.contiguous().t(), scale_a=sa, scale_b=sbq, out_dtype=torch.bfloat16)

    fns = [bf16, fp8_whole(False), fp8_whole(True), quantize_x, quantize_w, quant_gemm]
    fns += [fp8_chunks(tp * c) for c in counts]
    med = time_rounds(torch, fns, args.warmup, args.iters)
    flop = 2.0 * m * n * k
    rows = []
    for i, c in enumerate(counts):
        chunks_ms = med[6 + i]
        rows.append({"case": name, "collective": coll, "tp": tp, "chunks": tp * c, "m": m, "n": n,
                     "k": k, "chunk_rows": m // (tp * c), "bf16_ms": med[0], "fp8_ms": med[1],
                     "fp8_fast_ms": med[2], "fp8_chunks_ms": chunks_ms, "quantize_x_ms": med[3],
                     "quantize_w_ms": med[4], "quant_gemm_ms": med[5],
                     "bf16_tflops": flop / med[0] / 1e9, "fp8_tflops": flop / med[1] / 1e9,
                     "fp8_speedup": med[0] / med[1], "chunks_ratio": chunks_ms / med[1]})
        print(f"{name:<10} {coll:<14} tp {tp} {tp * c:>3} chunks: bf16 {med[0]:.3f} ms, fp8 "
              f"{med[1]:.3f} ms (fast {med[2]:.3f}), {med[0] / med[1]:.2f}x; fp8 chunks "
              f"{chunks_ms:.3f} ms ({chunks_ms / med[1]:.3f}); quantize x {med[3]:.3f} w "
              f"{med[4]:.3f}, quantize + GEMM {med[5]:.3f} ms", flush=True)
    del xs, qx, w, b, out
    torch.cuda.empty_cache()
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    todo = problems(args)
    if args.dry_run:
        for name, coll, tp, m, n, k, counts in todo:
            chunks = ", ".join(f"{tp * c} x {m // (tp * c)} rows" for c in counts)
            print(f"{name:<10} {coll:<14} tp {tp}: {m} x {n} x {k} (x {m * k * 2} B bf16, "
                  f"{m * k} B e4m3); fp8 chunks: {chunks}")
        return 0
    import torch  # only here: --dry-run and --help need no torch

    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        print(f"torch {torch.__version__} has no float8_e4m3fn or _scaled_mm", file=sys.stderr)
        return 1
    rows_out = []
    for problem in todo:
        rows_out += measure(torch, args, *problem)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "torch_scaled_mm.csv")
    with open(path, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=COLUMNS)
        wr.writeheader()
        for r in rows_out:
            wr.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
