"""cgemm as PyTorch custom ops with autograd, and tensor-parallel Linear modules.

torch.ops.cgemm.gemm on CUDA tensors (CUDA backend, torch's current stream) or CPU tensors (CPU
backend). Pure Python over python/cgemm.py (ctypes, no build step); needs PyTorch 2.4+
(torch.library.custom_op, register_autograd). Every rank of the plan calls it, in the same
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

Checked before the call (ValueError naming the operand): tensors on the backend's device kind
(CUDA tensors for the CUDA backend, CPU tensors for the CPU one), all on one device,
contiguous, the plan's dtype, the plan's local shape; bias given exactly when the plan has one.
The context's GPU is the backend's (local rank modulo the visible GPUs): a stream of another
device is refused by the C API (cgemm.Error, CGEMM_ERROR_RUNTIME).

Pre-quantized operands (Context.plan(..., scaling="current" or "delayed", lhs_quantized=True
and/or rhs_quantized=True); docs/FP8.md): such an operand is a torch.float8_e4m3fn or
torch.float8_e5m2 tensor (the plan's lhs_format / rhs_format) with its scale_inv, a float32
tensor of one element on the same device, one value for the global tensor (the same on every
rank): gemm(plan, x8, w8, b, lhs_scale_inv=sx, rhs_scale_inv=sw), which calls
torch.ops.cgemm.gemm_scaled(plan_id, lhs, rhs, bias, lhs_scale_inv, rhs_scale_inv) (None for an
operand the plan does not take pre-quantized). Also checked, ValueError naming the operand: FP8
codes where the plan takes an operand unquantized and the reverse, a scale_inv missing, given
for an operand that is not pre-quantized, or not one float32 element on the device; the plain
ops refuse a pre-quantized plan, gemm_scaled any other. Forward-only.

Training (autograd): plans made by linear_plans() carry their backward plans, made with the
forward's (collective, once), with the seed's CollectiveOpSet pairing: an all-gather forward
(a column-parallel layer) has a reduce-scatter dgrad, a reduce-scatter forward (row-parallel)
an all-gather dgrad, a plain GEMM a plain one. The weight gradient of a column-parallel layer
uses the lhs its forward gathered (torch.ops.cgemm.gemm_gathered hands it out, kept for the
backward), of a row-parallel layer the dy its dgrad gathered; bias gradients are dy summed in
float32 over its tokens (the gathered dy for a row-parallel layer). gemm() picks the op. A
plan without backward plans (made by Context.plan), or a quantized one (pre-quantized operands
included), refuses a backward with one message. ColumnParallelLinear and RowParallelLinear are
the layers (Megatron's and Transformer Engine's sequence-parallel pair); with scaling="current"
or "delayed" they train in FP8, forward and backward (_cgemm_torch_fp8.py: grad_format "e5m2"
(HYBRID) or "e4m3", fp8_recipe={margin, amax_history_len, amax_compute_algo}). The layers live
in _cgemm_torch_layers.py; layer.close() destroys their plans before ctx.close().
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
# The FP8 codes of a pre-quantized operand (Context.plan's lhs_quantized / rhs_quantized): only
# operands take them, so linear_plans' dtype stays one of _TORCH_DTYPES.
_FP8_DTYPES = {
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
}
_OPERAND_DTYPES = {**_TORCH_DTYPES, **_FP8_DTYPES}
_FP8 = frozenset(_FP8_DTYPES.values())

# Plans by id: the op's schema takes ints, not Python objects.
_PLANS = {}
_NEXT_ID = itertools.count(1)
# Backward plans by the forward plan's id (linear_plans): kind, dgrad plan id, wgrad plan id.
_BACKWARD = {}


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
    """Forgets the plan, and a linear_plans() plan's backward plans with it (call before
    plan.close() if the registry should not keep them alive)."""
    plan_id = getattr(plan, "_cgemm_torch_id", None)
    if plan_id is not None:
        _PLANS.pop(plan_id, None)
        _BACKWARD.pop(plan_id, None)
        plan._cgemm_torch_id = None
    for backward_plan in getattr(plan, "backward_plans", ()):
        unregister(backward_plan)


def _plan(plan_id):
    try:
        return _PLANS[plan_id]
    except KeyError:
        raise ValueError(f"plan_id {plan_id}: no plan registered (cgemm_torch.register)") \
            from None


def _dtype(info, name):
    try:
        return _OPERAND_DTYPES[info.dtype]
    except KeyError:
        raise ValueError(f"{name}: the plan's dtype {info.dtype} has no torch op here "
                         f"(supported: {', '.join(_OPERAND_DTYPES)})") from None


def _check_operand(tensor, info, name, device):
    if info is None:
        if tensor is not None:
            raise ValueError(f"{name}: the plan has no {name}, pass None")
        return
    if tensor is None:
        raise ValueError(f"{name}: the plan has a {name}, a tensor is needed")
    if tensor.device.type != device.type:
        raise ValueError(f"{name}: a {'CUDA' if device.type == 'cuda' else 'CPU'} tensor is "
                         f"needed, got one on {tensor.device}")
    if tensor.device != device:
        raise ValueError(f"{name}: on {tensor.device}, but lhs is on {device} (one GPU for all)")
    if not tensor.is_contiguous():
        raise ValueError(f"{name}: the tensor must be contiguous (row-major)")
    want = _dtype(info, name)
    # FP8 where the plan wants high precision, or the reverse, is a mistake of kind (the codes
    # mean nothing without their scale_inv), not of width: said apart from the generic message.
    if (tensor.dtype in _FP8) != (want in _FP8):
        if want in _FP8:
            raise ValueError(f"{name}: the plan takes {name} pre-quantized ({want} codes, "
                             f"{name}_quantized=True), got a {tensor.dtype} tensor: quantize "
                             f"it and pass its {name}_scale_inv")
        raise ValueError(f"{name}: an FP8 tensor ({tensor.dtype}) given, but the plan takes "
                         f"{name} unquantized, in {want}" +
                         ("" if name == "bias" else
                          f" (plan it with {name}_quantized=True to pass FP8 codes)"))
    if tensor.dtype != want or tuple(tensor.shape) != info.local_shape:
        raise ValueError(f"{name}: {tensor.dtype} {tuple(tensor.shape)} given, the plan needs "
                         f"{want} {info.local_shape} (this rank's shard)")


def _check_scale_inv(tensor, quantized, name, device):
    """The full check of one scale_inv (lhs_scale_inv / rhs_scale_inv) of a gemm_scaled call:
    given exactly for a pre-quantized operand, one float32 element on the operands' device."""
    operand = name[:3]
    if tensor is None:
        if quantized:
            raise ValueError(f"{name}: the plan takes {operand} pre-quantized: its scale_inv is "
                             "needed (a float32 tensor of one element)")
        return
    if not quantized:
        raise ValueError(f"{name}: given, but the plan does not take {operand} pre-quantized: "
                         "pass None")
    if tensor.dtype != torch.float32 or tensor.numel() != 1 or tensor.device != device:
        raise ValueError(f"{name}: a float32 tensor of one element on {device} is needed, got "
                         f"{tensor.dtype} {tuple(tensor.shape)} on {tensor.device}")


