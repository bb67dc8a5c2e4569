"""Trains a pre-norm transformer MLP block through cgemm's tensor-parallel Linear modules
(python/cgemm_torch.py) with torch.optim.AdamW, and checks its loss curve against the same block
in plain PyTorch with the global weights.

    mpirun -np 2 build-venv/bin/python examples/torch_mlp_train.py [--steps 50] [--device cuda]

The block, on this rank's sequence shard x [B, S/tp, H]:

    y = x + RowParallelLinear(gelu(ColumnParallelLinear(LayerNorm(x))))   -> [B, S/tp, H]
    loss = mean((y - target)^2) over every token of every rank

The column layer gathers the sequence inside its GEMM, the row layer reduce-scatters it; the
backward runs the seed's pairing. LayerNorm's scale and shift are replicated over the tp group,
so their gradients (each rank's tokens) are summed over the ranks (torch.distributed, gloo), as
Megatron does for its sequence-parallel norms; the loss is summed the same way for printing.
The reference runs the plain block (torch.nn.Linear with the same global weights, from the
same seeds) on the whole sequence on every rank. The run fails (exit 1) when a step's loss
differs by more than --tolerance (default 1e-5 float32, 1e-2 bfloat16, relative). With
--device cuda the ranks may share a GPU (the context is made with gpu_sharing).
"""

import argparse
import datetime
import os
import sys
import time

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--steps", type=int, default=50, help="AdamW steps (default 50)")
parser.add_argument("--batch", type=int, default=2, help="B (default 2)")
parser.add_argument("--seq", type=int, default=48, help="S, the global sequence (default 48)")
parser.add_argument("--hidden", type=int, default=64, help="H (default 64)")
parser.add_argument("--ffn", type=int, default=192, help="F (default 192)")
parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                    help="the parameters' and activations' dtype (default float32)")
parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                    help="cuda: cgemm's CUDA backend (ranks may share the GPU); cpu: its CPU "
                         "backend; auto (default): cuda where torch sees a GPU")
parser.add_argument("--lr", type=float, default=1e-3, help="AdamW's learning rate")
parser.add_argument("--tolerance", type=float, default=None,
                    help="largest relative difference of the loss (default 1e-5 for float32, "
                         "1e-2 for bfloat16)")
parser.add_argument("--seed", type=int, default=0, help="of the initial weights and the data")
args = parser.parse_args()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "python"))
import cgemm  # noqa: E402
import cgemm_torch as ct  # noqa: E402

if args.device == "auto":
    args.device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = getattr(torch, args.dtype)
tolerance = args.tolerance or (1e-5 if dtype == torch.float32 else 1e-2)
torch.backends.cuda.matmul.allow_tf32 = False  # the reference in true float32

ctx = cgemm.Context(backend="cuda" if args.device == "cuda" else "cpu",
                    gpu_sharing=args.device == "cuda")
tp, rank = ctx.tp, ctx.rank
device = ct.local_device() if args.device == "cuda" else torch.device("cpu")
if args.device == "cuda":
    torch.cuda.set_device(device)
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
# The ranks' common parent (mpirun's daemon) picks the port, below Linux's ephemeral range
# (32768 and up, where the system hands out ports to outgoing connections).
os.environ.setdefault("MASTER_PORT", str(20000 + os.getppid() % 12000))
dist.init_process_group("gloo", rank=rank, world_size=ctx.size,
                        timeout=datetime.timedelta(seconds=120))
B, S, H, F = args.batch, args.seq, args.hidden, args.ffn
if S % tp or F % tp:
    sys.exit(f"torch_mlp_train.py: error: --seq {S} and --ffn {F} must be divisible by tp {tp}")
s = S // tp


class Block(torch.nn.Module):
    def __init__(self, parallel):
        super().__init__()
        self.norm = torch.nn.LayerNorm(H, dtype=dtype, device=device)
        if parallel:
            self.up = ct.ColumnParallelLinear(ctx, H, F, dtype=dtype, seed=args.seed, name="up")
            self.down = ct.RowParallelLinear(ctx, F, H, dtype=dtype, seed=args.seed + 1,
                                             name="down")
        else:  # the plain block, with the same global weights
            self.up = torch.nn.Linear(H, F, dtype=dtype, device=device)
            self.down = torch.nn.Linear(F, H, dtype=dtype, device=device)
            for layer, seed, n_in, n_out in ((self.up, args.seed, H, F),
                                             (self.down, args.seed + 1, F, H)):
                w, b = ct.init_linear(seed, n_in, n_out)
                with torch.no_grad():
                    layer.weight.copy_(w)
                    layer.bias.copy_(b)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


tp_block, ref_block = Block(True), Block(False)
opt_tp = torch.optim.AdamW(tp_block.parameters(), lr=args.lr)
opt_ref = torch.optim.AdamW(ref_block.parameters(), lr=args.lr)
data = torch.Generator().manual_seed(args.seed + 100)
proj = torch.randn(H, H, generator=data) / H ** 0.5


def all_reduce_sum(t):
    host = t.detach().float().cpu()
    dist.all_reduce(host)
    return host.to(device=t.device, dtype=t.dtype)


if rank == 0:
    print(f"torch_mlp_train: tp {tp}, B {B}, S {S}, H {H}, F {F}, {args.dtype}, AdamW lr "
          f"{args.lr}, torch {torch.__version__}, cgemm's {ctx.backend} backend", flush=True)
worst, start = 0.0, time.time()
for step in range(args.steps):
    x_global = torch.randn(B, S, H, generator=data)
    target = torch.tanh(x_global @ proj)
    x_global, target = x_global.to(device, dtype), target.to(device, dtype)
    # The cgemm block on this rank's sequence shard; its loss share over every token.
    x, t = x_global[:, rank * s:(rank + 1) * s].contiguous(), target[:, rank * s:(rank + 1) * s]
    share = (tp_block(x).float() - t.float()).square().sum() / (B * S * H)
    opt_tp.zero_grad()
    share.backward()
    for p in tp_block.norm.parameters():  # replicated: every rank's tokens' gradient summed
        p.grad = all_reduce_sum(p.grad)
    opt_tp.step()
    loss_tp = all_reduce_sum(share.detach()).item()
    # The plain block on the whole sequence.
    loss_ref = (ref_block(x_global).float() - target.float()).square().mean()
    opt_ref.zero_grad()
    loss_ref.backward()
    opt_ref.step()
    diff = abs(loss_tp - loss_ref.item()) / abs(loss_ref.item())
    worst = max(worst, diff)
    if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
        print(f"step {step:4d}  loss cgemm {loss_tp:.6f}  plain PyTorch {loss_ref.item():.6f}  "
              f"relative difference {diff:.2e}", flush=True)
ok = worst <= tolerance
print(f"rank {rank}: {args.steps} steps in {time.time() - start:.1f} s; largest relative "
      f"difference of the loss {worst:.3e} (bound {tolerance}): {'PASSED' if ok else 'FAILED'}",
      flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
