#!/usr/bin/env python3
"""One screen from device-fp8.sh's files: the FP8 speed tables of issue 23 item 7.

    python3 scripts/fp8_summary.py DIR

DIR holds torch_scaled_mm.csv (bench/peers/torch_scaled_mm.py), bf16/cgemm_bench.csv and
fp8/cgemm_bench.csv (cgemm-bench at tp 1 without and with --scaling current),
parts/cgemm_parts_quantize.csv (cgemm-bench --parts quantize) and
parts_fp8/cgemm_parts_chunking.csv (cgemm-bench --parts chunking --scaling current). A file
that is missing leaves its columns empty ("-"). Prints Markdown and writes it to
DIR/fp8_summary.md:
  1. per case and collective, the GEMM alone: cgemm's FP8 GEMM against torch._scaled_mm on the
     same [M, K] x [K, N] (peer ms / cgemm ms: >= 0.98 is the goal), and against bf16;
  2. the whole call at tp 1 (execute_overlapped, quantization included) FP8 against bf16, with
     torch's quantize + _scaled_mm beside it;
  3. the quantize kernels against the copy of the same bytes, 64 MiB and up (>= 80% the goal);
  4. the FP8 chunking table of torch._scaled_mm (chunks against the whole FP8 GEMM);
  5. the FP8 chunking table of cgemm (its FP8 chunk GEMMs back to back against its whole FP8
     GEMM, per case, collective, tp and chunks) beside torch._scaled_mm's on the same chunks:
     both chunks / whole ratios, and cgemm chunks / torch chunks. cgemm's FP8 GEMMs use fast
     accumulation (the runtime's default), torch's fp8_ms and fp8_chunks_ms do not.
Exit status 0 (also with missing files), 2 on bad usage.
"""

from __future__ import annotations

import csv
import os
import sys


