"""Pre-quantized operands through the C API and the Python module (cgemm_plan_options'
lhs_quantized / rhs_quantized, cgemm_plan_execute_scaled; issue 42 item 1) on the CPU backend,
under mpirun.

Every rank draws the same global FP8 codes (e4m3, never NaN; fresh from --seed) for x and for
W's colwise copy [N, K], and one scale_inv each. An all-gather plan and a reduce-scatter plan
that take both operands pre-quantized must give the float64 product of the dequantized codes
within fp32 accumulation; the all-gather hands out the FP8 codes it gathered; a plan that
quantizes its lhs itself and takes the rhs pre-quantized must give that plan's own quantization's
product within the FP8 bound. The errors: a missing scale_inv, one given for an operand the plan
quantizes, a [K, N] rhs, a block-scaling mode, and a value other than 0 or 1.

Run: mpirun -np 2 python3 tests/mpi/test_python_prequantized.py --seed 123 [--dp 1]
"""

import argparse
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


def codes(rng, shape):
    """Random e4m3 codes of magnitude 2^-3 .. 2^3 (exponent fields 4 .. 10), both signs."""
    exp = rng.integers(4, 11, size=shape)
    man = rng.integers(0, 8, size=shape)
    sign = rng.integers(0, 2, size=shape) << 7
    return (sign | (exp << 3) | man).astype(np.uint8)


rng = np.random.default_rng(args.seed)
batch, seq, k, n = 2 * ctx.dp, 4 * ctx.tp, 32, 16 * ctx.tp
xg = codes(rng, (batch, seq, k))
wg = codes(rng, (n, k))  # W's colwise copy [N, K]
sx = np.array([0.5], np.float32)
sw = np.array([0.125], np.float32)
ref = np.einsum("bsk,nk->bsn", e4m3(xg) * 0.5, e4m3(wg) * 0.125)
mag = np.einsum("bsk,nk->bsn", np.abs(e4m3(xg)) * 0.5, np.abs(e4m3(wg)) * 0.125)
layouts = {
    "all_gather": ("('dp', 'tpsp', None)", "('tpsp', None)"),
    "reduce_scatter": ("('dp', None, 'tpsp')", "(None, 'tpsp')"),
}
cases = 0
for collective, (x_spec, w_spec) in layouts.items():
    kw = dict(lhs_shape=(batch, seq, k), rhs_shape=(n, k), dtype="bfloat16", out_dtype="float32",
              lhs_spec=x_spec, rhs_spec=w_spec, contracting_dims=((-1,), (1,)),
              collective=collective, scaling="current", name=f"pre {collective}")
    with ctx.plan(**kw, lhs_quantized=True, rhs_quantized=True) as p:
        if p.lhs.dtype != "float8_e4m3fn" or p.rhs.dtype != "float8_e4m3fn":
            failures.append(f"rank {ctx.rank}: {collective}: operand dtypes {p.lhs.dtype}, "
                            f"{p.rhs.dtype}")
        x = np.ascontiguousarray(xg[p.lhs.slices])
        w = np.ascontiguousarray(wg[p.rhs.slices])
        y = p.out.empty()
        y.fill(np.nan)
        gathered = None
        if p.gathered_lhs is not None:
            gathered = p.gathered_lhs.empty()
            gathered.fill(0xFF)
        p.execute(x, w, None, y, gathered_lhs=gathered, lhs_scale_inv=sx, rhs_scale_inv=sw)
        err = np.abs(y.astype(np.float64) - ref[p.out.slices])
        if not np.all(err <= 1e-6 * mag[p.out.slices]):
            failures.append(f"rank {ctx.rank}: {collective}: {np.count_nonzero(err > 1e-6 * mag[p.out.slices])} "
                            "elements off the dequantized product")
        cases += 1
        # The same call on raw addresses (the device-memory entry point; host memory here).
        y2 = p.out.empty()
        y2.fill(np.nan)
        p.execute_pointers(x.ctypes.data, w.ctypes.data, None, y2.ctypes.data,
                           lhs_scale_inv=sx.ctypes.data, rhs_scale_inv=sw.ctypes.data)
        if y2.tobytes() != y.tobytes():
            failures.append(f"rank {ctx.rank}: {collective}: execute_pointers gave other bits")
        if collective == "all_gather":
            if gathered is None or not np.array_equal(gathered, xg[p.gathered_lhs.slices]):
                failures.append(f"rank {ctx.rank}: the gathered FP8 lhs is not the codes")
        # The scale_inv of a pre-quantized operand is required, and only of those.
        for bad, fragment in ((dict(lhs_scale_inv=None, rhs_scale_inv=sw), "lhs_scale_inv is NULL"),
                              (dict(lhs_scale_inv=sx, rhs_scale_inv=None), "rhs_scale_inv is NULL")):
            try:
                p.execute(x, w, None, y, **bad)
                failures.append(f"rank {ctx.rank}: {collective}: {fragment} accepted")
            except cgemm.Error as e:
                if e.status != "CGEMM_ERROR_INVALID_ARGUMENT" or fragment not in e.message:
                    failures.append(f"rank {ctx.rank}: {fragment}: {e}")
    # The lhs quantized by the plan (current scaling), the rhs pre-quantized: the plan's own
    # quantization of x (its global amax) times the given W, within the FP8 bound.
    xf = e4m3(xg).astype(np.float32) * np.float32(1.7)
    with ctx.plan(**dict(kw, dtype="float32"), rhs_quantized=True) as p:
        if p.lhs.dtype != "float32" or p.rhs.dtype != "float8_e4m3fn":
            failures.append(f"rank {ctx.rank}: mixed: operand dtypes {p.lhs.dtype}, {p.rhs.dtype}")
        y = p.out.empty()
        y.fill(np.nan)
        p.execute(np.ascontiguousarray(xf[p.lhs.slices]), np.ascontiguousarray(wg[p.rhs.slices]),
                  None, y, rhs_scale_inv=sw)
        want = np.einsum("bsk,nk->bsn", xf.astype(np.float64), e4m3(wg) * 0.125)
        bound = (2.0 ** -4 + 1e-6) * np.einsum("bsk,nk->bsn", np.abs(xf.astype(np.float64)),
                                               np.abs(e4m3(wg)) * 0.125)
        err = np.abs(y.astype(np.float64) - want[p.out.slices])
        if not np.all(err <= bound[p.out.slices]):
            failures.append(f"rank {ctx.rank}: mixed {collective}: beyond the FP8 bound")
        try:
            p.execute(np.ascontiguousarray(xf[p.lhs.slices]),
                      np.ascontiguousarray(wg[p.rhs.slices]), None, y, lhs_scale_inv=sx,
                      rhs_scale_inv=sw)
            failures.append(f"rank {ctx.rank}: a scale_inv for a quantized lhs accepted")
        except cgemm.Error as e:
            if "lhs_scale_inv is given but the plan quantizes its lhs itself" not in e.message:
                failures.append(f"rank {ctx.rank}: lhs_scale_inv given: {e}")
        cases += 1