class _Checked:
    """What a call checks its tensors against, computed once per plan (the host time of a call
    is part of every layer's cost): per operand the torch dtype and local shape, and which
    operands are pre-quantized."""

    def __init__(self, plan):
        self.cuda = plan._ctx.backend == "cuda"
        self.quantized = (plan.lhs_quantized, plan.rhs_quantized)
        self.prequantized = plan.prequantized
        self.operands = [(name, info, None if info is None else _dtype(info, name))
                         for name, info in (("lhs", plan.lhs), ("rhs", plan.rhs),
                                            ("bias", plan.bias))]
        self.out_shape, self.out_dtype = plan.out.local_shape, _dtype(plan.out, "out")
        self.gathered_shape = (None if plan.gathered_lhs is None
                               else plan.gathered_lhs.local_shape)


def _fits(tensor, info, dtype, device):
    return (tensor.device == device and tensor.dtype == dtype and
            tensor.shape == info.local_shape and tensor.is_contiguous())


def _fits_scale_inv(tensor, device):
    return tensor.dtype == torch.float32 and tensor.numel() == 1 and tensor.device == device


def _run(plan, lhs, rhs, bias, gathered, scale_invs=None):
    """One cgemm call into new tensors: out, and the gathered lhs when asked for. scale_invs:
    None for the plain ops, (lhs_scale_inv, rhs_scale_inv) for gemm_scaled."""
    checked = plan.__dict__.get("_cgemm_torch_checked")
    if checked is None:
        checked = plan._cgemm_torch_checked = _Checked(plan)
    if scale_invs is None and checked.prequantized:
        raise ValueError(f"plan {plan._cgemm_torch_id}: it takes pre-quantized operands, whose "
                         "scale_inv this op has no argument for: call cgemm_torch.gemm(plan, "
                         "lhs, rhs, bias, lhs_scale_inv=..., rhs_scale_inv=...) "
                         "(torch.ops.cgemm.gemm_scaled)")
    device = lhs.device
    if (device.type == "cuda") != checked.cuda:
        want = "cuda" if checked.cuda else "cpu"
        raise ValueError(f"lhs: a {'CUDA' if want == 'cuda' else 'CPU'} tensor is needed for "
                         f"the {plan._ctx.backend} backend, got one on {device}")
    for tensor, (name, info, dtype) in zip((lhs, rhs, bias), checked.operands):
        # The fast test first; the full one names what is wrong.
        if info is None or tensor is None or not _fits(tensor, info, dtype, device):
            _check_operand(tensor, info, name, device)
    scale_ptrs = (0, 0)
    if scale_invs is not None:
        for tensor, quantized, name in zip(scale_invs, checked.quantized,
                                           ("lhs_scale_inv", "rhs_scale_inv")):
            if not quantized or tensor is None or not _fits_scale_inv(tensor, device):
                _check_scale_inv(tensor, quantized, name, device)
        if not checked.prequantized:
            raise ValueError(f"plan {plan._cgemm_torch_id}: it takes no pre-quantized operand: "
                             "call torch.ops.cgemm.gemm (cgemm_torch.gemm without scale_invs)")
        scale_ptrs = tuple(0 if t is None else t.data_ptr() for t in scale_invs)
    out = torch.empty(checked.out_shape, dtype=checked.out_dtype, device=device)
    g = None
    if gathered:
        g = torch.empty(checked.gathered_shape, dtype=lhs.dtype, device=device)
    # The current stream of the inputs' device: the GEMM follows the work queued there (the
    # inputs' producers) and the work queued after it (the consumers) follows the GEMM. The
    # caching allocator gave `out` for this stream, so no record_stream is needed. The CPU
    # backend ignores the stream (its call returns with out written).
    stream = torch.cuda.current_stream(device).cuda_stream if checked.cuda else 0
    plan._execute_raw(lhs.data_ptr(), rhs.data_ptr(), 0 if bias is None else bias.data_ptr(),
                      out.data_ptr(), stream, 0 if g is None else g.data_ptr(), *scale_ptrs)
    return out, g


