"""cgemm as a PyTorch custom op: torch.ops.cgemm.gemm on CUDA tensors, on torch's current stream.

Pure Python over python/cgemm.py (ctypes, no build step); needs PyTorch 2.4+ (torch.library.
custom_op) and a Context on the CUDA backend. Every rank of the plan calls it, in the same
order (the GEMM is collective):

    import cgemm, cgemm_torch, torch
    torch.cuda.set_device(cgemm_torch.local_device())   # the GPU the backend gives this rank
    ctx = cgemm.Context(backend="cuda")           # gpu_sharing=True: ranks may share a GPU
    plan = ctx.plan(...)                          # as in python/cgemm.py
    y = cgemm_torch.gemm(plan, x, w, b)           # x, w, b: this rank's shards (local shapes)

More ranks than GPUs on a host (e.g. mpirun -np 2 on one GPU): cgemm.Context(backend="cuda",
gpu_sharing=True) (cgemm_context_options.gpu_sharing): the ranks share the GPU, the
collectives go through the copy engines, and times are not a speed measurement. torch's own
collectives then need gloo (NCCL refuses two ranks of one communicator on one GPU).

The op is functional: it returns a new tensor of plan.out.local_shape (plan.out.dtype) on the
inputs' device, written by cgemm_plan_execute_on_stream on torch.cuda.current_stream(device),
so it is ordered with the torch work before and after it on that stream like any torch op
(no host wait). Custom ops take no Python objects: a plan is passed by an int id from
register(plan); gemm() registers it on first use. A register_fake implementation gives the
output's shape and dtype, so torch.compile traces the op without running it.

Checked before the call (ValueError naming the operand): CUDA tensors, all on one device,
contiguous, the plan's dtype, the plan's local shape; bias given exactly when the plan has one.
The context's GPU is the backend's (local rank modulo the visible GPUs): a stream of another
device is refused by the C API (cgemm.Error, CGEMM_ERROR_RUNTIME).
"""

import itertools
import os
from typing import Optional

import torch

import cgemm

_TORCH_DTYPES = {
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
}

# Plans by id: the op's schema takes ints, not Python objects.
_PLANS = {}
_NEXT_ID = itertools.count(1)


# The launchers' local rank: Open MPI, MPICH (Hydra), Slurm.
_LOCAL_RANK_VARS = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")


def local_device():
    """The torch device of the GPU the CUDA backend gives this rank: its local rank (from the
    launcher's environment: OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID; 0
    without one) modulo the GPUs this process sees, as cgemm's backend rule
    (runtime/context.cpp). Make it torch's current device before creating tensors for the op.
    RuntimeError when torch sees no GPU."""
    gpus = torch.cuda.device_count()
    if gpus == 0:
        raise RuntimeError("local_device: torch sees no GPU (torch.cuda.device_count() is 0)")
    local_rank = 0
    for var in _LOCAL_RANK_VARS:
        if os.environ.get(var, "").isdigit():
            local_rank = int(os.environ[var])
            break
    return torch.device("cuda", local_rank % gpus)


def register(plan):
    """The plan's id for torch.ops.cgemm.gemm (the same id when called again)."""
    plan_id = getattr(plan, "_cgemm_torch_id", None)
    if plan_id is None:
        plan_id = next(_NEXT_ID)
        plan._cgemm_torch_id = plan_id
        _PLANS[plan_id] = plan
    return plan_id


def unregister(plan):
    """Forgets the plan (call before plan.close() if the registry should not keep it alive)."""
    plan_id = getattr(plan, "_cgemm_torch_id", None)
    if plan_id is not None:
        _PLANS.pop(plan_id, None)
        plan._cgemm_torch_id = None


def _plan(plan_id):
    try:
        return _PLANS[plan_id]
    except KeyError:
        raise ValueError(f"plan_id {plan_id}: no plan registered (cgemm_torch.register)") \
            from None


def _dtype(info, name):
    try:
        return _TORCH_DTYPES[info.dtype]
    except KeyError:
        raise ValueError(f"{name}: the plan's dtype {info.dtype} has no torch op here "
                         f"(supported: {', '.join(_TORCH_DTYPES)})") from None


def _check_operand(tensor, info, name, device):
    if info is None:
        if tensor is not None:
            raise ValueError(f"{name}: the plan has no {name}, pass None")
        return
    if tensor is None:
        raise ValueError(f"{name}: the plan has a {name}, a tensor is needed")
    if tensor.device.type != "cuda":
        raise ValueError(f"{name}: a CUDA tensor is needed, got one on {tensor.device}")
    if tensor.device != device:
        raise ValueError(f"{name}: on {tensor.device}, but lhs is on {device} (one GPU for all)")
    if not tensor.is_contiguous():
        raise ValueError(f"{name}: the tensor must be contiguous (row-major)")
    want = _dtype(info, name)
    if tensor.dtype != want or tuple(tensor.shape) != info.local_shape:
        raise ValueError(f"{name}: {tensor.dtype} {tuple(tensor.shape)} given, the plan needs "
                         f"{want} {info.local_shape} (this rank's shard)")


@torch.library.custom_op("cgemm::gemm", mutates_args=())
def _gemm_op(plan_id: int, lhs: torch.Tensor, rhs: torch.Tensor,
             bias: Optional[torch.Tensor]) -> torch.Tensor:
    plan = _plan(plan_id)
    device = lhs.device
    _check_operand(lhs, plan.lhs, "lhs", device)
    _check_operand(rhs, plan.rhs, "rhs", device)
    _check_operand(bias, plan.bias, "bias", device)
    out = torch.empty(plan.out.local_shape, dtype=_dtype(plan.out, "out"), device=device)
    # The current stream of the inputs' device: the GEMM follows the work queued there (the
    # inputs' producers) and the work queued after it (the consumers) follows the GEMM. The
    # caching allocator gave `out` for this stream, so no record_stream is needed.
    stream = torch.cuda.current_stream(device).cuda_stream
    plan.execute_pointers(lhs.data_ptr(), rhs.data_ptr(),
                          None if bias is None else bias.data_ptr(), out.data_ptr(), stream)
    return out


@_gemm_op.register_fake
def _gemm_fake(plan_id, lhs, rhs, bias):
    plan = _plan(plan_id)
    return lhs.new_empty(plan.out.local_shape, dtype=_dtype(plan.out, "out"))


def gemm(plan, lhs, rhs, bias=None):
    """Collective: lhs @ rhs (+ bias) on this rank's shards through torch.ops.cgemm.gemm; a
    new tensor of plan.out.local_shape."""
    return torch.ops.cgemm.gemm(register(plan), lhs, rhs, bias)
