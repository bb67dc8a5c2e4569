"""torch.ops.cgemm.gemm (python/cgemm_torch.py) on the CUDA backend, under mpirun, on the GPU
machine (PyTorch 2.4+ with CUDA). Prints "skipped: ..." and exits 0 without torch or a GPU.

Correctness: every rank draws the same global operands (fresh random normals from a CPU
torch.Generator seeded with --seed, the same on every rank; fp32, then cast to the case's
dtype), runs the op on its shards (plan.lhs.slices etc.) and compares its output shard with
the float64 reference of the whole GEMM computed locally (every rank can: no gather). Cases:
all-gather and reduce-scatter, bfloat16 with a bias and float32 without.

Overhead: the host time per call (time.perf_counter around the Python call, median of 200,
one synchronize at the end) of the op against Plan.execute_pointers on the same tiny GEMM.
Printed, never asserted.

One GPU per rank: the C API has no gpu_sharing knob (cgemm_context_desc), and the CUDA
backend refuses ranks sharing a GPU without it; more ranks than GPUs print "skipped: ...".

Run: CGEMM_LIBRARY=.devbuild/lib/libcgemm.so.0 PYTHONPATH=python \
         mpirun -np 1 python3 tests/gpu/test_torch_op.py [--seed N]
"""

import argparse
import os
import statistics
import sys
import time

try:
    import torch
except ImportError:
    print("skipped: no torch")
    sys.exit(0)
if not torch.cuda.is_available():
    print("skipped: no GPU (torch.cuda.is_available() is False)")
    sys.exit(0)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import cgemm  # noqa: E402
import cgemm_torch  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=int(time.time()))
parser.add_argument("--calls", type=int, default=200)
args = parser.parse_args()

size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
local_rank = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
gpus = torch.cuda.device_count()
if size > gpus:
    print(f"skipped: {size} ranks but {gpus} GPU(s); the C API has no gpu_sharing knob and the "
          "CUDA backend refuses ranks sharing a GPU")
    sys.exit(0)
# The backend's GPU for this rank: its local rank modulo the visible GPUs (runtime/context.cpp).
device = torch.device("cuda", local_rank % gpus)
torch.cuda.set_device(device)

ctx = cgemm.Context(dp=1, backend="cuda")
assert ctx.backend == "cuda", ctx.backend
if ctx.rank == 0:
    print(f"seed {args.seed}, {ctx.size} rank(s), torch {torch.__version__}")
failures = []


def layout(collective):
    """The standard tensor-sequence-parallel specs (cgemm/runtime/plan.hpp)."""
    if collective == "all_gather":
        return "('dp', 'tpsp', None)", "(None, 'tpsp')", "('tpsp',)"
    return "('dp', None, 'tpsp')", "('tpsp', None)", "(None,)"


def run_case(collective, dtype, bias, case_seed):
    batch, seq, k, n = 2, 8 * ctx.tp, 64, 16 * ctx.tp
    x_spec, w_spec, b_spec = layout(collective)
    plan = ctx.plan(lhs_shape=(batch, seq, k), rhs_shape=(k, n),
                    bias_shape=(n,) if bias else None, dtype=dtype, lhs_spec=x_spec,
                    rhs_spec=w_spec, bias_spec=b_spec if bias else None,
                    collective=collective, name=f"{collective}_{dtype}")
    tdt = cgemm_torch._TORCH_DTYPES[dtype]
    gen = torch.Generator().manual_seed(case_seed)
    # Rounded to the operand dtype first: the reference multiplies exactly these values.
    xg = torch.randn((batch, seq, k), generator=gen).to(tdt)
    wg = torch.randn((k, n), generator=gen).to(tdt)
    bg = torch.randn((n,), generator=gen).to(tdt) if bias else None
    ref = torch.matmul(xg.double(), wg.double())
    scale = torch.matmul(xg.double().abs(), wg.double().abs())
    if bias:
        ref = ref + bg.double()
        scale = scale + bg.double().abs()
    assert plan.out.global_shape == tuple(ref.shape), (plan.out.global_shape, ref.shape)
    x = xg[plan.lhs.slices].contiguous().to(device)
    w = wg[plan.rhs.slices].contiguous().to(device)
    b = bg[plan.bias.slices].contiguous().to(device) if bias else None
    y = cgemm_torch.gemm(plan, x, w, b)
    torch.cuda.synchronize()
    # fp32 accumulation (k + 2 roundings of fp32) and a few roundings in the output dtype (the
    # partials summed across tp ranks, the bias added: tp + 2), relative to |x| @ |w| + |b|;
    # bfloat16's eps is 2^-7.
    eps_out = torch.finfo(tdt).eps
    eps_acc = torch.finfo(torch.float32).eps
    bound = ((ctx.tp + 2) * eps_out + (k + 2) * eps_acc) * scale[plan.out.slices]
    err = (y.cpu().double() - ref[plan.out.slices]).abs()
    name = f"{collective} {dtype} bias={bias}"
    if not bool((err <= bound).all()):  # NaN compares False: caught here
        failures.append(f"{name}: max error {err.max().item():.3g}, "
                        f"bound at the worst {bound.flatten()[err.argmax()].item():.3g}")
    cgemm_torch.unregister(plan)
    plan.close()


