"""torch.ops.cgemm.gemm (python/cgemm_torch.py) on the CUDA backend, under mpirun, on the GPU
machine (PyTorch 2.4+ with CUDA). Prints "skipped: ..." and exits 0 without torch, without
torch.distributed's gloo, or without a GPU.

Ranks may share a GPU (mpirun -np 2 on a one-GPU machine): the context is made with
gpu_sharing=True (cgemm_context_options), which changes nothing while every rank has a GPU of
its own and otherwise runs the collectives over the copy engines. The ranks' GPU is
cgemm_torch.local_device() (local rank modulo the visible GPUs, the backend's rule).

Correctness against the global GEMM gathered over gloo (torch.distributed; NCCL refuses two
ranks of one communicator on one GPU): each rank draws its own shards of the operands (fresh
random normals, fp32 cast to the case's dtype, from a seed of --seed, the operand and the
shard's offset, so ranks that hold the same shard, a replicated bias, hold the same values),
runs the op into a fresh output, and all-gathers every rank's shards with their offsets. Every
rank assembles the global operands from the gathered shards (each element covered, replicated
copies equal), computes the float64 reference torch.matmul(lhs, rhs) (+ bias) and compares
every rank's output shard with its slice of it. Cases: all-gather and reduce-scatter, bfloat16
with a bias and float32 without.

Overhead: the host time per call (time.perf_counter around the Python call, median of 200,
one synchronize at the end) of the op against Plan.execute_pointers on the same tiny GEMM.
Printed, never asserted (with a shared GPU not a speed measurement either).

gloo's rendezvous: MASTER_ADDR (default 127.0.0.1: the ranks on one host) and MASTER_PORT
(default 20000 + the launcher daemon's pid modulo 20000, the parent of every local rank).

Run: CGEMM_LIBRARY=.devbuild/lib/libcgemm.so.0 PYTHONPATH=python \
         mpirun -np 2 python3 tests/gpu/test_torch_op.py [--seed N]
"""

import argparse
import datetime
import os
import statistics
import sys
import time
import zlib

try:
    import torch
except ImportError:
    print("skipped: no torch")
    sys.exit(0)
if not torch.cuda.is_available():
    print("skipped: no GPU (torch.cuda.is_available() is False)")
    sys.exit(0)
import torch.distributed as dist  # noqa: E402

if not (dist.is_available() and dist.is_gloo_available()):
    print("skipped: this torch has no torch.distributed gloo backend (the reference's gather)")
    sys.exit(0)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import cgemm  # noqa: E402
import cgemm_torch  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=int(time.time()))
parser.add_argument("--calls", type=int, default=200)
args = parser.parse_args()

device = cgemm_torch.local_device()
torch.cuda.set_device(device)
ctx = cgemm.Context(dp=1, backend="cuda", gpu_sharing=True)
assert ctx.backend == "cuda", ctx.backend
dist.init_process_group(
    "gloo",
    init_method="tcp://{}:{}".format(os.environ.get("MASTER_ADDR", "127.0.0.1"),
                                     os.environ.get("MASTER_PORT", 20000 + os.getppid() % 20000)),
    rank=ctx.rank, world_size=ctx.size, timeout=datetime.timedelta(seconds=120))
if ctx.rank == 0:
    print(f"seed {args.seed}, {ctx.size} rank(s) on {torch.cuda.device_count()} GPU(s) "
          f"(gpu_sharing=True), torch {torch.__version__}", flush=True)
failures = []


def layout(collective):
    """The standard tensor-sequence-parallel specs (cgemm/runtime/plan.hpp)."""
    if collective == "all_gather":
        return "('dp', 'tpsp', None)", "(None, 'tpsp')", "('tpsp',)"
    return "('dp', None, 'tpsp')", "('tpsp', None)", "(None,)"


def shard(info, name, case_seed, tdt):
    """This rank's shard of an operand: random normals from a seed of the case, the operand
    and the shard's offset (the same shard, the same values on every rank holding it)."""
    key = zlib.crc32(repr((name, info.offset, info.local_shape)).encode())
    gen = torch.Generator().manual_seed(case_seed * 1_000_003 + key)
    # Rounded to the operand dtype here: the reference multiplies exactly these values.
    return torch.randn(info.local_shape, generator=gen).to(tdt)


