"""cgemm.QuantizedTensor (cgemm_quantized_tensor_*, capi/include/cgemm/cgemm_quantized.h; issue
42: FP8 codes a caller keeps) on the CPU backend, under mpirun.

Fresh random float32 tensors (from --seed, never zeros) on a dp x tp mesh:
- the codes: rowwise are x x scale rounded to e4m3 (within half an e4m3 step), colwise their
  transpose, scale_inv = the global amax / 448 (current scaling: the amax is max-reduced over
  every rank, so every rank holds the same value);
- a pre-quantized all-gather and reduce-scatter plan fed those codes give the same bytes as
  the plan that quantizes both operands itself (the same global amaxes, so the same codes);
- delayed scaling: scale_inv 1 at the first call, then the first call's amax / 448; the scale
  state round trip;
- the refusals: a block-scaling mode, no copy kept, a copy given that is not kept, ranks that
  disagree, the context closed while a tensor lives.

Run: mpirun -np 2 python3 tests/mpi/test_python_quantized_tensor.py --seed 123 [--dp 1]
"""

import argparse
import ctypes
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import cgemm  # noqa: E402
from fp8_codes import e4m3  # noqa: E402  (this folder's)

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--dp", type=int, default=1)
args = parser.parse_args()

ctx = cgemm.Context(dp=args.dp, backend="cpu")
failures = []
E4M3_MAX = 448.0


def fail(what):
    failures.append(f"rank {ctx.rank}: {what}")


def expect_error(call, status, fragment, what):
    try:
        made = call()
        fail(f"{what}: accepted")
        if hasattr(made, "close"):
            made.close()
    except cgemm.Error as e:
        if e.status != status or fragment not in e.message:
            fail(f"{what}: expected {status} with '{fragment}', got {e}")
    except ValueError as e:
        if status != "ValueError" or fragment not in str(e):
            fail(f"{what}: expected {status} with '{fragment}', got ValueError {e}")


rng = np.random.default_rng(args.seed)
batch, seq, k, n = 2 * ctx.dp, 4 * ctx.tp, 16 * ctx.tp, 16 * ctx.tp
xg = (rng.standard_normal((batch, seq, k)) * 3.0).astype(np.float32)
wg = rng.uniform(-0.5, 0.5, (n, k)).astype(np.float32)  # W's [N, K] (torch's layout)
cases = 0

# The codes of x's shard of an all-gather plan.
with ctx.plan(lhs_shape=(batch, seq, k), rhs_shape=(n, k), dtype="float32",
              lhs_spec="('dp', 'tpsp', None)", rhs_spec="('tpsp', None)",
              contracting_dims=((-1,), (1,)), collective="all_gather", name="layout") as p:
    x_local = np.ascontiguousarray(xg[p.lhs.slices])
rows = x_local.shape[0] * x_local.shape[1]
with ctx.quantized_tensor((rows, k), dtype="float32", name="x") as q:
    rw, cw, sinv = q.quantize(x_local.reshape(rows, k))
    want_sinv = np.float32(np.abs(xg).max() / E4M3_MAX)
    if not np.isclose(sinv[0], want_sinv, rtol=1e-6):
        fail(f"scale_inv {sinv[0]}, want the global amax / 448 = {want_sinv}")
    if not np.array_equal(cw, rw.T):
        fail("the colwise copy is not the rowwise codes transposed")
    scaled = x_local.reshape(rows, k).astype(np.float64) / np.float64(sinv[0])
    if not np.all(np.abs(e4m3(rw) - scaled) <= 2.0 ** -4 * np.abs(scaled) + 2.0 ** -10):
        fail("rowwise codes off x x scale by more than half an e4m3 step")
    cases += 1

