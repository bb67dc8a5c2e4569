"""Context.grouped_plan (python/cgemm.py) over libcgemm.so's cgemm_grouped_plan_* on the CPU
backend, under mpirun: each rank plans and calls on its own group sizes (the family is local).

Every case draws fresh random inputs (from --seed and the rank), poisons the output with NaN,
executes, and compares every element with a float64 numpy reference of each group's GEMM:
ragged rows in float32 (with a bias and an empty group) and float16 (lhs [K, M], rhs [G, K, N]),
ragged contracting in float32 (a weight gradient, with a bias), and FP8 e4m3 ragged rows with a
scale_inv per group and operand; a plan of path cublaslt_device_tiles captured and replayed with
sizes that change between replays (and another path's capture refused). Then the errors: sizes that do not sum to the ragged dim (the
output still poisoned), arrays of the wrong dtype or shape, scale_invs on a plan that is not FP8,
a bad path word, a closed plan, and a context closed before its grouped plan. Prints PASS on
rank 0 when every case passed.

Run: mpirun -np 2 python3 tests/mpi/test_python_grouped.py --seed 123
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import cgemm  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, required=True)
args = parser.parse_args()

ctx = cgemm.Context(backend="cpu")
rng = np.random.default_rng([args.seed, ctx.rank])
print(f"rank {ctx.rank}: seed {args.seed}", flush=True)
failures = []

# e4m3 values +-{0.5, 1, 1.5, 2} and their bytes (sign, exponent bias 7, 3 mantissa bits).
E4M3 = {0.5: 0x30, 1.0: 0x38, 1.5: 0x3C, 2.0: 0x40}


def draw(shape, dtype):
    """Values in +-[0.25, 1) (FP8: the e4m3 values above) and the array the plan reads."""
    if dtype == "float8_e4m3fn":
        mags = rng.choice(list(E4M3), size=shape)
        neg = rng.integers(0, 2, size=shape).astype(bool)
        data = np.vectorize(E4M3.get)(mags).astype(np.uint8) | (neg.astype(np.uint8) << 7)
        return np.where(neg, -mags, mags), data
    values = rng.uniform(0.25, 1.0, shape) * rng.choice([-1.0, 1.0], shape)
    data = values.astype(dtype)
    return data.astype(np.float64), data


def reference(form, sizes, a, b, lhs_t, rhs_t, scale, bias):
    """float64 out of each group (rows of lhs @ rhs[g], or contracting slices of lhs and rhs)
    and the magnitudes sum |x||w| + |bias| the rounding bound scales with."""
    lhs = a.T if lhs_t else a  # [M, K], or [M, K_total] for the contracting form
    offs = np.concatenate([[0], np.cumsum(sizes)])
    outs, mags = [], []
    for g, (lo, hi) in enumerate(zip(offs[:-1], offs[1:])):
        if form == "ragged_rows":
            w = b[g].T if rhs_t else b[g]  # [K, N]
            x = lhs[lo:hi]
        else:
            w = (b.T if rhs_t else b)[lo:hi]  # [size, N]
            x = lhs[:, lo:hi]
        r, m = x @ w * scale[g], np.abs(x) @ np.abs(w) * scale[g]
        if bias is not None:
            r, m = r + bias[g], m + np.abs(bias[g])
        outs.append(r)
        mags.append(m)
    return (np.concatenate if form == "ragged_rows" else np.stack)(outs), \
        (np.concatenate if form == "ragged_rows" else np.stack)(mags)


def run_case(title, form, sizes, other, n, dtype, lhs_t, rhs_t, bias, eps):
    g, ragged = len(sizes), int(sum(sizes))
    fp8 = dtype.startswith("float8")
    if form == "ragged_rows":
        lhs_shape = (other, ragged) if lhs_t else (ragged, other)
        rhs_shape = (g, n, other) if rhs_t else (g, other, n)
        cd = ((0,) if lhs_t else (1,), (2,) if rhs_t else (1,))
    else:
        lhs_shape = (ragged, other) if lhs_t else (other, ragged)
        rhs_shape = (n, ragged) if rhs_t else (ragged, n)
        cd = ((0,) if lhs_t else (1,), (1,) if rhs_t else (0,))
    out_dtype = "float32" if fp8 else dtype
    with ctx.grouped_plan(lhs_shape=lhs_shape, rhs_shape=rhs_shape, num_groups=g,
                          bias_shape=(g, n) if bias else None, dtype=dtype, out_dtype=out_dtype,
                          contracting_dims=cd, form=form, scaling="current" if fp8 else None,
                          name=title) as plan:
        assert plan.path == "loop" and plan.ragged_extent == ragged, (plan.path,
                                                                       plan.ragged_extent)
        a, a_data = draw(lhs_shape, dtype)
        b, b_data = draw(rhs_shape, dtype)
        c, c_data = draw((g, n), out_dtype) if bias else (None, None)
        sl = rng.uniform(0.5, 2.0, g).astype(np.float32) if fp8 else None
        sr = rng.uniform(0.5, 2.0, g).astype(np.float32) if fp8 else None
        scale = (sl.astype(np.float64) * sr) if fp8 else np.ones(g)
        out = np.full(plan.out.local_shape, np.nan, np.dtype(out_dtype))
        plan.execute(np.array(sizes, np.int32), a_data, b_data, c_data, out, sl, sr)
        ref, mag = reference(form, sizes, a, b, lhs_t, rhs_t, scale, c)
        if ref.shape != out.shape:
            failures.append(f"{title}: out {out.shape}, reference {ref.shape}")
            return
        # One or two roundings to the output dtype (the CPU backend accumulates in float64).
        bound = eps * (np.abs(ref) + mag) + 1e-30
        err = np.abs(out.astype(np.float64) - ref)
        if not np.all(err <= bound):  # NaN fails
            failures.append(f"{title}: {int(np.sum(~(err <= bound)))} elements out of bound, "
                            f"max error {np.nanmax(err)}")


def expect(kind, fragment, call):
    try:
        call()
    except kind as e:
        if fragment not in str(e):
            failures.append(f"{kind.__name__} {e!s} lacks {fragment!r}")
        return
    except Exception as e:  # noqa: BLE001
        failures.append(f"expected {kind.__name__} ({fragment}), got {type(e).__name__}: {e}")
        return
    failures.append(f"no error, expected {kind.__name__} ({fragment})")


r = ctx.rank
run_case("rows_f32_bias", "ragged_rows", [17 + r, 0, 3, 40 - r], 24, 8, "float32", False, True,
         True, 2.0 ** -22)
run_case("rows_f16_lhsT", "ragged_rows", [5, 30 + r, 0, 13], 16, 8, "float16", True, False,
         False, 2.0 ** -10)
run_case("wgrad_f32_bias", "ragged_contracting", [0, 31, 9 + r], 12, 8, "float32", True, False,
         True, 2.0 ** -22)
run_case("rows_fp8", "ragged_rows", [32, 16 * r, 48], 32, 16, "float8_e4m3fn", False, True,
         False, 2.0 ** -22)

# A grouped plan captured (GroupedPlan.capture: the CPU backend emulates graphs, a replay runs
# the call) with path cublaslt_device_tiles, which reads the sizes where they are: the sizes
# array changes in place between replays; each replay equals an eager call on the same sizes,
# and the reference.
with ctx.grouped_plan(lhs_shape=(64, 16), rhs_shape=(3, 8, 16), num_groups=3, dtype="float32",
                      path="cublaslt_device_tiles", name="captured") as cplan:
    assert cplan.path == "loop", cplan.path  # the CPU backend loops
    a, a_data = draw((64, 16), "float32")
    b, b_data = draw((3, 8, 16), "float32")
    sizes = np.array([64, 0, 0], np.int32)
    got = np.full((64, 8), np.nan, np.float32)
    graph = cplan.capture(sizes, a_data, b_data, None, got)
    if not np.all(np.isnan(got)):
        failures.append("capture ran the call")
    for new_sizes in ([64, 0, 0], [10, 0, 54], [1, 62, 1]):
        sizes[:] = new_sizes
        got[:] = np.nan
        graph.replay()
        eager = np.full((64, 8), np.nan, np.float32)
        cplan.execute(sizes.copy(), a_data, b_data, None, eager)
        ref, mag = reference("ragged_rows", new_sizes, a, b, False, True, np.ones(3), None)
        if not np.array_equal(got, eager):
            failures.append(f"replay with sizes {new_sizes} differs from the eager call")
        if not np.all(np.abs(got - ref) <= 2.0 ** -22 * (np.abs(ref) + mag) + 1e-30):
            failures.append(f"replay with sizes {new_sizes} is off the reference")
    sizes[:] = [64, 1, 0]
    expect(cgemm.Error, "the group sizes sum to 65, but the ragged dim M (lhs rows) = 64",
           graph.replay)
    cplan.check_device_sizes()  # the CPU backend refused them before it ran: nothing left
    graph.close()
# Another path cannot be captured: the message names the one that can.
with ctx.grouped_plan(lhs_shape=(64, 16), rhs_shape=(3, 8, 16), num_groups=3, dtype="float32",
                      name="host sizes") as hplan:
    expect(cgemm.Error, "this plan with path cublaslt_device_tiles, given its sizes in backend "
           "memory, would read them there and could be captured",
           lambda: hplan.capture(np.array([64, 0, 0], np.int32), a_data, b_data, None, got))

plan = ctx.grouped_plan(lhs_shape=(96, 16), rhs_shape=(4, 8, 16), num_groups=4, dtype="float32",
                        name="experts")
x, w = np.ones((96, 16), np.float32), np.ones((4, 8, 16), np.float32)
y = np.full((96, 8), np.nan, np.float32)
expect(cgemm.Error, "the group sizes sum to 97, but the ragged dim M (lhs rows) = 96",
       lambda: plan.execute(np.array([24, 0, 40, 33], np.int32), x, w, None, y))
if not np.all(np.isnan(y)):
    failures.append("a refused call wrote the output")
expect(ValueError, "group_sizes: int64 (4,) given, the plan needs int32 (4,)",
       lambda: plan.execute(np.array([24, 0, 40, 32]), x, w, None, y))
expect(ValueError, "lhs: float32 (96, 8) given",
       lambda: plan.execute(np.array([24, 0, 40, 32], np.int32), y, w, None, y))
s = np.ones(4, np.float32)
expect(cgemm.Error, "lhs_scale_inv is given but the plan's inputs are float32, not FP8",
       lambda: plan.execute(np.array([24, 0, 40, 32], np.int32), x, w, None, y, s, s))
expect(cgemm.Error, "path \"fast\": not one of",
       lambda: ctx.grouped_plan(lhs_shape=(96, 16), rhs_shape=(4, 8, 16), num_groups=4,
                                path="fast"))
expect(cgemm.Error, "CGEMM_ERROR_STATE", ctx.close)
plan.close()
expect(cgemm.Error, "the plan is closed",
       lambda: plan.execute(np.array([24, 0, 40, 32], np.int32), x, w, None, y))

for f in failures:
    print(f"rank {ctx.rank}: FAIL {f}", flush=True)
ok = not failures
ctx.close()
if ctx.rank == 0 and ok:
    print("PASS")
sys.exit(0 if ok else 1)
