"""The Python module (python/cgemm.py) over libcgemm.so on the CPU backend, under mpirun.

Every rank draws the same global operands (fresh random normals from --seed, the same on every
rank), takes its shards by the plan's offsets, executes the plan into a poisoned (NaN) output
and compares its shard with a float64 numpy reference of the whole GEMM. Then the errors: a
malformed spec string and a spec that is not the planner's answer raise cgemm.Error with the
status and a message naming them; a stream handle (ignored by the CPU backend: the same bits)
and bad handles; Plan.execute_pointers on numpy's addresses (the same bits) and its argument
errors; a borrowed NCCL communicator refused on the CPU backend; gpu_sharing=True accepted
there without effect (the same bits) and its bad values refused; an FP8 plan (current
scaling) within the FP8 bound of the float64 reference, and its option errors. Prints PASS on
rank 0 when every case passed.

Run: mpirun -np 2 python3 tests/mpi/test_python_capi.py --seed 123 [--dp 1]
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
args = parser.parse_args()

ctx = cgemm.Context(dp=args.dp, backend="cpu")
assert ctx.backend == "cpu", ctx.backend
assert cgemm.version().count(".") == 2, cgemm.version()
failures = []


def layout(collective, tbs):
    """The standard tensor-sequence-parallel specs (cgemm/runtime/plan.hpp)."""
    if collective == "all_gather":
        x, w, b = ["'dp'", "'tpsp'", "None"], "(None, 'tpsp')", "('tpsp',)"
    else:
        x, w, b = ["'dp'", "None", "'tpsp'"], "('tpsp', None)", "(None,)"
    if tbs:
        x[0], x[1] = x[1], x[0]
    return "(" + ", ".join(x) + ")", w, b


def run_case(collective, dtype, bias, tbs, case_seed):
    batch, seq, k, n = 2 * ctx.dp, 4 * ctx.tp, 24, 8 * ctx.tp
    lhs_shape = (seq, batch, k) if tbs else (batch, seq, k)
    x_spec, w_spec, b_spec = layout(collective, tbs)
    plan = ctx.plan(lhs_shape=lhs_shape, rhs_shape=(k, n), bias_shape=(n,) if bias else None,
                    dtype=dtype, lhs_spec=x_spec, rhs_spec=w_spec,
                    bias_spec=b_spec if bias else None, collective=collective,
                    transpose_batch_sequence=tbs, name=f"{collective}_{dtype}")
    with plan:
        rng = np.random.default_rng(case_seed)
        npdt = np.dtype(dtype)
        # Rounded to the operand dtype first: the reference multiplies exactly these values.
        xg = rng.standard_normal(lhs_shape).astype(npdt)
        wg = rng.standard_normal((k, n)).astype(npdt)
        bg = rng.standard_normal((n,)).astype(npdt) if bias else None
        ref = np.einsum("...k,kn->...n", xg.astype(np.float64), wg.astype(np.float64))
        scale = np.einsum("...k,kn->...n", np.abs(xg.astype(np.float64)),
                          np.abs(wg.astype(np.float64)))
        if bias:
            ref = ref + bg.astype(np.float64)
            scale = scale + np.abs(bg.astype(np.float64))
        assert plan.out.global_shape == ref.shape, (plan.out.global_shape, ref.shape)
        x = np.ascontiguousarray(xg[plan.lhs.slices])
        w = np.ascontiguousarray(wg[plan.rhs.slices])
        b = np.ascontiguousarray(bg[plan.bias.slices]) if bias else None
        y = plan.out.empty()
        y.fill(np.nan)  # poisoned: any element not written fails
        plan.execute(x, w, b, y)
        # The error bound of a few roundings in the output dtype per element (partials summed
        # across tp ranks, the bias added): (tp + 2) units of its precision, relative to
        # |x| @ |w| + |b|.
        eps = float(np.finfo(npdt).eps)
        err = np.abs(y.astype(np.float64) - ref[plan.out.slices])
        bound = (ctx.tp + 2) * eps * scale[plan.out.slices]
        name = f"{collective} {dtype} bias={bias} tbs={tbs}"
        if not np.all(err <= bound):  # NaN compares False: caught here
            worst = np.nanargmax(err / bound) if np.any(np.isfinite(err)) else 0
            failures.append(f"rank {ctx.rank}: {name}: {np.count_nonzero(~(err <= bound))} of "
                            f"{err.size} elements off, worst |diff| {err.flat[worst]:.3g} "
                            f"> {bound.flat[worst]:.3g}")
        # A second call on fresh inputs reuses the plan (its workspaces).
        x2 = rng.standard_normal(x.shape).astype(npdt)
        y.fill(np.nan)
        plan.execute(x2, w, b, y)
        if not np.all(np.isfinite(y)):
            failures.append(f"rank {ctx.rank}: {name}: second call left unwritten elements")
        # On a caller's stream (an int handle): the CPU backend ignores it, the same bits.
        y2 = plan.out.empty()
        y2.fill(np.nan)
        plan.execute(x2, w, b, y2, stream=0x5173)
        if y2.tobytes() != y.tobytes():
            failures.append(f"rank {ctx.rank}: {name}: execute on a stream changed the bits")
        # torch's default stream (0) and numpy integers are handles too.
        y2.fill(np.nan)
        plan.execute(x2, w, b, y2, stream=np.int64(0))
        if y2.tobytes() != y.tobytes():
            failures.append(f"rank {ctx.rank}: {name}: execute on stream 0 changed the bits")
        # Raw addresses (Plan.execute_pointers, what python/cgemm_torch.py calls with device
        # pointers): the CPU backend reads host memory, so numpy's addresses; the same bits.
        y2.fill(np.nan)
        plan.execute_pointers(x2.ctypes.data, w.ctypes.data, b.ctypes.data if bias else None,
                              y2.ctypes.data, np.int64(0))
        if y2.tobytes() != y.tobytes():
            failures.append(f"rank {ctx.rank}: {name}: execute_pointers changed the bits")
        # A captured call (emulated on the CPU backend: each replay runs it): nothing runs at
        # the capture; replays, eager calls between them, give the same bits; closed with it.
        y2.fill(np.nan)
        with plan.capture(x2, w, b, y2) as graph:
            if not np.isnan(y2).all():
                failures.append(f"rank {ctx.rank}: {name}: the capture ran the call")
            for i in range(3):
                y2.fill(np.nan)
                graph.replay()
                if y2.tobytes() != y.tobytes():
                    failures.append(f"rank {ctx.rank}: {name}: replay {i} changed the bits")
        y2.fill(np.nan)
        graph = plan.capture_pointers(x2.ctypes.data, w.ctypes.data,
                                      b.ctypes.data if bias else None, y2.ctypes.data)
        graph.replay()
        if y2.tobytes() != y.tobytes():
            failures.append(f"rank {ctx.rank}: {name}: capture_pointers' replay changed the bits")
        graph.close()
        try:
            graph.replay()
            failures.append(f"rank {ctx.rank}: {name}: a closed graph replayed")
        except cgemm.Error as e:
            if "closed" not in str(e):
                failures.append(f"rank {ctx.rank}: {name}: {e}")
        # The gathered lhs (all-gather plans only): the global lhs's rows of this dp rank, in
        # sequence order, beside the same output; other plans have none and refuse one.
        if collective != "all_gather":
            if plan.gathered_lhs is not None:
                failures.append(f"rank {ctx.rank}: {name}: a gathered_lhs on a {collective} plan")
            try:
                plan.execute(x2, w, b, y2, gathered_lhs=np.empty_like(x2))
                failures.append(f"rank {ctx.rank}: {name}: gathered_lhs not refused")
            except ValueError as e:
                if "hands no gathered lhs" not in str(e):
                    failures.append(f"rank {ctx.rank}: {name}: {e}")
        else:
            g = plan.gathered_lhs
            seq_dim = 0 if tbs else 1
            want_slices = tuple(slice(None) if d == seq_dim else sl
                                for d, sl in enumerate(plan.lhs.slices))
            want = xg[want_slices]
            for i, gathered in enumerate((g.empty(), g.empty())):
                gathered.fill(np.nan)
                if i == 0:
                    plan.execute(x, w, b, y2, gathered_lhs=gathered)
                else:
                    plan.execute_pointers(x.ctypes.data, w.ctypes.data,
                                          b.ctypes.data if bias else None, y2.ctypes.data, 0,
                                          gathered_lhs=gathered.ctypes.data)
                if gathered.shape != want.shape or gathered.tobytes() != want.tobytes():
                    failures.append(f"rank {ctx.rank}: {name}: gathered lhs (call {i}) is not "
                                    "the global lhs's rows of this rank")


case = 0
for collective in ("all_gather", "reduce_scatter", "none"):
    for dtype in ("float32", "float16"):
        for bias, tbs in ((True, False), (False, True)):
            case += 1
            run_case(collective, dtype, bias, tbs, args.seed * 1000 + case)


def expect_error(status, fragment, **kw):
    try:
        ctx.plan(**kw).close()
    except cgemm.Error as e:
        if e.status != status or fragment not in e.message:
            failures.append(f"rank {ctx.rank}: expected {status} with '{fragment}', got {e}")
        return
    failures.append(f"rank {ctx.rank}: expected {status} with '{fragment}', the plan was made")


n = 8 * ctx.tp
base = dict(lhs_shape=(2 * ctx.dp, 4 * ctx.tp, 16), rhs_shape=(16, n), dtype="float32",
            collective="all_gather", rhs_spec="(None, 'tpsp')")
expect_error("CGEMM_ERROR_INVALID_ARGUMENT", "lhs_spec: partition spec \"('dp' 'tpsp')\"",
             lhs_spec="('dp' 'tpsp')", **base)
if ctx.tp > 1:
    # The all-gather with the reduce-scatter's specs: gemm.py's sequence-dim rule.
    expect_error("CGEMM_ERROR_PLAN", "CollectiveGEMM supports only", lhs_spec="('dp', None, 'tpsp')",
                 **dict(base, rhs_spec="('tpsp', None)"))
expect_error("CGEMM_ERROR_INVALID_ARGUMENT", "dtype", lhs_spec="('dp', 'tpsp', None)",
             **dict(base, dtype="int7"))

def expect_raise(kind, fragment, call):
    try:
        call()
    except kind as e:
        if fragment not in str(e):
            failures.append(f"rank {ctx.rank}: expected {kind.__name__} with '{fragment}', "
                            f"got {e}")
        return
    failures.append(f"rank {ctx.rank}: expected {kind.__name__} with '{fragment}', no error")


with ctx.plan(**dict(base, lhs_spec="('dp', 'tpsp', None)")) as p:
    xs, ws, ys = p.lhs.empty(), p.rhs.empty(), p.out.empty()
    expect_raise(TypeError, "stream: an int handle is needed",
                 lambda: p.execute(xs, ws, None, ys, stream="s"))
    expect_raise(ValueError, "stream: -1 is not a pointer value",
                 lambda: p.execute(xs, ws, None, ys, stream=-1))
    expect_raise(ValueError, "bias: the plan has no bias, pass None",
                 lambda: p.execute_pointers(xs.ctypes.data, ws.ctypes.data, xs.ctypes.data,
                                            ys.ctypes.data))
    expect_raise(TypeError, "out: an int handle is needed",
                 lambda: p.execute_pointers(xs.ctypes.data, ws.ctypes.data, None, ys))
# On MPI_COMM_WORLD (comm None) too: refused before the handle is used, alike on every rank.
expect_raise(cgemm.Error, "CGEMM_ERROR_BACKEND: cgemm_context_create_world_ex: nccl_comm: "
             "a borrowed NCCL communicator needs the CUDA backend",
             lambda: cgemm.Context(dp=args.dp, backend="cpu", nccl_comm=0x4e43))
expect_raise(ValueError, "nccl_comm: 0 is not an NCCL communicator",
             lambda: cgemm.Context(dp=args.dp, backend="cpu", comm=0, nccl_comm=0))
# MPI_COMM_WORLD's Fortran handle without mpi4py: the MPI standard fixes none, Open MPI's mpif.h
# says 0 and MPICH's 0x44000000 (its C handle).
world_f = 0 if hasattr(cgemm._lib, "ompi_mpi_comm_world") else 0x44000000
# Refused before the handle is used (it is not a communicator), alike on every rank.
expect_raise(cgemm.Error, "CGEMM_ERROR_BACKEND: cgemm_context_create_ex_fortran: nccl_comm: "
             "a borrowed NCCL communicator needs the CUDA backend",
             lambda: cgemm.Context(dp=args.dp, backend="cpu", comm=world_f, nccl_comm=0x4e43))

# gpu_sharing (cgemm_context_options): accepted without effect on the CPU backend, as in the
# C++ runtime: the same bits as ctx on fresh inputs, through MPI_COMM_WORLD and the Fortran
# handle; anything but a bool refused before the C call.
with ctx.plan(**dict(base, lhs_spec="('dp', 'tpsp', None)")) as p:
    rng = np.random.default_rng(args.seed * 1000 + 999)
    xs = rng.standard_normal(p.lhs.local_shape).astype(np.float32)
    ws = rng.standard_normal(p.rhs.local_shape).astype(np.float32)
    want = p.out.empty()
    want.fill(np.nan)
    p.execute(xs, ws, None, want)
    for comm in (None, world_f):
        with cgemm.Context(dp=args.dp, backend="cpu", gpu_sharing=True, comm=comm) as shared:
            if shared.backend != "cpu" or not shared.gpu_sharing or shared.tp != ctx.tp:
                failures.append(f"rank {ctx.rank}: gpu_sharing context: backend "
                                f"{shared.backend}, gpu_sharing {shared.gpu_sharing}")
            with shared.plan(**dict(base, lhs_spec="('dp', 'tpsp', None)")) as q:
                got = q.out.empty()
                got.fill(np.nan)
                q.execute(xs, ws, None, got)
                if got.tobytes() != want.tobytes() or not np.all(np.isfinite(got)):
                    failures.append(f"rank {ctx.rank}: gpu_sharing (comm {comm}) changed the bits "
                                    "on the CPU backend")
# FP8 (cgemm_plan_options): current scaling, e4m3 x e4m3, against the float64 reference of the
# unquantized GEMM: each operand's relative error at most 2^-4 (3 mantissa bits; the scaled
# values are normal), so the error is at most (2^-3 + 2^-8) of |x| @ |w| plus fp32
# accumulation; and not the unquantized bits (the quantization ran). Its errors: an unknown
# word (INVALID_ARGUMENT), e5m2 x e5m2 (gemm.py's pairs: PLAN).
fp8 = dict(base, lhs_shape=(2 * ctx.dp, 4 * ctx.tp, 32), rhs_shape=(32, 16 * ctx.tp),
           lhs_spec="('dp', 'tpsp', None)")
rng = np.random.default_rng(args.seed * 1000 + 998)
xg = rng.standard_normal(fp8["lhs_shape"]).astype(np.float32)
wg = rng.standard_normal(fp8["rhs_shape"]).astype(np.float32)
ref = np.einsum("...k,kn->...n", xg.astype(np.float64), wg.astype(np.float64))
mag = np.einsum("...k,kn->...n", np.abs(xg.astype(np.float64)), np.abs(wg.astype(np.float64)))
outs = {}
for scaling in (None, "current"):
    with ctx.plan(**fp8, scaling=scaling) as p:
        y = p.out.empty()
        y.fill(np.nan)
        p.execute(np.ascontiguousarray(xg[p.lhs.slices]), np.ascontiguousarray(wg[p.rhs.slices]),
                  None, y)
        outs[scaling] = y
        slices = p.out.slices
err = np.abs(outs["current"].astype(np.float64) - ref[slices])
bound = (2.0 ** -3 + 2.0 ** -8 + 40 * np.finfo(np.float32).eps) * mag[slices]
if not np.all(err <= bound):
    failures.append(f"rank {ctx.rank}: fp8 current: {np.count_nonzero(~(err <= bound))} elements "
                    "beyond the FP8 bound")
if outs["current"].tobytes() == outs[None].tobytes():
    failures.append(f"rank {ctx.rank}: fp8 current gave the unquantized bits")
try:
    ctx.plan(**fp8, scaling="fp8").close()
    failures.append(f"rank {ctx.rank}: scaling 'fp8' accepted")
except cgemm.Error as e:
    if e.status != "CGEMM_ERROR_INVALID_ARGUMENT" or "options->scaling" not in e.message:
        failures.append(f"rank {ctx.rank}: scaling 'fp8' refused as {e}")
try:
    ctx.plan(**fp8, scaling="current", lhs_format="e5m2", rhs_format="e5m2").close()
    failures.append(f"rank {ctx.rank}: e5m2 x e5m2 accepted")
except cgemm.Error as e:
    if e.status != "CGEMM_ERROR_PLAN" or "float8_e5m2 x float8_e5m2" not in e.message:
        failures.append(f"rank {ctx.rank}: e5m2 x e5m2 refused as {e}")

for bad in (2, "yes", None):
    expect_raise(ValueError, f"gpu_sharing: True or False, got {bad!r}",
                 lambda: cgemm.Context(dp=args.dp, backend="cpu", gpu_sharing=bad))
# The stream and transport knobs reach the C API (cgemm_context_options): refused out of
# range, accepted on the CPU backend without effect (CUDA only; num_sm_for_communication none).
expect_raise(ValueError, "use_ce: True or False, got 2",
             lambda: cgemm.Context(dp=args.dp, backend="cpu", use_ce=2))
expect_raise(ValueError, "num_sm_for_communication: at least 1, got 0",
             lambda: cgemm.Context(dp=args.dp, backend="cpu", num_sm_for_communication=0))
expect_raise(cgemm.Error, "options->compute_stream_priority -1: must be 0 or more",
             lambda: cgemm.Context(dp=args.dp, backend="cpu", compute_stream_priority=-1))
with cgemm.Context(dp=args.dp, backend="cpu", compute_stream_priority=1,
                   communication_stream_priority=2, use_ce=False,
                   num_sm_for_communication=8) as knobs:
    if knobs.backend != "cpu" or knobs.tp != ctx.tp:
        failures.append(f"rank {ctx.rank}: the stream knobs changed the context: {knobs.backend}")

# Numbers that ctypes would wrap or truncate, and strings that C would cut: refused in Python,
# naming the argument (before: dp 2**32 + 1 became 1, a dim of 2**64 + 2 became 2, margin 2.7
# became 2, a name "a\0b" became "a").
expect_raise(ValueError, "dp: 4294967297 is outside the C type's range",
             lambda: cgemm.Context(dp=2 ** 32 + 1, backend="cpu"))
expect_raise(TypeError, "num_max_streams: an int is needed, got float 2.5",
             lambda: cgemm.Context(dp=args.dp, backend="cpu", num_max_streams=2.5))
expect_raise(ValueError, "backend: 'cpu\\x00gpu' contains a NUL character",
             lambda: cgemm.Context(dp=args.dp, backend="cpu\0gpu"))
expect_raise(ValueError, "comm: 4294967296 is outside the C type's range",
             lambda: cgemm.Context(dp=args.dp, backend="cpu", comm=2 ** 32))
plain = dict(base, lhs_spec="('dp', 'tpsp', None)")
expect_raise(ValueError, "lhs_shape[1]: 18446744073709551618 is outside the C type's range",
             lambda: ctx.plan(**dict(plain, lhs_shape=(2 * ctx.dp, 2 ** 64 + 2, 16))))
expect_raise(TypeError, "rhs_shape[0]: an int is needed, got float 16.0",
             lambda: ctx.plan(**dict(plain, rhs_shape=(16.0, n))))
expect_raise(ValueError, "lhs dims[0]: 4294967295 is outside the C type's range",
             lambda: ctx.plan(**plain, contracting_dims=((2 ** 32 - 1,), (0,))))
expect_raise(ValueError, "margin: 4294967299 is outside the C type's range",
             lambda: ctx.plan(**plain, scaling="current", margin=2 ** 32 + 3))
expect_raise(TypeError, "margin: an int is needed, got float 2.7",
             lambda: ctx.plan(**plain, scaling="current", margin=2.7))
expect_raise(TypeError, "amax_history_len: an int is needed, got str '16'",
             lambda: ctx.plan(**plain, scaling="delayed", amax_history_len="16"))
expect_raise(ValueError, "name: 'a\\x00b' contains a NUL character",
             lambda: ctx.plan(**plain, name="a\0b"))
expect_raise(ValueError, "lhs_spec: ", lambda: ctx.plan(**dict(plain, lhs_spec="('dp'\0)")))

# amax_history_len's bound (2^23), as the C API's and cgemm-run's.
expect_raise(cgemm.Error, "CGEMM_ERROR_INVALID_ARGUMENT: cgemm_plan_create_ex: "
             "options->amax_history_len 8388609: must be 1..8388608",
             lambda: ctx.plan(**plain, scaling="delayed", amax_history_len=2 ** 23 + 1))
expect_raise(cgemm.Error, "options->amax_history_len 2147483647: must be 1..8388608",
             lambda: ctx.plan(**plain, scaling="delayed", amax_history_len=2 ** 31 - 1))

# A Fortran handle that names no communicator: an Error, not an abort of the process.
expect_raise(cgemm.Error, "CGEMM_ERROR_INVALID_ARGUMENT: cgemm_context_create_ex_fortran: "
             "comm (Fortran handle 12345): not a communicator",
             lambda: cgemm.Context(dp=args.dp, backend="cpu", comm=12345))

# timeout_s (cgemm_context_options): a documented, settable deadline; its bounds.
with cgemm.Context(dp=args.dp, backend="cpu", timeout_s=120) as timed:
    if timed.tp != ctx.tp:
        failures.append(f"rank {ctx.rank}: timeout_s=120 context: tp {timed.tp}")
expect_raise(cgemm.Error, "options->timeout_s -1.000000: must be 0 (the default) or more",
             lambda: cgemm.Context(dp=args.dp, backend="cpu", timeout_s=-1))
expect_raise(cgemm.Error, "options->timeout_s",
             lambda: cgemm.Context(dp=args.dp, backend="cpu", timeout_s=float("nan")))
expect_raise(TypeError, "timeout_s: a number of seconds is needed, got str",
             lambda: cgemm.Context(dp=args.dp, backend="cpu", timeout_s="60"))
expect_raise(ValueError, "timeout_s: 0 is no deadline",
             lambda: cgemm.Context(dp=args.dp, backend="cpu", timeout_s=0))

# Ranks with different arguments: an Error on every rank naming the field (before: one rank
# returned garbage while another aborted).
if ctx.size > 1:
    k = 16 if ctx.rank == 0 else 32
    expect_raise(cgemm.Error, "the ranks' arguments differ: rank 1 of the communicator passes "
                 "lhs_shape", lambda: ctx.plan(**dict(plain, lhs_shape=(2 * ctx.dp, 4 * ctx.tp, k),
                                                      rhs_shape=(k, n))))
    expect_raise(cgemm.Error, "passes chunks_per_rank 2, rank 0 passes 1",
                 lambda: cgemm.Context(dp=args.dp, backend="cpu",
                                       chunks_per_rank=1 if ctx.rank == 0 else 2))

# A stale handle (the C API's handle table): refused with a status, never a crash.
stale = ctx.plan(**plain)
handle = stale._handle
stale.close()
info = cgemm._TensorInfo()
status = cgemm._lib.cgemm_plan_tensor_info(handle, 3, cgemm.ctypes.byref(info))
message = cgemm._lib.cgemm_last_error().decode()
if status != 1 or "plan is not a live cgemm_plan: it was destroyed already" not in message:
    failures.append(f"rank {ctx.rank}: a destroyed plan's handle gave status {status}: {message}")

ctx.close()
for f in failures:
    print(f, flush=True)
if failures:
    sys.exit(1)
if ctx.rank == 0:
    print(f"PASS: {case} GEMMs on a dp {ctx.dp} x tp {ctx.tp} mesh (seed {args.seed}), "
          f"cgemm {cgemm.version()}", flush=True)