def gather_global(info, local, name):
    """The global tensor from every rank's shard (gathered over gloo), in float64: each element
    covered, replicated copies equal (else a failure, and the element NaN)."""
    pieces = [None] * ctx.size
    dist.all_gather_object(pieces, (info.offset, local.cpu()))
    full = torch.full(info.global_shape, float("nan"), dtype=torch.float64)
    for rank, (offset, piece) in enumerate(pieces):
        where = tuple(slice(o, o + d) for o, d in zip(offset, piece.shape))
        piece = piece.double()
        old = full[where]
        seen = ~torch.isnan(old)
        if bool((seen & (old != piece)).any()):
            failures.append(f"{name}: rank {rank}'s copy of a replicated shard differs")
            piece = torch.where(seen & (old != piece), torch.full_like(piece, float("nan")), piece)
        full[where] = piece
    if bool(torch.isnan(full).any()):
        failures.append(f"{name}: {int(torch.isnan(full).sum())} elements of the global tensor in "
                        "no rank's shard (or differing copies)")
    return full


def run_case(collective, dtype, bias, case_seed):
    batch, seq, k, n = 2, 8 * ctx.tp, 64, 16 * ctx.tp
    x_spec, w_spec, b_spec = layout(collective)
    plan = ctx.plan(lhs_shape=(batch, seq, k), rhs_shape=(k, n),
                    bias_shape=(n,) if bias else None, dtype=dtype, lhs_spec=x_spec,
                    rhs_spec=w_spec, bias_spec=b_spec if bias else None,
                    collective=collective, name=f"{collective}_{dtype}")
    name = f"{collective} {dtype} bias={bias}"
    tdt = cgemm_torch._TORCH_DTYPES[dtype]
    x = shard(plan.lhs, "lhs", case_seed, tdt)
    w = shard(plan.rhs, "rhs", case_seed, tdt)
    b = shard(plan.bias, "bias", case_seed, tdt) if bias else None
    y = cgemm_torch.gemm(plan, x.to(device), w.to(device), None if b is None else b.to(device))
    torch.cuda.synchronize()
    # The reference of the global GEMM, on every rank, from the gathered operands.
    xg = gather_global(plan.lhs, x, f"{name} lhs")
    wg = gather_global(plan.rhs, w, f"{name} rhs")
    ref = torch.matmul(xg, wg)
    scale = torch.matmul(xg.abs(), wg.abs())
    if bias:
        bg = gather_global(plan.bias, b, f"{name} bias")
        ref = ref + bg
        scale = scale + bg.abs()
    assert plan.out.global_shape == tuple(ref.shape), (plan.out.global_shape, ref.shape)
    outs = [None] * ctx.size
    dist.all_gather_object(outs, (plan.out.offset, y.cpu()))
    # fp32 accumulation (k + 2 roundings of fp32) and a few roundings in the output dtype (the
    # partials summed across tp ranks, the bias added: tp + 2), relative to |x| @ |w| + |b|;
    # bfloat16's eps is 2^-7.
    eps_out = torch.finfo(tdt).eps
    eps_acc = torch.finfo(torch.float32).eps
    for rank, (offset, got) in enumerate(outs):
        where = tuple(slice(o, o + d) for o, d in zip(offset, got.shape))
        bound = ((ctx.tp + 2) * eps_out + (k + 2) * eps_acc) * scale[where]
        err = (got.double() - ref[where]).abs()
        if not bool((err <= bound).all()):  # NaN compares False: caught here
            failures.append(f"{name}: rank {rank}'s output: {int((~(err <= bound)).sum())} of "
                            f"{err.numel()} elements off, max error {err.max().item():.3g}, "
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
    print(f"rank {ctx.rank}: FAIL {f}", flush=True)
# Every rank checked every shard; the job fails on any rank's failure, and rank 0 says so.
failed = [None] * ctx.size
dist.all_gather_object(failed, len(failures))
dist.destroy_process_group()
ctx.close()
if any(failed):
    sys.exit(1)
if ctx.rank == 0:
    print(f"PASS: the op against the gathered global GEMM on {ctx.size} rank(s)")
