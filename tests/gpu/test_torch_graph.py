"""cgemm's PyTorch modules inside torch.cuda.graph, under mpirun on the GPU machine (ranks share
the GPU where there are fewer GPUs than ranks):

    mpirun -np N python3 tests/gpu/test_torch_graph.py [--seed S]

A ColumnParallelLinear -> GELU -> RowParallelLinear block, forward and backward, captured once
with torch.cuda.graph (after warm-up passes on a side stream, as PyTorch's whole-network capture
recipe does) and replayed 7 times on new inputs copied into the static input: each replay's
output, input gradient and weight and bias gradients equal an eager pass's on the same inputs
byte for byte. Prints one PASS line per rank; exit 1 on a mismatch. Skips (exit 0, saying so)
without a GPU.
"""

import argparse
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--seed", type=int, default=5)
args = parser.parse_args()
if not torch.cuda.is_available():
    print("SKIP: no GPU")
    sys.exit(0)

import cgemm  # noqa: E402
import cgemm_torch as ct  # noqa: E402

world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))
ctx = cgemm.Context(backend="cuda", gpu_sharing=world > torch.cuda.device_count())
torch.cuda.set_device(ct.local_device())
tp, dtype = ctx.tp, torch.bfloat16
B, S, H, F = 2, 64 * tp, 128, 256


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = ct.ColumnParallelLinear(ctx, H, F, dtype=dtype, seed=1, name="g_up",
                                          device="cuda")
        self.down = ct.RowParallelLinear(ctx, F, H, dtype=dtype, seed=2, name="g_down",
                                         device="cuda")

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))


block = Block()
params = list(block.parameters())


def inputs(i):
    g = torch.Generator(device="cuda").manual_seed(args.seed * 1000 + i * 10 + ctx.rank)
    return torch.randn(B, S // tp, H, generator=g, device="cuda", dtype=dtype)


def eager(x_value):
    x = x_value.clone().requires_grad_()
    for p in params:
        p.grad = None
    y = block(x)
    y.float().pow(2).mean().backward()
    torch.cuda.synchronize()
    return [y.detach().clone(), x.grad.clone()] + [p.grad.clone() for p in params]


static_x = inputs(0).requires_grad_()
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        for p in params:
            p.grad = None
        static_x.grad = None
        block(static_x).float().pow(2).mean().backward()
torch.cuda.current_stream().wait_stream(side)
for p in params:
    p.grad = None
static_x.grad = None
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    static_y = block(static_x)
    static_y.float().pow(2).mean().backward()

bad = []
for i in range(1, 8):
    x_value = inputs(i)
    want = eager(x_value)
    with torch.no_grad():
        static_x.copy_(x_value)
    graph.replay()
    torch.cuda.synchronize()
    got = [static_y, static_x.grad] + [p.grad for p in params]
    names = ["y", "dx"] + [n for n, _ in block.named_parameters()]
    for name, a, b in zip(names, got, want):
        if not torch.equal(a, b):
            bad.append(f"replay {i}: {name} differs (max |diff| "
                       f"{(a.float() - b.float()).abs().max().item():.3g})")
if bad:
    print(f"FAIL rank {ctx.rank}: " + "; ".join(bad[:6]))
    sys.exit(1)
print(f"PASS rank {ctx.rank}: tp {tp}, 7 replays of the captured block equal eager passes byte "
      f"for byte (y, dx and {len(params)} parameter gradients)")