@torch.library.custom_op("cgemm::gemm", mutates_args=())
def _gemm_op(plan_id: int, lhs: torch.Tensor, rhs: torch.Tensor,
             bias: Optional[torch.Tensor]) -> torch.Tensor:
    return _run(_plan(plan_id), lhs, rhs, bias, False)[0]


def _check_fake(lhs, rhs, bias, lhs_scale_inv=None, rhs_scale_inv=None):
    """The fake implementations are also the ops' meta-device kernels: a real meta tensor would
    return an unwritten tensor and skip this rank's collective (the others then wait), so meta
    tensors and mixed devices are refused here. Tracing (torch.compile's fake tensors) reports
    the real device, and passes."""
    for name, t in (("lhs", lhs), ("rhs", rhs), ("bias", bias),
                    ("lhs_scale_inv", lhs_scale_inv), ("rhs_scale_inv", rhs_scale_inv)):
        if t is None:
            continue
        if t.device.type == "meta":
            raise ValueError(f"{name}: a meta tensor: a collective GEMM needs real data "
                             "(materialize the module first: to_empty(), then load_state_dict)")
        if t.device != lhs.device:
            raise ValueError(f"{name}: on {t.device}, but lhs is on {lhs.device} (one device "
                             "for all)")


@_gemm_op.register_fake
def _gemm_fake(plan_id, lhs, rhs, bias):
    _check_fake(lhs, rhs, bias)
    plan = _plan(plan_id)
    return lhs.new_empty(plan.out.local_shape, dtype=_dtype(plan.out, "out"))