# Layouts and modes it does not take.
ag = dict(lhs_shape=(batch, seq, k), rhs_shape=(k, n), dtype="bfloat16", out_dtype="float32",
          lhs_spec="('dp', 'tpsp', None)", rhs_spec="(None, 'tpsp')", collective="all_gather",
          scaling="current")
for kw, status, fragment in (
        (dict(ag, rhs_quantized=True), "CGEMM_ERROR_RUNTIME",
         "the pre-quantized rhs [32, " + str(n // ctx.tp) + "] contracts its leading dims"),
        (dict(ag, scaling="mxfp8", lhs_shape=(batch, 128 * ctx.tp, 128), rhs_shape=(128, 128 * ctx.tp),
              lhs_quantized=True), "CGEMM_ERROR_RUNTIME", "takes one scale_inv per tensor"),
        (dict(ag, lhs_quantized=2), "CGEMM_ERROR_INVALID_ARGUMENT", None)):
    try:
        if kw.get("lhs_quantized") == 2:
            # The module passes bools; the C API's check of other values, through ctypes.
            opts = cgemm._PlanOptions()
            cgemm._lib.cgemm_plan_options_init(cgemm.ctypes.byref(opts), cgemm.ctypes.sizeof(opts))
            opts.scaling = b"current"
            opts.lhs_quantized = 2
            desc = cgemm._PlanDesc()
            cgemm._lib.cgemm_plan_desc_init(cgemm.ctypes.byref(desc))
            desc.lhs_ndim = 2
            desc.lhs_shape[0], desc.lhs_shape[1] = 16, 16
            desc.rhs_ndim = 2
            desc.rhs_shape[0], desc.rhs_shape[1] = 16, 16
            handle = cgemm.ctypes.c_void_p()
            rc = cgemm._lib.cgemm_plan_create_ex(ctx._handle, cgemm.ctypes.byref(desc),
                                                 cgemm.ctypes.byref(opts),
                                                 cgemm.ctypes.byref(handle))
            message = cgemm._lib.cgemm_last_error().decode()
            if rc == 0 or "options->lhs_quantized 2: must be 0 or 1" not in message:
                failures.append(f"rank {ctx.rank}: lhs_quantized 2: status {rc}, {message}")
            continue
        ctx.plan(**kw).close()
        failures.append(f"rank {ctx.rank}: accepted: {fragment}")
    except cgemm.Error as e:
        if e.status != status or fragment not in e.message:
            failures.append(f"rank {ctx.rank}: expected {status} with '{fragment}', got {e}")

ctx.close()
for f in failures:
    print(f, flush=True)
if failures:
    sys.exit(1)
if ctx.rank == 0:
    print(f"PASS: {cases} pre-quantized GEMMs on a dp {ctx.dp} x tp {ctx.tp} mesh "
          f"(seed {args.seed})", flush=True)
