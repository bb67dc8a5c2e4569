"""FSDP through the Python module (python/cgemm.py over libcgemm.so's cgemm_context_options.fsdp)
on the CPU backend, under mpirun: Context(fsdp=F) on a dp x fsdp x tp mesh; the tensor-sequence-
parallel layouts with the weight sharded over 'fsdp' where gemm.py gathers it (docs/FSDP.md).

Every rank draws the same global operands (fresh normals from --seed), takes its shards by the
plan's offsets (the weight's shard: plan.rhs), executes into a NaN-poisoned output and compares
its shard with a float64 numpy reference of the whole GEMM. Then the context's attributes, and
the refusals: a negative fsdp, an fsdp axis named like the dp axis. Prints PASS on rank 0.

Run: mpirun -np 4 python3 tests/mpi/test_python_fsdp.py --seed 123 --fsdp 2 [--dp 1]
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import cgemm  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--dp", type=int, default=1)
parser.add_argument("--fsdp", type=int, required=True)
args = parser.parse_args()

ctx = cgemm.Context(dp=args.dp, fsdp=args.fsdp, backend="cpu")
failures = []
if (ctx.fsdp, ctx.dp * ctx.fsdp * ctx.tp) != (args.fsdp, ctx.size):
    failures.append(f"rank {ctx.rank}: mesh dp {ctx.dp} x fsdp {ctx.fsdp} x tp {ctx.tp}")
if ctx.rank != (ctx.dp_rank * ctx.fsdp + ctx.fsdp_rank) * ctx.tp + ctx.tp_rank:
    failures.append(f"rank {ctx.rank}: coordinates dp {ctx.dp_rank} fsdp {ctx.fsdp_rank} "
                    f"tp {ctx.tp_rank}")

# The batch over ('dp', 'fsdp') ('fsdp' alone at dp 1); the weights as tensor_sequence_parallel_gemm
# writes them on an fsdp mesh.
data = "'fsdp'" if ctx.dp == 1 else "('dp', 'fsdp')"
cases = [("all_gather", f"({data}, 'tpsp', None)",
          "('fsdp', 'tpsp')" if ctx.tp > 1 else "(None, 'fsdp')",
          "('tpsp',)" if ctx.tp > 1 else "(None,)")]
if ctx.dp == 1:  # gemm.py keeps a row-parallel weight sharded when the batch is a tuple
    cases.append(("reduce_scatter", f"({data}, None, 'tpsp')", "('tpsp', 'fsdp')", "(None,)"))

rng = np.random.default_rng(args.seed)
for collective, x_spec, w_spec, b_spec in cases:
    batch, seq, k, n = 2 * ctx.dp * ctx.fsdp, 4 * ctx.tp, 16, 6 * ctx.fsdp * ctx.tp
    with ctx.plan(lhs_shape=(batch, seq, k), rhs_shape=(k, n), bias_shape=(n,), dtype="float32",
                  lhs_spec=x_spec, rhs_spec=w_spec, bias_spec=b_spec, collective=collective,
                  name=collective) as plan:
        if plan.rhs.local_shape[0] * plan.rhs.local_shape[1] * ctx.fsdp * ctx.tp != k * n:
            failures.append(f"rank {ctx.rank}: {collective}: weight shard {plan.rhs.local_shape} "
                            f"is not 1/(fsdp tp) of [{k}, {n}]")
        xg = rng.standard_normal((batch, seq, k)).astype(np.float32)
        wg = rng.standard_normal((k, n)).astype(np.float32)
        bg = rng.standard_normal((n,)).astype(np.float32)
        ref = np.einsum("bsk,kn->bsn", xg.astype(np.float64), wg.astype(np.float64)) + bg
        scale = np.einsum("bsk,kn->bsn", np.abs(xg.astype(np.float64)),
                          np.abs(wg.astype(np.float64))) + np.abs(bg)
        y = plan.out.empty()
        y.fill(np.nan)
        plan.execute(np.ascontiguousarray(xg[plan.lhs.slices]),
                     np.ascontiguousarray(wg[plan.rhs.slices]),
                     np.ascontiguousarray(bg[plan.bias.slices]), y)
        err = np.abs(y.astype(np.float64) - ref[plan.out.slices])
        bound = (ctx.tp + 2) * float(np.finfo(np.float32).eps) * scale[plan.out.slices]
        if not np.all(err <= bound):
            failures.append(f"rank {ctx.rank}: {collective}: {np.count_nonzero(~(err <= bound))} "
                            f"of {err.size} elements off")

for kwargs, words in (({"fsdp": -1}, "options->fsdp -1"),
                      ({"fsdp": ctx.size, "fsdp_axis": "dp"}, "three different, non-empty names")):
    try:
        cgemm.Context(dp=1, backend="cpu", **kwargs)
        failures.append(f"rank {ctx.rank}: Context({kwargs}) was accepted")
    except cgemm.Error as e:
        if words not in str(e):
            failures.append(f"rank {ctx.rank}: Context({kwargs}): {e}")

ctx.close()
for f in failures:
    print(f, flush=True)
print(f"rank {ctx.rank}: {'FAIL' if failures else 'PASS'} ({len(cases)} layouts)", flush=True)
sys.exit(1 if failures else 0)