@torch.library.custom_op("cgemm::gemm_gathered", mutates_args=())
def _gemm_gathered_op(plan_id: int, lhs: torch.Tensor, rhs: torch.Tensor,
                      bias: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """An all-gather plan's call that also returns the lhs it gathered (for the wgrad)."""
    plan = _plan(plan_id)
    if plan.gathered_lhs is None:
        raise ValueError(f"plan {plan_id}: it hands no gathered lhs out (only unquantized "
                         "all-gather plans do)")
    return _run(plan, lhs, rhs, bias, True)


@_gemm_gathered_op.register_fake
def _gemm_gathered_fake(plan_id, lhs, rhs, bias):
    _check_fake(lhs, rhs, bias)
    plan = _plan(plan_id)
    return (lhs.new_empty(plan.out.local_shape, dtype=_dtype(plan.out, "out")),
            lhs.new_empty(plan.gathered_lhs.local_shape))


@torch.library.custom_op("cgemm::gemm_scaled", mutates_args=())
def _gemm_scaled_op(plan_id: int, lhs: torch.Tensor, rhs: torch.Tensor,
                    bias: Optional[torch.Tensor], lhs_scale_inv: Optional[torch.Tensor],
                    rhs_scale_inv: Optional[torch.Tensor]) -> torch.Tensor:
    """A pre-quantized plan's call: each operand the plan takes pre-quantized is FP8 codes
    with its scale_inv (float32, one element, the global tensor's); None for the others.
    Forward-only."""
    return _run(_plan(plan_id), lhs, rhs, bias, False, (lhs_scale_inv, rhs_scale_inv))[0]


@_gemm_scaled_op.register_fake
def _gemm_scaled_fake(plan_id, lhs, rhs, bias, lhs_scale_inv, rhs_scale_inv):
    _check_fake(lhs, rhs, bias, lhs_scale_inv, rhs_scale_inv)
    plan = _plan(plan_id)
    return lhs.new_empty(plan.out.local_shape, dtype=_dtype(plan.out, "out"))


# ---- Autograd: the backward plans of linear_plans(), the seed's pairing. ----

class _Backward:
    """A forward plan's backward: its layer kind, the dgrad and wgrad plan ids, and what is
    gathered (at tp > 1: a column layer's x by its forward, a row layer's dy by its dgrad)."""

    def __init__(self, kind, dgrad, wgrad, gathers):
        self.kind, self.dgrad, self.wgrad = kind, dgrad, wgrad
        self.forward_gathers_x = gathers and kind == "column"
        self.dgrad_gathers_dy = gathers and kind == "row"


def _backward_of(plan_id):
    bw = _BACKWARD.get(plan_id)
    if bw is None:
        _refuse_backward(plan_id)
    return bw


def _refuse_backward(plan_id):
    """Raises the one RuntimeError that says why the plan has no backward."""
    plan = _PLANS.get(plan_id)
    if plan is not None and getattr(plan, "_cgemm_torch_backward_plan", False):
        why = ("it is a backward plan: differentiating a backward (create_graph=True, "
               "double backward) through cgemm is not supported")
    elif plan is not None and getattr(plan, "scaling", "none") != "none":
        why = ("it is quantized (the op's FP8 plans, pre-quantized operands included, are "
               "forward-only; FP8 training: the layers' scaling=, ColumnParallelLinear(...))")
    else:
        why = "it has no backward plans: make it with cgemm_torch.linear_plans(...)"
    raise RuntimeError(f"cgemm plan {plan_id} cannot be differentiated: {why}")


def _sum_tokens(dy):
    """The bias gradient: dy summed over every dim but the last, accumulated in float32."""
    return dy.sum(dim=tuple(range(dy.dim() - 1)), dtype=torch.float32).to(dy.dtype)


def _linear_backward(plan_id, dy, x_full, w, has_bias):
    """dx, dW, db of y = x W^T + b. x_full: every token's x this rank's weight shard saw (the
    forward's gathered lhs for a column layer at tp > 1, else x)."""
    bw = _backward_of(plan_id)
    dy = dy.contiguous()
    if bw.dgrad_gathers_dy:  # a row layer: the all-gather dgrad hands out AG(dy)
        dx, dy_full = torch.ops.cgemm.gemm_gathered(bw.dgrad, dy, w, None)
    else:  # a column layer's reduce-scatter dgrad, or a plain one
        dx, dy_full = torch.ops.cgemm.gemm(bw.dgrad, dy, w, None), dy
    dw = torch.ops.cgemm.gemm(bw.wgrad, dy_full, x_full, None)
    return dx, dw, (_sum_tokens(dy_full) if has_bias else None)


def _setup_gemm(ctx, inputs, output):
    plan_id, lhs, rhs, bias = inputs
    ctx.plan_id, ctx.has_bias = plan_id, bias is not None
    ctx.save_for_backward(lhs, rhs)


def _backward_gemm(ctx, dy):
    lhs, rhs = ctx.saved_tensors
    if _backward_of(ctx.plan_id).forward_gathers_x:
        raise RuntimeError(
            f"cgemm plan {ctx.plan_id}: an all-gather plan's weight gradient needs the lhs its "
            "forward gathered, which torch.ops.cgemm.gemm does not keep: call cgemm_torch.gemm "
            "(torch.ops.cgemm.gemm_gathered when a gradient is needed) or the modules")
    dx, dw, db = _linear_backward(ctx.plan_id, dy, lhs, rhs, ctx.has_bias)
    return None, dx, dw, db


def _setup_gemm_gathered(ctx, inputs, output):
    plan_id, lhs, rhs, bias = inputs
    ctx.plan_id, ctx.has_bias = plan_id, bias is not None
    ctx.save_for_backward(rhs, output[1])
    ctx.set_materialize_grads(False)


def _backward_gemm_gathered(ctx, dy, d_gathered):
    if d_gathered is not None:
        raise RuntimeError("cgemm: no gradient flows through the gathered lhs "
                           "(torch.ops.cgemm.gemm_gathered's second output)")
    rhs, gathered = ctx.saved_tensors
    dx, dw, db = _linear_backward(ctx.plan_id, dy, gathered, rhs, ctx.has_bias)
    return None, dx, dw, db


def _setup_gemm_scaled(ctx, inputs, output):
    ctx.plan_id = inputs[0]


def _backward_gemm_scaled(ctx, dy):
    # A pre-quantized plan is never one of linear_plans(): its backward is always refused
    # (reached by torch.ops.cgemm.gemm_scaled called directly; gemm() refuses before the call).
    _refuse_backward(ctx.plan_id)


torch.library.register_autograd("cgemm::gemm", _backward_gemm, setup_context=_setup_gemm)
torch.library.register_autograd("cgemm::gemm_gathered", _backward_gemm_gathered,
                                setup_context=_setup_gemm_gathered)
torch.library.register_autograd("cgemm::gemm_scaled", _backward_gemm_scaled,
                                setup_context=_setup_gemm_scaled)


def gemm(plan, lhs, rhs, bias=None, *, lhs_scale_inv=None, rhs_scale_inv=None):
    """Collective: lhs @ rhs (+ bias) on this rank's shards; a new tensor of
    plan.out.local_shape. Differentiable for plans of linear_plans(): where a gradient is
    needed, an all-gather plan's call goes through torch.ops.cgemm.gemm_gathered, which keeps
    the gathered lhs for the weight gradient; otherwise torch.ops.cgemm.gemm. A pre-quantized
    plan (Context.plan's lhs_quantized / rhs_quantized) takes those operands as FP8 tensors
    with their lhs_scale_inv / rhs_scale_inv (torch.ops.cgemm.gemm_scaled; forward-only)."""
    plan_id = register(plan)
    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad
        for t in (lhs, rhs, bias, lhs_scale_inv, rhs_scale_inv))
    if plan.prequantized or lhs_scale_inv is not None or rhs_scale_inv is not None:
        if needs_grad and plan.prequantized:  # refused before this rank's collective
            _refuse_backward(plan_id)
        return torch.ops.cgemm.gemm_scaled(plan_id, lhs, rhs, bias, lhs_scale_inv,
                                           rhs_scale_inv)
    if needs_grad and _backward_of(plan_id).forward_gathers_x:
        return torch.ops.cgemm.gemm_gathered(plan_id, lhs, rhs, bias)[0]
    return torch.ops.cgemm.gemm(plan_id, lhs, rhs, bias)


