"""cgemm from Python: a tensor-sequence-parallel MLP block's two GEMMs on numpy buffers.

Run from the repository root after a build (python3-numpy installed; the CPU backend):
    mpirun -np 2 python3 examples/python_gemm.py
The module is python/cgemm.py (ctypes over libcgemm.so's C API, cgemm/cgemm.h); it loads
$CGEMM_LIBRARY, else build/lib/libcgemm.so.0, else the installed libcgemm.so.0.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import cgemm  # noqa: E402

# The mesh: tp = world size (MPI_COMM_WORLD; MPI is initialized by the module and
# finalized at exit).
ctx = cgemm.Context(dp=1, backend="cpu")
batch, seq, hidden, ffn = 2, 16 * ctx.tp, 64, 128

# up: x [B, S, H] sequence-sharded, all-gathered while w_up's column shards multiply it.
up = ctx.plan(lhs_shape=(batch, seq, hidden), rhs_shape=(hidden, ffn), bias_shape=(ffn,),
              dtype="float32", collective="all_gather", name="up",
              lhs_spec="('dp', 'tpsp', None)", rhs_spec="(None, 'tpsp')", bias_spec="('tpsp',)")
# down: h [B, S, F] hidden-sharded; the partial products reduce-scattered back over S.
down = ctx.plan(lhs_shape=(batch, seq, ffn), rhs_shape=(ffn, hidden), dtype="float32",
                collective="reduce_scatter", name="down",
                lhs_spec="('dp', None, 'tpsp')", rhs_spec="('tpsp', None)")

# The same global tensors on every rank (one seed), each rank taking its shards.
rng = np.random.default_rng(2026)
x_g = rng.standard_normal((batch, seq, hidden)).astype(np.float32)
w_up_g = (rng.standard_normal((hidden, ffn)) / np.sqrt(hidden)).astype(np.float32)
b_up_g = rng.standard_normal(ffn).astype(np.float32)
w_down_g = (rng.standard_normal((ffn, hidden)) / np.sqrt(ffn)).astype(np.float32)

h = up.out.empty()
up.execute(np.ascontiguousarray(x_g[up.lhs.slices]), np.ascontiguousarray(w_up_g[up.rhs.slices]),
           np.ascontiguousarray(b_up_g[up.bias.slices]), h)
np.maximum(h, 0, out=h)  # ReLU on this rank's columns: no communication
y = down.out.empty()
down.execute(h, np.ascontiguousarray(w_down_g[down.rhs.slices]), None, y)

# Check this rank's shard of y against numpy on the whole block, in float64.
ref = np.maximum(x_g.astype(np.float64) @ w_up_g + b_up_g, 0) @ w_down_g.astype(np.float64)
err = np.max(np.abs(y - ref[down.out.slices]))
print(f"rank {ctx.rank}/{ctx.size}: x shard {up.lhs.local_shape} -> h {up.out.local_shape} "
      f"-> y {down.out.local_shape} (offset {down.out.offset}), max |y - numpy| = {err:.2e}",
      flush=True)
up.close()
down.close()
ctx.close()
sys.exit(0 if err < 1e-3 else 1)