def read(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(row, key):
    try:
        return float(row[key])
    except (KeyError, TypeError, ValueError):
        return None


def f3(v, suffix=""):
    return "-" if v is None else f"{v:.3f}{suffix}"


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def by_case(rows):
    """cgemm-bench rows with the default knobs, by (case, collective)."""
    return {(r["case"], r["collective"]): r for r in rows if r.get("knobs") == "default"}


def summary(d):
    torch = read(os.path.join(d, "torch_scaled_mm.csv"))
    bf16 = by_case(read(os.path.join(d, "bf16", "cgemm_bench.csv")))
    fp8 = by_case(read(os.path.join(d, "fp8", "cgemm_bench.csv")))
    quant = read(os.path.join(d, "parts", "cgemm_parts_quantize.csv"))
    peer = {}
    for r in torch:
        if r["tp"] == "1" and r["chunks"] == "1":
            peer[(r["case"], r["collective"])] = r
    keys = list(fp8) or list(bf16)
    for k in peer:
        if k not in keys:
            keys.append(k)
    out = []
    quantization = next(iter(fp8.values()), {}).get("quantization", "-")
    out.append(f"### FP8 GEMM alone, tp 1 (cgemm: {quantization}; torch._scaled_mm e4m3 "
               "per-tensor, bf16 out)\n")
    out.append("| case | collective | m x n x k | cgemm FP8 ms | torch._scaled_mm ms | torch / cgemm "
               "(>= 0.98) | fast_accum torch ms | torch / cgemm (fast) | cgemm bf16 ms | "
               "cgemm bf16 / FP8 | torch bf16 / FP8 |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for k in keys:
        c, b, p = fp8.get(k, {}), bf16.get(k, {}), peer.get(k, {})
        mnk = " x ".join(c.get(x) or b.get(x) or p.get(x) or "?" for x in ("m", "n", "k"))
        g, pg, pf = num(c, "gemm_ms"), num(p, "fp8_ms"), num(p, "fp8_fast_ms")
        out.append(f"| {k[0]} | {k[1]} | {mnk} | {f3(g)} | {f3(pg)} | {f3(ratio(pg, g))} | "
                   f"{f3(pf)} | {f3(ratio(pf, g))} | {f3(num(b, 'gemm_ms'))} | "
                   f"{f3(ratio(num(b, 'gemm_ms'), g), 'x')} | "
                   f"{f3(ratio(num(p, 'bf16_ms'), pg), 'x')} |")
    out.append("\n### The whole call at tp 1, quantization included (execute_overlapped)\n")
    out.append("| case | collective | cgemm bf16 ms | cgemm FP8 ms | bf16 / FP8 | FP8 call - FP8 "
               "GEMM ms | torch quantize + _scaled_mm ms | torch quantize x, w ms |")
    out.append("|---|---|---|---|---|---|---|---|")
    for k in keys:
        c, b, p = fp8.get(k, {}), bf16.get(k, {}), peer.get(k, {})
        whole_b, whole_f = num(b, "overlapped_ms"), num(c, "overlapped_ms")
        g = num(c, "gemm_ms")
        extra = None if whole_f is None or g is None else whole_f - g
        qx, qw = num(p, "quantize_x_ms"), num(p, "quantize_w_ms")
        out.append(f"| {k[0]} | {k[1]} | {f3(whole_b)} | {f3(whole_f)} | "
                   f"{f3(ratio(whole_b, whole_f), 'x')} | {f3(extra)} | "
                   f"{f3(num(p, 'quant_gemm_ms'))} | {f3(qx)}, {f3(qw)} |")
    out.append("\n### Quantize kernels against a copy of the same bytes (cgemm-bench --parts "
               "quantize), 64 MiB and up (>= 80%)\n")
    out.append("| bf16 MiB | copy GB/s | amax GB/s | quantize GB/s | quantize % of copy | "
               "quantize_t GB/s | current scaling GB/s | current % of copy |")
    out.append("|---|---|---|---|---|---|---|---|")
    big = [r for r in quant if (num(r, "mib") or 0) >= 64] or quant[-3:]
    for r in big:
        out.append(f"| {r['mib']} | {r['copy_gb_s']} | {r['amax_gb_s']} | {r['quantize_gb_s']} | "
                   f"{r['quantize_of_copy']} | {r['quantize_t_gb_s']} | {r['current_gb_s']} | "
                   f"{r['current_of_copy']} |")
    if not quant:
        out.append("| - | - | - | - | - | - | - | - |")
    out.append("\n### torch._scaled_mm on the chunks (FP8 chunks ms / whole FP8 GEMM ms)\n")
    chunk_rows = [r for r in torch if r["chunks"] != "1"]
    if not chunk_rows:
        out.append("(no torch_scaled_mm.csv rows)")
    tps = sorted({int(r["tp"]) for r in chunk_rows})
    if tps:
        out.append("| case | collective | " + " | ".join(f"tp {t}" for t in tps) + " |")
        out.append("|---|---|" + "---|" * len(tps))
    for k in dict.fromkeys((r["case"], r["collective"]) for r in chunk_rows):
        cells = []
        for t in tps:
            rs = [r for r in chunk_rows if (r["case"], r["collective"]) == k and int(r["tp"]) == t]
            cells.append(", ".join(f"{r['chunks']}: {f3(num(r, 'chunks_ratio'))}" for r in rs)
                         or "-")
        out.append(f"| {k[0]} | {k[1]} | " + " | ".join(cells) + " |")
    out += fp8_chunking(d, torch)
    return "\n".join(out) + "\n"


def fp8_chunking(d, torch):
    """Section 5: cgemm's FP8 chunking rows beside torch._scaled_mm's on the same chunks."""
    parts = read(os.path.join(d, "parts_fp8", "cgemm_parts_chunking.csv"))
    rows = [r for r in parts if r.get("dtype", "bf16") != "bf16"]
    peer = {(r["case"], r["collective"], r["tp"], r["chunks"]): r for r in torch}
    dtype = rows[0]["dtype"] if rows else "e4m3 x e4m3"
    out = [f"\n### FP8 chunking ({dtype}): chunk GEMMs back to back / one whole GEMM, cgemm "
           "(--parts chunking --scaling current) beside torch._scaled_mm; both without fast "
           "accumulation (device-fp8.sh sets NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION=1 for "
           "this step, torch's default is use_fast_accum=False)\n"]
    out.append("| case | collective | tp | chunks | chunk GEMM | cgemm whole ms | cgemm chunks ms "
               "| cgemm chunks / whole | torch whole ms | torch chunks ms | torch chunks / whole "
               "| cgemm / torch chunks |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    if not rows:
        out.append("| - | - | - | - | - | - | - | - | - | - | - | - |")
    for r in rows:
        p = peer.get((r["case"], r["collective"], r["tp"], r["chunks"]), {})
        # cgemm-bench joined torch's figures when given --torch_chunks; else join them here.
        tw = num(r, "torch_whole_ms")
        tc = num(r, "torch_chunks_ms")
        if tw is None or tc is None:
            tw, tc = num(p, "fp8_ms"), num(p, "fp8_chunks_ms")
        cw, cc = num(r, "whole_ms"), num(r, "chunks_ms")
        out.append(f"| {r['case']} | {r['collective']} | {r['tp']} | {r['chunks']} | "
                   f"{r.get('chunk_gemm', '-')} | {f3(cw)} | {f3(cc)} | {f3(ratio(cc, cw))} | "
                   f"{f3(tw)} | {f3(tc)} | {f3(ratio(tc, tw))} | {f3(ratio(cc, tc))} |")
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    text = summary(argv[0])
    with open(os.path.join(argv[0], "fp8_summary.md"), "w") as f:
        f.write(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