class _LinearLayout:
    """A tensor-parallel Linear layer's layout on ctx's mesh: the activations' global shapes
    [B, S, H] (or [S, B, H]) and specs, the weight's [out, in] spec (torch's layout), the
    collectives of its forward and dgrad (the seed's CollectiveOpSet pairing), and what each
    gathers. Shared by the bf16 plans below and the FP8 ones (_cgemm_torch_fp8.py)."""

    def __init__(self, ctx, kind, tbs):
        if kind not in ("column", "row", "none"):
            raise ValueError(f"kind {kind!r}: 'column', 'row' or 'none'")
        self.kind, self.tbs = kind, bool(tbs)
        self.tpa = tpa = repr(ctx.tpsp_axis)
        self.dpa = repr(ctx.dp_axis) if ctx.dp > 1 else "None"
        act = self.act

        # At tp 1 nothing is sharded: plain GEMMs (a collective plan of one rank would still
        # copy, reorder and sum partials: 1.9 ms of a 25 ms step on the H100,
        # docs/PERFORMANCE.md).
        self.gathers = ctx.tp > 1 and kind != "none"
        self.collective, self.dgrad_collective = "none", "none"
        if kind == "column" and self.gathers:
            self.collective, self.dgrad_collective = "all_gather", "reduce_scatter"
            self.x_spec, self.w_spec, self.b_spec = act(tpa, "None"), f"({tpa}, None)", f"({tpa},)"
            self.dy_spec = act("None", tpa)
        elif kind == "row" and self.gathers:
            self.collective, self.dgrad_collective = "reduce_scatter", "all_gather"
            self.x_spec, self.w_spec, self.b_spec = act("None", tpa), f"(None, {tpa})", "(None,)"
            self.dy_spec = act(tpa, "None")
        else:
            self.x_spec, self.w_spec, self.b_spec = act("None", "None"), "(None, None)", "(None,)"
            self.dy_spec = self.x_spec
        self.forward_gathers_x = self.gathers and kind == "column"
        self.dgrad_gathers_dy = self.gathers and kind == "row"

    def act(self, seq_entry, last_entry, dp=True):
        """An activation's spec [B, S, H] (or [S, B, H]); dp=False: B unsharded."""
        entries = [self.dpa if dp else "None", seq_entry, last_entry]
        if self.tbs:
            entries[0], entries[1] = entries[1], entries[0]
        return "(" + ", ".join(entries) + ")"

    def shape(self, b, s, h):
        return (s, b, h) if self.tbs else (b, s, h)