for i, (collective, dtype, bias) in enumerate([("all_gather", "bfloat16", True),
                                               ("reduce_scatter", "bfloat16", False),
                                               ("all_gather", "float32", False),
                                               ("reduce_scatter", "float32", True)]):
    run_case(collective, dtype, bias, args.seed + i)

# Errors: a clear ValueError naming the operand.
with ctx.plan(lhs_shape=(2, 8 * ctx.tp, 64), rhs_shape=(64, 16 * ctx.tp), dtype="bfloat16",
              lhs_spec="('dp', 'tpsp', None)", rhs_spec="(None, 'tpsp')",
              collective="all_gather", name="errors") as plan:
    x = torch.randn(plan.lhs.local_shape, device=device).to(torch.bfloat16)
    w = torch.randn(plan.rhs.local_shape, device=device).to(torch.bfloat16)
    for what, call in [("rhs", lambda: cgemm_torch.gemm(plan, x, w.float())),
                       ("rhs", lambda: cgemm_torch.gemm(plan, x, w.t())),
                       ("lhs", lambda: cgemm_torch.gemm(plan, x.cpu(), w)),
                       ("bias", lambda: cgemm_torch.gemm(plan, x, w, w[0]))]:
        try:
            call()
            failures.append(f"errors: {what} not refused")
        except ValueError as e:
            if not str(e).startswith(what + ":"):
                failures.append(f"errors: {what} refused as {e}")
    cgemm_torch.unregister(plan)

# Overhead per call on a tiny GEMM: host time of the op against the ctypes call under it.
with ctx.plan(lhs_shape=(2, 64 * ctx.tp, 64), rhs_shape=(64, 64 * ctx.tp), dtype="bfloat16",
              lhs_spec="('dp', 'tpsp', None)", rhs_spec="(None, 'tpsp')",
              collective="all_gather", name="tiny") as plan:
    x = torch.randn(plan.lhs.local_shape, device=device).to(torch.bfloat16)
    w = torch.randn(plan.rhs.local_shape, device=device).to(torch.bfloat16)
    out = torch.empty(plan.out.local_shape, device=device, dtype=torch.bfloat16)
    plan_id = cgemm_torch.register(plan)
    stream = torch.cuda.current_stream(device).cuda_stream

    def op():
        torch.ops.cgemm.gemm(plan_id, x, w, None)

    def direct():
        plan.execute_pointers(x.data_ptr(), w.data_ptr(), None, out.data_ptr(), stream)

    medians = {}
    for label, call in [("op", op), ("direct", direct)]:
        for _ in range(10):  # warm-up
            call()
        times = []
        for _ in range(args.calls):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
        medians[label] = statistics.median(times) * 1e6
    if ctx.rank == 0:
        print(f"overhead per call (host, median of {args.calls}, {plan.lhs.local_shape} @ "
              f"{plan.rhs.local_shape} bf16): op {medians['op']:.1f} us, execute_pointers "
              f"{medians['direct']:.1f} us, difference {medians['op'] - medians['direct']:.1f} us")
    cgemm_torch.unregister(plan)

for f in failures:
    print(f"rank {ctx.rank}: FAIL {f}")
ctx.close()
if failures:
    sys.exit(1)
if ctx.rank == 0:
    print("PASS")
