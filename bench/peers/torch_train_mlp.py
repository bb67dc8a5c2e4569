#!/usr/bin/env python3
"""PyTorch eager's forward and backward pass of cgemm-train's MLP block, the peer of
cgemm-train --timed_passes on one GPU (tp 1: the GEMM-time floor of a training step).

A benchmark harness, not part of cgemm. One process, one GPU, no communication. The block is
cgemm-train's (launcher/train/train_model.hpp):

    y = x + GELU(x W1 [+ b1]) W2 [+ b2],  loss = mean((y - target)^2)

x [B, S, H] with requires_grad (a layer inside a network computes dx, and so does cgemm-train:
the up projection's dgrad), W1 [H, F], W2 [F, H], GELU the exact (erf) one, biases with
--bias. One timed pass = forward, loss, backward (dx, dW1, dW2 and the biases' gradients);
no optimizer step (cgemm-train's timed passes have none either). The gradients are set to
None before each pass, as optimizer.zero_grad(set_to_none=True) does.

Method: CUDA events around each pass, --warmup untimed passes, then --iters timed ones; the
median is written. Each timed pass starts behind a GPU sleep of about 1 ms (torch.cuda._sleep),
as cgemm's Backend::time_ms queues one, so both time the GPU's work, not the host's first
launches. The weights' gradients come out transposed from F.linear(x, w.t()), which costs
autograd a copy per weight (under 1% here). Flops: 12 B S H F per pass (3 GEMMs of 2 B S H F per projection).

    python3 bench/peers/torch_train_mlp.py --out DIR [--cases demo,standard,llama70b] [--bias]
    python3 bench/peers/torch_train_mlp.py --dry-run     # the shapes only; needs no torch

Cases (the issue's, bf16): demo (B 2, S 2048, 768 -> 3072), standard (B 4, S 8192,
4096 -> 8192), llama70b (B 1, S 8192, 8192 -> 28672).
--graph: the same pass captured once with torch.cuda.graph (after warm-up passes on a side
stream) and replayed, into DIR/torch_train_mlp_graph.csv (the peer of cgemm-train --cuda_graph).
Output: DIR/torch_train_mlp.csv: case, batch, seq_len, hidden, ffn, bias, dtype, median_ms,
tokens_per_s, tflops, iters. Exit status: 0 ok, 2 bad options.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys

CASES = {
    "demo": (2, 2048, 768, 3072),
    "standard": (4, 8192, 4096, 8192),
    "llama70b": (1, 8192, 8192, 28672),
}
COLUMNS = ["case", "batch", "seq_len", "hidden", "ffn", "bias", "dtype", "median_ms",
           "tokens_per_s", "tflops", "iters"]


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", help="folder for torch_train_mlp.csv")
    p.add_argument("--cases", default="demo,standard,llama70b",
                   help="comma-separated: " + ", ".join(CASES))
    p.add_argument("--bias", action="store_true", help="with b1 and b2")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--warmup", type=int, default=5, help="untimed passes per case")
    p.add_argument("--iters", type=int, default=20, help="timed passes per case (median)")
    p.add_argument("--graph", action="store_true",
                   help="time the pass captured once with torch.cuda.graph and replayed (the "
                        "peer of cgemm-train --cuda_graph on); writes torch_train_mlp_graph.csv")
    p.add_argument("--profile", action="store_true",
                   help="also print, per case, the sum of one pass's kernel times "
                        "(torch.profiler, CUDA activity) beside its timed median: how much of "
                        "the pass is the GPU's work")
    p.add_argument("--dry-run", action="store_true", help="print the shapes; needs no torch")
    a = p.parse_args(argv)
    names = [c for c in a.cases.split(",") if c]
    bad = [c for c in names if c not in CASES]
    if bad or not names:
        p.error("unknown case(s) %s (known: %s)" % (",".join(bad), ", ".join(CASES)))
    if a.iters < 1 or a.warmup < 0:
        p.error("--iters must be >= 1 and --warmup >= 0")
    if not a.dry_run and not a.out:
        p.error("--out is required (or --dry-run)")
    a.names = names
    return a


def time_case(torch, batch, seq, hidden, ffn, bias, dtype, warmup, iters, graph=False,
              profile=False):
    import torch.nn.functional as F

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1234)
    x = torch.randn(batch, seq, hidden, device=dev, dtype=dtype, generator=g).requires_grad_()
    target = torch.randn(batch, seq, hidden, device=dev, dtype=dtype, generator=g)
    w1 = (torch.randn(hidden, ffn, device=dev, dtype=dtype, generator=g) / hidden ** 0.5)
    w2 = (torch.randn(ffn, hidden, device=dev, dtype=dtype, generator=g) / ffn ** 0.5)
    params = [w1.requires_grad_(), w2.requires_grad_()]
    b1 = b2 = None
    if bias:
        b1 = (0.1 * torch.randn(ffn, device=dev, dtype=dtype, generator=g)).requires_grad_()
        b2 = (0.1 * torch.randn(hidden, device=dev, dtype=dtype, generator=g)).requires_grad_()
        params += [b1, b2]

    def one_pass():
        for t in params + [x]:
            t.grad = None
        h = F.gelu(F.linear(x, w1.t(), b1))
        y = x + F.linear(h, w2.t(), b2)
        loss = F.mse_loss(y, target)
        loss.backward()

    run = one_pass
    if graph:
        # PyTorch's whole-network capture: warm-up passes on a side stream, the gradients set to
        # None once, then one pass captured (its gradients are the graph's static tensors);
        # each replay recomputes them in place.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(max(warmup, 3)):
                one_pass()
        torch.cuda.current_stream().wait_stream(side)
        for t in params + [x]:
            t.grad = None
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            h = F.gelu(F.linear(x, w1.t(), b1))
            y = x + F.linear(h, w2.t(), b2)
            F.mse_loss(y, target).backward()
        run = g.replay
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    sleep = getattr(torch.cuda, "_sleep", None)
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        if sleep is not None:
            sleep(2_000_000)  # about 1 ms, as cgemm's time_ms queues ahead of its start event
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    if profile:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize()
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        busy_ms = sum(e.time_range.elapsed_us() for e in kernels) / 1e3
        print("  profile: %d kernels and copies, %.4f ms of GPU work in one pass (median pass "
              "%.4f ms)" % (len(kernels), busy_ms, statistics.median(times)), flush=True)
    return statistics.median(times)


def main(argv):
    a = parse(argv)
    rows = []
    for name in a.names:
        batch, seq, hidden, ffn = CASES[name]
        rows.append({"case": name, "batch": batch, "seq_len": seq, "hidden": hidden, "ffn": ffn,
                     "bias": int(a.bias), "dtype": a.dtype})
    if a.dry_run:
        for r in rows:
            print("%(case)s: x [%(batch)d, %(seq_len)d, %(hidden)d], W1 [%(hidden)d, %(ffn)d], "
                  "W2 [%(ffn)d, %(hidden)d], bias %(bias)d, %(dtype)s" % r)
        return 0
    import torch

    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    torch.backends.cuda.matmul.allow_tf32 = False
    os.makedirs(a.out, exist_ok=True)
    # Written row by row, so a run cut short keeps the cases it finished.
    name = "torch_train_mlp_graph.csv" if a.graph else "torch_train_mlp.csv"
    with open(os.path.join(a.out, name), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        f.flush()
        for r in rows:
            ms = time_case(torch, r["batch"], r["seq_len"], r["hidden"], r["ffn"], a.bias, dtype,
                           a.warmup, a.iters, a.graph, a.profile)
            tokens = r["batch"] * r["seq_len"]
            r.update(median_ms="%.4f" % ms, tokens_per_s="%.0f" % (tokens / (ms * 1e-3)),
                     tflops="%.1f" % (12.0 * tokens * r["hidden"] * r["ffn"] / (ms * 1e-3) / 1e12),
                     iters=a.iters)
            print("%s: %.4f ms, %s tokens/s, %s TFLOP/s" % (r["case"], ms, r["tokens_per_s"],
                                                            r["tflops"]), flush=True)
            w.writerow(r)
            f.flush()
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