def _dtype_name(dtype):
    name = {v: k for k, v in _TORCH_DTYPES.items()}.get(dtype)
    if name is None:
        raise ValueError(f"dtype {dtype}: one of {', '.join(map(str, _TORCH_DTYPES.values()))}")
    return name


def linear_plans(ctx, kind, batch, seq_len, in_features, out_features, dtype=torch.float32,
                 bias=True, transpose_batch_sequence=False, name="linear"):
    """Collective: the forward plan of a tensor-parallel Linear layer, its dgrad and wgrad
    plans made with it (registered for autograd). kind "column": x [B, S/tp, in] (or
    [S/tp, B, in]) all-gathered over the tp group, weight [out/tp, in] (torch's [out, in]
    layout, sharded on out), bias [out/tp] -> y [B, S, out/tp]; "row": x [B, S, in/tp],
    weight [out, in/tp], bias [out] -> y [B, S/tp, out] reduce-scattered (partial sums in
    float32); "none": a replicated layer, x [B, S, in] -> [B, S, out]. batch is this dp rank's
    (the global batch is batch x ctx.dp); seq_len the global sequence."""
    lay = _LinearLayout(ctx, kind, transpose_batch_sequence)
    dtype_name = _dtype_name(dtype)
    B = batch * ctx.dp
    K, N = in_features, out_features
    fwd = ctx.plan(lhs_shape=lay.shape(B, seq_len, K), rhs_shape=(N, K),
                   bias_shape=(N,) if bias else None, dtype=dtype_name, lhs_spec=lay.x_spec,
                   rhs_spec=lay.w_spec, bias_spec=lay.b_spec if bias else None,
                   contracting_dims=((-1,), (1,)), collective=lay.collective,
                   transpose_batch_sequence=lay.tbs, name=f"{name}.fwd")
    dgrad = ctx.plan(lhs_shape=lay.shape(B, seq_len, N), rhs_shape=(N, K), dtype=dtype_name,
                     lhs_spec=lay.dy_spec, rhs_spec=lay.w_spec, contracting_dims=((-1,), (0,)),
                     collective=lay.dgrad_collective, transpose_batch_sequence=lay.tbs,
                     name=f"{name}.dgrad")
    # The wgrad: this rank's [out, in] shard from its tokens, a local GEMM contracting the
    # batch and sequence dims: dy (gathered for a row layer) against x (gathered for a column
    # layer), both [B, S, *] (or [S, B, *]).
    dy_local = dgrad.gathered_lhs.local_shape if lay.dgrad_gathers_dy else fwd.out.local_shape
    x_local = fwd.gathered_lhs.local_shape if lay.forward_gathers_x else fwd.lhs.local_shape
    wgrad = ctx.plan(lhs_shape=dy_local, rhs_shape=x_local, dtype=dtype_name,
                     contracting_dims=((0, 1), (0, 1)), collective="none",
                     name=f"{name}.wgrad")
    dgrad._cgemm_torch_backward_plan = wgrad._cgemm_torch_backward_plan = True
    _BACKWARD[register(fwd)] = _Backward(kind, register(dgrad), register(wgrad), lay.gathers)
    fwd.backward_plans = (dgrad, wgrad)  # kept alive with the forward plan
    return fwd


_LAYER_NAMES = ("ColumnParallelLinear", "RowParallelLinear", "init_linear")


def __getattr__(name):
    """The layers, from their own module (_cgemm_torch_layers.py, which imports this one), on
    first use: no import cycle, whichever of the two is imported first."""
    if name in _LAYER_NAMES:
        import _cgemm_torch_layers
        return getattr(_cgemm_torch_layers, name)
    raise AttributeError(f"module 'cgemm_torch' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAYER_NAMES))