# Codes from QuantizedTensor into pre-quantized plans: the bytes of the plan that quantizes.
layouts = {
    "all_gather": ("('dp', 'tpsp', None)", "('tpsp', None)"),
    "reduce_scatter": ("('dp', None, 'tpsp')", "(None, 'tpsp')"),
}
for collective, (x_spec, w_spec) in layouts.items():
    kw = dict(lhs_shape=(batch, seq, k), rhs_shape=(n, k), dtype="float32",
              lhs_spec=x_spec, rhs_spec=w_spec, contracting_dims=((-1,), (1,)),
              collective=collective, scaling="current", name=collective)
    with ctx.plan(**kw) as own, ctx.plan(**kw, lhs_quantized=True, rhs_quantized=True) as pre:
        x = np.ascontiguousarray(xg[own.lhs.slices])
        w = np.ascontiguousarray(wg[own.rhs.slices])
        y_own, y_pre = own.out.empty(), pre.out.empty()
        y_own.fill(np.nan)
        y_pre.fill(np.nan)
        own.execute(x, w, None, y_own)
        with ctx.quantized_tensor((x.size // k, k), dtype="float32", colwise=False) as qx, \
                ctx.quantized_tensor(w.shape, dtype="float32", colwise=False) as qw:
            x8, _, sx = qx.quantize(x.reshape(-1, k))
            w8, _, sw = qw.quantize(w)
        pre.execute(x8.reshape(x.shape), w8, None, y_pre, lhs_scale_inv=sx, rhs_scale_inv=sw)
        if np.isnan(y_pre).any() or y_pre.tobytes() != y_own.tobytes():
            fail(f"{collective}: the pre-quantized codes gave other bytes than the plan's own "
                 f"quantization (max diff {np.nanmax(np.abs(y_pre - y_own))})")
        cases += 1

# Delayed scaling: the first call's scale is 1, the next takes the history (the first amax).
src = np.ascontiguousarray(wg[:4])  # the same [4, K] block on every rank
amax = np.float32(np.abs(src).max())
with ctx.quantized_tensor(src.shape, dtype="float32", scaling="delayed", amax_history_len=4) as q:
    _, _, s1 = q.quantize(src)
    _, _, s2 = q.quantize(src)
    if s1[0] != 1.0 or not np.isclose(s2[0], amax / E4M3_MAX, rtol=1e-6):
        fail(f"delayed scale_invs {s1[0]}, {s2[0]}: want 1, then {amax / E4M3_MAX}")
    state = q.scale_state()
    _, _, s3 = q.quantize(src * 2)  # the history now holds amax, amax, 2 amax
    q.set_scale_state(state)
    _, _, s4 = q.quantize(src * 2)  # as if the third call had not run
    if s4[0] != s3[0]:
        fail(f"after set_scale_state: scale_inv {s4[0]}, the saved state gave {s3[0]}")
    expect_error(lambda: q.set_scale_state(state[:-1]), "CGEMM_ERROR_INVALID_ARGUMENT",
                 f"count {state.size - 1}: the state has {state.size} floats", "a short state")
    cases += 1

# Refusals.
expect_error(lambda: ctx.quantized_tensor((4, 4), scaling="mxfp8"),
             "CGEMM_ERROR_INVALID_ARGUMENT", "\"current\" or \"delayed\"", "mxfp8")
expect_error(lambda: ctx.quantized_tensor((4, 4), rowwise=False, colwise=False),
             "CGEMM_ERROR_INVALID_ARGUMENT", "rowwise and colwise are both 0", "no copy")
expect_error(lambda: ctx.quantized_tensor((0, 4)), "CGEMM_ERROR_INVALID_ARGUMENT",
             "rows 0: must be >= 1", "rows 0")
if ctx.size > 1:
    expect_error(lambda: ctx.quantized_tensor((4, 4), format="e4m3" if ctx.rank == 0 else "e5m2"),
                 "CGEMM_ERROR_INVALID_ARGUMENT", "format", "ranks that differ")
with ctx.quantized_tensor((4, 4), dtype="float32", colwise=False, name="rows only") as q:
    a = np.ones((4, 4), np.float32)
    expect_error(lambda: q.quantize(a, colwise=np.empty((4, 4), np.uint8)), "ValueError",
                 "keeps no colwise copy", "a colwise buffer (Python)")
    r8, s8 = np.empty((4, 4), np.uint8), np.empty(1, np.float32)
    expect_error(lambda: q.quantize_pointers(a.ctypes.data, r8.ctypes.data, r8.ctypes.data,
                                             s8.ctypes.data),
                 "CGEMM_ERROR_RUNTIME", "'rows only': a colwise buffer was given",
                 "a colwise buffer (C)")
    expect_error(lambda: q.quantize_pointers(a.ctypes.data, r8.ctypes.data, 0, 0),
                 "CGEMM_ERROR_RUNTIME", "null scale_inv", "no scale_inv")
    expect_error(ctx.close, "CGEMM_ERROR_STATE", "1 plan(s) or quantized tensor(s)",
                 "closing the context under a tensor")
    q.quantize(a)  # still usable after the refusals (collective: every rank)

ctx.close()
for f in failures:
    print(f, flush=True)
if failures:
    sys.exit(1)
if ctx.rank == 0:
    print(f"PASS: {cases} quantized-tensor cases on a dp {ctx.dp} x tp {ctx.tp} mesh "
          f"(seed {args.seed})", flush=True)
