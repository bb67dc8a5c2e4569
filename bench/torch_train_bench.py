"""A transformer MLP block's training step through cgemm's tensor-parallel Linear modules
(python/cgemm_torch.py) against the same block in plain PyTorch eager, at tp 1 on one GPU, and
the host time of one op call.

    python3 bench/torch_train_bench.py [--batch 4 --seq 8192 --hidden 4096 --ffn 8192]

The step: LayerNorm, up (hidden -> ffn), GELU, down (ffn -> hidden), residual, a squared loss,
backward (every weight's and bias's gradient), bf16. CUDA events on torch's current stream
around --iters steps, after --warmup steps; the median of --reps such timings, the two blocks'
timings taking turns (rotated), so neither always runs first on a GPU whose clocks drift. Both
blocks hold the same global weights (cgemm_torch.init_linear).

Host time of one op call: time.perf_counter around --calls calls of cgemm_torch.gemm on a tiny
plan (the GPU idle), per call, median of 5, against Plan.execute_pointers on the same buffers.
"""

import argparse
import os
import statistics
import sys
import time

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "python"))
import cgemm  # noqa: E402
import cgemm_torch as ct  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--batch", type=int, default=4)
parser.add_argument("--seq", type=int, default=8192)
parser.add_argument("--hidden", type=int, default=4096)
parser.add_argument("--ffn", type=int, default=8192)
parser.add_argument("--warmup", type=int, default=3)
parser.add_argument("--iters", type=int, default=10)
parser.add_argument("--reps", type=int, default=7)
parser.add_argument("--calls", type=int, default=200)
parser.add_argument("--profile", action="store_true",
                    help="also print each block's kernels (torch.profiler, one step) by GPU time")
args = parser.parse_args()

ctx = cgemm.Context(backend="cuda")
device = ct.local_device()
torch.cuda.set_device(device)
B, S, H, F, dtype = args.batch, args.seq, args.hidden, args.ffn, torch.bfloat16


class Block(torch.nn.Module):
    def __init__(self, cgemm_layers):
        super().__init__()
        self.norm = torch.nn.LayerNorm(H, dtype=dtype, device=device)
        if cgemm_layers:
            self.up = ct.ColumnParallelLinear(ctx, H, F, dtype=dtype, seed=1, name="up")
            self.down = ct.RowParallelLinear(ctx, F, H, dtype=dtype, seed=2, name="down")
        else:
            self.up = torch.nn.Linear(H, F, dtype=dtype, device=device)
            self.down = torch.nn.Linear(F, H, dtype=dtype, device=device)
            for layer, seed, n_in, n_out in ((self.up, 1, H, F), (self.down, 2, F, H)):
                w, b = ct.init_linear(seed, n_in, n_out)
                with torch.no_grad():
                    layer.weight.copy_(w)
                    layer.bias.copy_(b)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


blocks = {"cgemm": Block(True), "torch": Block(False)}
x = torch.randn(B, S, H, device=device, dtype=dtype)


def step(block):
    for p in block.parameters():
        p.grad = None
    y = block(x)
    y.float().square().mean().backward()


def time_steps(block):
    for _ in range(args.warmup):
        step(block)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(args.iters):
        step(block)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / args.iters


# The same gradients (a check that both run the same math), then the timings.
grads = {}
for name, block in blocks.items():
    step(block)
    grads[name] = block.up.weight.grad.float().clone()
diff = ((grads["cgemm"] - grads["torch"]).abs().max() / grads["torch"].abs().max()).item()
samples = {name: [] for name in blocks}
names = list(blocks)
for rep in range(args.reps):
    for k in range(len(names)):
        name = names[(k + rep) % len(names)]
        samples[name].append(time_steps(blocks[name]))
t = {name: statistics.median(v) for name, v in samples.items()}
print(f"torch_train_bench: torch {torch.__version__}, {torch.cuda.get_device_name(device)}, "
      f"tp 1, bf16, B {B}, S {S}, {H} -> {F} -> {H}")
print(f"  training step (forward + backward), median of {args.reps} x {args.iters} steps: "
      f"plain PyTorch {t['torch']:.3f} ms, cgemm modules {t['cgemm']:.3f} ms, "
      f"ratio {t['torch'] / t['cgemm']:.3f}x (up.weight.grad max relative difference "
      f"{diff:.2e})")

if args.profile:
    for name, block in blocks.items():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            step(block)
            torch.cuda.synchronize()
        print(f"  {name}: one step's kernels by GPU time")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12))

# Host time per op call on a tiny plan.
plan = ctx.plan(lhs_shape=(1, 8, 16), rhs_shape=(16, 16), dtype="bfloat16", name="tiny")
a = torch.randn(1, 8, 16, device=device, dtype=dtype)
w = torch.randn(16, 16, device=device, dtype=dtype)
out = torch.empty(1, 8, 16, device=device, dtype=dtype)
stream = torch.cuda.current_stream(device).cuda_stream


def per_call(fn):
    times = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.calls):
            fn()
        times.append((time.perf_counter() - t0) / args.calls)
        torch.cuda.synchronize()
    return statistics.median(times) * 1e6


with torch.no_grad():
    t_op = per_call(lambda: ct.gemm(plan, a, w))
t_raw = per_call(lambda: plan.execute_pointers(a.data_ptr(), w.data_ptr(), None, out.data_ptr(),
                                               stream))
print(f"  host time per call (tiny plan, median of 5 x {args.calls}): cgemm_torch.gemm "
      f"{t_op:.1f} us, Plan.execute_pointers {t_raw:.1f} us")
