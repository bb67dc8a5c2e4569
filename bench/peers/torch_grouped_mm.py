#!/usr/bin/env python3
"""torch._grouped_mm and a loop of torch.mm on issue 25's MoE cases (peer for cgemm-bench --parts grouped).

A benchmark harness, not part of cgemm. One process, one GPU. For each of the five cases of
issue 25 item 5 (tokens x G x K x N, bf16; uniform or skewed group sizes) it times
torch._grouped_mm (one call) and a loop of torch.mm (one per non-empty group) on the same
sizes, as cgemm-bench --parts grouped times cgemm's loop and cuBLAS grouped paths.

    python3 bench/peers/torch_grouped_mm.py --out DIR [--divide D] [--warmup 5] [--iters 20]
    python3 bench/peers/torch_grouped_mm.py --dry-run        # cases and sizes; needs no torch

Operands (as cgemm's study, launcher/bench/parts/grouped.cpp): x [tokens, K] row-major; the weights
stored [G, N, K] (gemm.py's default "T" layout) and handed to torch as mat_b = w.transpose(1, 2),
the [G, K, N] view whose K is contiguous (the layout torch's SM90 grouped kernel takes); should
torch refuse it, a contiguous [G, K, N] copy is tried and the layout used is in the CSV. offs is
the int32 cumulative row ends on the device (empty groups repeat an end). The loop multiplies
x[rows of g] by mat_b[g] into out[rows of g] (out=), skipping empty groups.

Group sizes: the rule of launcher/bench/parts/grouped_sizes.hpp, line for line (integer arithmetic):
  uniform: tokens // G each, plus one for the first tokens % G groups.
  skewed, E = 8 empty: group g is empty when g % (G // E) == G // E - 1; the A = G - E others, in
  index order, take Zipf ranks r = 0..A-1 with weights w_r = 2**20 // (r + 1), W = sum w_r;
  rank r gets 1 + (tokens - A) * w_r // W rows and the rows left over go one each to ranks
  0, 1, ...  The sizes are printed, so they can be compared with cgemm-bench's log.

Method: CUDA events, --warmup untimed rounds, then --iters rounds, each timing both calls once
(interleaved) after a short GPU sleep so the host has enqueued the work first; medians written.
x rotates over enough copies to exceed twice the L2. TFLOP/s count the real work,
2 * tokens * K * N. A call that fails (an older torch without _grouped_mm, a layout it refuses)
is reported on stdout and its columns left empty; the run goes on.

Output: DIR/torch_grouped_mm.csv with case, sizes, tokens, groups, k, n, min_rows, max_rows,
empty, grouped_mm_ms, grouped_mm_tflops, loop_ms, loop_tflops, b_layout, note.
Exit status: 0 ok, 2 bad options.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import sys

# Issue 25 item 5: (tokens, G, K, N, skewed).
CASES = [
    (32768, 8, 4096, 14336, False),
    (65536, 64, 4096, 2048, False),
    (65536, 64, 4096, 2048, True),
    (16384, 64, 2048, 1408, False),
    (16384, 64, 2048, 1408, True),
]
EMPTY = 8
COLUMNS = ["case", "sizes", "tokens", "groups", "k", "n", "min_rows", "max_rows", "empty",
           "grouped_mm_ms", "grouped_mm_tflops", "loop_ms", "loop_tflops", "b_layout", "note"]


def group_sizes(tokens: int, groups: int, skewed: bool, empty: int = EMPTY) -> list[int]:
    """launcher/bench/parts/grouped_sizes.hpp's moe_group_sizes."""
    if not skewed:
        return [tokens // groups + (1 if g < tokens % groups else 0) for g in range(groups)]
    if empty < 0 or empty >= groups or (empty > 0 and groups % empty != 0):
        raise ValueError("the empty groups must be fewer than G and divide it")
    stride = groups // empty if empty > 0 else groups + 1
    active = groups - empty
    if tokens < active:
        raise ValueError("fewer tokens than non-empty groups")
    weight = [(1 << 20) // (r + 1) for r in range(active)]
    total = sum(weight)
    rows = [1 + (tokens - active) * w // total for w in weight]
    left = tokens - sum(rows)
    assert 0 <= left < active
    for r in range(left):
        rows[r] += 1
    out, r = [], 0
    for g in range(groups):
        if g % stride == stride - 1:
            out.append(0)
        else:
            out.append(rows[r])
            r += 1
    return out


def skew_text(skewed: bool) -> str:
    return f"skewed, {EMPTY} empty" if skewed else "uniform"


def cases(divide: int):
    """(name, sizes text, tokens, G, K, N, skewed, sizes): the five cases, divided as
    cgemm-bench --parts_grouped_divide divides them."""
    out = []
    for tokens, g, k, n, skewed in CASES:
        t = max(tokens // divide, g)
        k, n = max(k // divide, 1), max(n // divide, 1)
        out.append((f"{t}x{g}x{k}x{n}", skew_text(skewed), t, g, k, n, skewed,
                    group_sizes(t, g, skewed)))
    return out


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--out", help="folder for torch_grouped_mm.csv (required unless --dry-run)")
    ap.add_argument("--divide", type=int, default=1,
                    help="divide tokens, K and N by this (cgemm-bench --parts_grouped_divide)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed rounds")
    ap.add_argument("--iters", type=int, default=20, help="timed rounds (median reported)")
    ap.add_argument("--l2-mib", type=float, default=60, help="L2 size; x rotates past twice it")
    ap.add_argument("--dry-run", action="store_true", help="print the cases and sizes and exit")
    args = ap.parse_args(argv)
    if args.divide < 1 or args.warmup < 0 or args.iters < 1 or not args.l2_mib > 0:
        ap.error("--divide >= 1, --warmup >= 0, --iters >= 1, --l2-mib > 0")
    if not args.dry_run and not args.out:
        ap.error("--out DIR is required (except with --dry-run)")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    todo = cases(args.divide)
    for name, skew, t, g, k, n, _, sizes in todo:
        print(f"{name} {skew}: sizes {','.join(map(str, sizes))}", flush=True)
    if args.dry_run:
        return 0
    import torch  # only here: --dry-run and --help need no torch

    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{torch.cuda.get_device_name()}", flush=True)
    dev = torch.device("cuda")
    sleep = getattr(torch.cuda, "_sleep", None)
    grouped_mm = getattr(torch, "_grouped_mm", None)
    rows_out = []
    for name, skew, t, g, k, n, skewed, sizes in todo:
        gen = torch.Generator(device=dev)
        gen.manual_seed(1234)
        x_bytes = t * k * 2
        sets = max(2, math.ceil(2 * args.l2_mib * (1 << 20) / x_bytes))
        xs = [torch.randn((t, k), device=dev, dtype=torch.bfloat16, generator=gen)
              for _ in range(sets)]
        w = torch.randn((g, n, k), device=dev, dtype=torch.bfloat16, generator=gen).mul_(0.02)
        mat_b = w.transpose(1, 2)  # [G, K, N], K contiguous
        offs = torch.tensor(sizes, device=dev, dtype=torch.int32).cumsum(0).to(torch.int32)
        out_loop = torch.empty((t, n), device=dev, dtype=torch.bfloat16)
        starts = [sum(sizes[:i]) for i in range(g)]
        turn = [0]

        def next_x():
            turn[0] += 1
            return xs[turn[0] % sets]

        def loop():
            x = next_x()
            for i in range(g):
                s, e = starts[i], starts[i] + sizes[i]
                if e > s:
                    torch.mm(x[s:e], mat_b[i], out=out_loop[s:e])

        note, layout = [], "[G,N,K]^T"
        b_used = None
        fns = [loop]
        if grouped_mm is None:
            note.append("torch has no _grouped_mm")
        else:
            ref = None
            for attempt in (mat_b, None):
                b_used = attempt
                if attempt is None:
                    b_used, layout = mat_b.contiguous(), "[G,K,N]"
                try:
                    ref = grouped_mm(xs[0], b_used, offs=offs)
                    torch.cuda.synchronize()
                    break
                except Exception as e:  # report and go on: the loop still runs
                    msg = f"torch._grouped_mm(x, mat_b {layout}, offs=...) failed: {e}"
                    print(msg.splitlines()[0], flush=True)
                    note.append(msg.splitlines()[0].replace(",", ";"))
                    ref = None
            if ref is not None:
                # The two torch results agree (a check of the call, not a benchmark).
                turn[0] = -1
                loop()
                torch.cuda.synchronize()
                diff = (ref.float() - out_loop.float()).abs().max().item()
                scale = out_loop.float().abs().max().item() or 1.0
                note.append(f"max rel diff grouped_mm vs loop {diff / scale:.2e}")
                del ref

                def grouped():
                    grouped_mm(next_x(), b_used, offs=offs)
                fns.append(grouped)
        failed = set()  # a call that raised while timed is reported and dropped

        def call(i, f):
            if i in failed:
                return False
            try:
                f()
                return True
            except Exception as e:
                failed.add(i)
                msg = f"{'torch._grouped_mm' if i else 'the loop'} failed while timed: {e}"
                print(msg.splitlines()[0], flush=True)
                note.append(msg.splitlines()[0].replace(",", ";"))
                return False

        for _ in range(args.warmup):
            for i, f in enumerate(fns):
                call(i, f)
        times = [[] for _ in fns]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(args.iters):
            for i, f in enumerate(fns):
                if i in failed:
                    continue
                torch.cuda.synchronize()
                if sleep is not None:
                    sleep(1_000_000)
                start.record()
                ok = call(i, f)
                end.record()
                end.synchronize()
                if ok:
                    times[i].append(start.elapsed_time(end))
        med = [statistics.median(v) if v else None for v in times]
        if len(med) > 1 and med[1] is None:
            med.pop()
        flops = 2.0 * t * k * n
        tf = [flops / (m * 1e-3) / 1e12 if m else None for m in med]
        nonempty = [s for s in sizes if s > 0]
        row = {"case": name, "sizes": skew, "tokens": t, "groups": g, "k": k, "n": n,
               "min_rows": min(nonempty), "max_rows": max(nonempty),
               "empty": sizes.count(0), "grouped_mm_ms": med[1] if len(med) > 1 else "",
               "grouped_mm_tflops": tf[1] if len(tf) > 1 else "",
               "loop_ms": med[0] if med[0] is not None else "",
               "loop_tflops": tf[0] if tf[0] is not None else "",
               "b_layout": layout if len(med) > 1 else "",
               "note": "; ".join(note)}
        rows_out.append(row)
        gm = f"{med[1]:.3f} ms ({tf[1]:.0f} TFLOP/s)" if len(med) > 1 else "failed"
        lp = f"{med[0]:.3f} ms ({tf[0]:.0f} TFLOP/s)" if med[0] is not None else "failed"
        print(f"{name} {skew}: torch._grouped_mm {gm}, loop of torch.mm {lp}; {row['note']}",
              flush=True)
        del xs, w, mat_b, out_loop, fns
        b_used = None
        torch.cuda.empty_cache()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "torch_grouped_mm.csv")
    with open(path, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=COLUMNS)
        wr.writeheader()
        for r in rows_out:
            wr.writerow({c: (f"{v:.6g}" if isinstance(v, float) else v) for c, v in r.items()})
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
