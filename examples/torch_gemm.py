"""cgemm in PyTorch: a tensor-sequence-parallel MLP block's two GEMMs as torch.ops.cgemm.gemm.

Run from the repository root after a build, on a machine with a GPU and PyTorch 2.4+ (CUDA):
    mpirun -np 2 python3 examples/torch_gemm.py
The ranks may share a GPU (two ranks on a one-GPU machine): the context is made with
gpu_sharing=True, which only matters where they do (copy engines instead of NCCL; times are
then not a speed measurement). Without torch or a GPU it prints why and exits 0.
The op is python/cgemm_torch.py over python/cgemm.py (ctypes over libcgemm.so's C API); the
library is $CGEMM_LIBRARY, else build/lib/libcgemm.so.0, else the installed libcgemm.so.0 (a
CPU-only build has no CUDA backend: the context is then refused with a message saying so).
"""

import os
import sys

try:
    import torch
except ImportError:
    print("torch_gemm.py: skipped: PyTorch is not installed (pip install torch)")
    sys.exit(0)
if not torch.cuda.is_available():
    print("torch_gemm.py: skipped: no GPU (torch.cuda.is_available() is False); "
          "examples/python_gemm.py runs the same block on the CPU backend")
    sys.exit(0)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import cgemm  # noqa: E402
import cgemm_torch  # noqa: E402

# This rank's GPU as cgemm's backend rule picks it (local rank modulo the visible GPUs); torch
# allocates there and runs the op on its current stream there.
device = cgemm_torch.local_device()
torch.cuda.set_device(device)
ctx = cgemm.Context(dp=1, backend="cuda", gpu_sharing=True)
batch, seq, hidden, ffn = 2, 16 * ctx.tp, 256, 512

# up: x [B, S, H] sequence-sharded, all-gathered while w_up's column shards multiply it.
up = ctx.plan(lhs_shape=(batch, seq, hidden), rhs_shape=(hidden, ffn), bias_shape=(ffn,),
              dtype="bfloat16", collective="all_gather", name="up",
              lhs_spec="('dp', 'tpsp', None)", rhs_spec="(None, 'tpsp')", bias_spec="('tpsp',)")
# down: h [B, S, F] hidden-sharded; the partial products reduce-scattered back over S.
down = ctx.plan(lhs_shape=(batch, seq, ffn), rhs_shape=(ffn, hidden), dtype="bfloat16",
                collective="reduce_scatter", name="down",
                lhs_spec="('dp', None, 'tpsp')", rhs_spec="('tpsp', None)")

# The same global tensors on every rank (one seed, on the CPU), each rank taking its shards.
gen = torch.Generator().manual_seed(2026)
x_g = torch.randn(batch, seq, hidden, generator=gen).bfloat16()
w_up_g = (torch.randn(hidden, ffn, generator=gen) / hidden ** 0.5).bfloat16()
b_up_g = torch.randn(ffn, generator=gen).bfloat16()
w_down_g = (torch.randn(ffn, hidden, generator=gen) / ffn ** 0.5).bfloat16()


def shard(t, info):
    return t[info.slices].contiguous().to(device)


# Ordinary torch code around the op, all on torch's current stream: no synchronize between.
h = cgemm_torch.gemm(up, shard(x_g, up.lhs), shard(w_up_g, up.rhs), shard(b_up_g, up.bias))
h = torch.relu(h)  # this rank's columns of h: no communication
y = cgemm_torch.gemm(down, h, shard(w_down_g, down.rhs))

# This rank's shard of y against torch on the whole block, in float64 (h rounded to bf16 as the
# op's output is).
h_ref = torch.relu(x_g.double() @ w_up_g.double() + b_up_g.double()).bfloat16().double()
ref = (h_ref @ w_down_g.double())[down.out.slices]
err = ((y.double().cpu() - ref).abs().max() / ref.abs().max()).item()
print(f"rank {ctx.rank}/{ctx.size} on {device}: x shard {up.lhs.local_shape} -> h "
      f"{up.out.local_shape} -> y {down.out.local_shape} (offset {down.out.offset}), "
      f"max |y - torch| / max |torch| = {err:.2e}", flush=True)
cgemm_torch.unregister(up)
cgemm_torch.unregister(down)
up.close()
down.close()
ctx.close()
# bf16 output: a few units of 2^-8 relative, from the rounding of h, y and the partial sums.
sys.exit(0 if err < 3e-2 else 1)
