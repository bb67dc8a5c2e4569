"""FP8 training in cgemm_torch's layers (ColumnParallelLinear / RowParallelLinear with
scaling="current" or "delayed"), as Transformer Engine's Linear runs it on Hopper and as cgemm's
C++ layer pair does (runtime/src/layers/linear_fp8.hpp): every GEMM of the forward and the
backward in FP8, the forward e4m3 x e4m3, the gradients in grad_format (e5m2: TE's HYBRID recipe;
e4m3 as an option).

What is quantized, once, and where each GEMM reads it (cgemm.QuantizedTensor: one scale_inv per
tensor, its amax max-reduced over every rank; Hopper's FP8 GEMM contracts both operands on their
last dim, so a GEMM contracting an operand's leading dim reads its transposed (colwise) copy):
  - the weight [out_l, in_l]: rowwise for the forward, colwise [in_l, out_l] for the dgrad;
    quantized on every forward, or, as TE's is_first_microbatch, once per optimizer step: True
    on a step's first micro-batch quantizes and keeps the codes, False on the others reuses
    them (so delayed scaling's history advances once per step, as TE's);
  - x: rowwise for the forward; a column layer's all-gather moves the FP8 codes and hands them
    out, and the wgrad reads them transposed (torch transposes the codes); a row layer's x keeps
    its colwise copy for the wgrad;
  - dy: rowwise for the dgrad; a row layer's all-gather dgrad hands the gathered codes to the
    wgrad (transposed by torch), a column layer's dy keeps its colwise copy.
The bias gradient is summed from the unquantized dy (as TE's): a row layer's over every
token of the tp group, by a GEMM of dy with ones reduced over tp (float32 sums, one rounding).
Sizes: FP8 GEMMs want the feature dims and the tokens of the wgrad in multiples of 16 (the plans
refuse others by name). The ops are custom ops (torch.compile traces them); the layer's caches
are Python state, so the FP8 layers run eagerly.
"""

import itertools
from typing import Optional

import torch

import cgemm_torch as ct

_FORMATS = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
_TENSORS = {}  # cgemm.QuantizedTensor by id: custom ops take ints
_NEXT_ID = itertools.count(1)


def _register(tensor):
    tid = next(_NEXT_ID)
    _TENSORS[tid] = tensor
    return tid


def _stream(t):
    # torch's default stream is the legacy stream, handle 0, which the C API reads as "the
    # backend's stream 0" (not ordered with torch's work): cudaStreamLegacy is 1 (as cgemm.py's
    # _execute_raw passes it).
    return (torch.cuda.current_stream(t.device).cuda_stream or 1) if t.is_cuda else 0


@torch.library.custom_op("cgemm::quantize", mutates_args=())
def _quantize_op(tensor_id: int, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor,
                                                             torch.Tensor]:
    """cgemm.QuantizedTensor.quantize on a torch tensor [R, C]: (rowwise [R, C], colwise
    [C, R], scale_inv [1]); a copy the quantizer does not keep is an empty tensor. Collective."""
    q = _TENSORS[tensor_id]
    want = ct._TORCH_DTYPES[q.dtype]
    if tuple(src.shape) != q.shape or src.dtype != want or not src.is_contiguous():
        raise ValueError(f"quantize: {src.dtype} {tuple(src.shape)} given, the quantizer takes "
                         f"a contiguous {want} {q.shape}")
    (r, c), fmt = q.shape, _FORMATS[q.format]
    row = src.new_empty((r, c) if q.rowwise else (0,), dtype=fmt)
    col = src.new_empty((c, r) if q.colwise else (0,), dtype=fmt)
    scale_inv = src.new_empty((1,), dtype=torch.float32)
    q.quantize_pointers(src.data_ptr(), row.data_ptr() if q.rowwise else 0,
                        col.data_ptr() if q.colwise else 0, scale_inv.data_ptr(), _stream(src))
    return row, col, scale_inv


@_quantize_op.register_fake
def _quantize_fake(tensor_id, src):
    q = _TENSORS[tensor_id]
    (r, c), fmt = q.shape, _FORMATS[q.format]
    return (src.new_empty((r, c) if q.rowwise else (0,), dtype=fmt),
            src.new_empty((c, r) if q.colwise else (0,), dtype=fmt),
            src.new_empty((1,), dtype=torch.float32))


@torch.library.custom_op("cgemm::gemm_scaled_gathered", mutates_args=())
def _gemm_scaled_gathered_op(plan_id: int, lhs: torch.Tensor, rhs: torch.Tensor,
                             bias: Optional[torch.Tensor], lhs_scale_inv: torch.Tensor,
                             rhs_scale_inv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A pre-quantized all-gather plan's call that also returns the FP8 codes it gathered."""
    plan = ct._plan(plan_id)
    if plan.gathered_lhs is None or not plan.lhs_quantized:
        raise ValueError(f"plan {plan_id}: gemm_scaled_gathered needs an all-gather plan with "
                         "a pre-quantized lhs")
    return ct._run(plan, lhs, rhs, bias, True, (lhs_scale_inv, rhs_scale_inv))


@_gemm_scaled_gathered_op.register_fake
def _gemm_scaled_gathered_fake(plan_id, lhs, rhs, bias, lhs_scale_inv, rhs_scale_inv):
    ct._check_fake(lhs, rhs, bias, lhs_scale_inv, rhs_scale_inv)
    plan = ct._plan(plan_id)
    return (lhs.new_empty(plan.out.local_shape, dtype=ct._dtype(plan.out, "out")),
            lhs.new_empty(plan.gathered_lhs.local_shape))


def _codes_transposed(codes, cols):
    """FP8 codes [..., cols] as [cols, tokens] (the byte transpose: no arithmetic on codes)."""
    u8 = codes.view(torch.uint8).reshape(-1, cols)
    return u8.t().contiguous().view(codes.dtype)


class _Fp8Plans:
    """One input shape's FP8 plans and quantizers of a layer (collective to make)."""

    def __init__(self, layer, x_local_shape, batch, seq):
        ctx, kind, name = layer.ctx, layer.kind, layer.name
        lay = ct._LinearLayout(ctx, kind, layer.transpose_batch_sequence)
        dtype = ct._dtype_name(layer.weight.dtype)
        K, N, B = layer.in_features, layer.out_features, batch * ctx.dp
        fp8 = dict(scaling=layer.scaling, lhs_quantized=True, rhs_quantized=True,
                   **layer.fp8_recipe)
        has_bias = layer.bias is not None
        self.fwd = ctx.plan(lhs_shape=lay.shape(B, seq, K), rhs_shape=(N, K),
                            bias_shape=(N,) if has_bias else None, dtype=dtype,
                            lhs_spec=lay.x_spec, rhs_spec=lay.w_spec,
                            bias_spec=lay.b_spec if has_bias else None,
                            contracting_dims=((-1,), (1,)), collective=lay.collective,
                            transpose_batch_sequence=lay.tbs, lhs_format="e4m3",
                            rhs_format="e4m3", name=f"{name}.fp8.fwd", **fp8)
        # The dgrad reads the weight's colwise copy [in, out]: its spec is w_spec's reversed.
        wt_spec = "(" + ", ".join(reversed(lay.w_spec.strip("()").split(", "))) + ")"
        self.dgrad = ctx.plan(lhs_shape=lay.shape(B, seq, N), rhs_shape=(K, N), dtype=dtype,
                              lhs_spec=lay.dy_spec, rhs_spec=wt_spec,
                              contracting_dims=((-1,), (1,)), collective=lay.dgrad_collective,
                              transpose_batch_sequence=lay.tbs, lhs_format=layer.grad_format,
                              rhs_format="e4m3", name=f"{name}.fp8.dgrad", **fp8)
        dy_local = (self.dgrad.gathered_lhs.local_shape if lay.dgrad_gathers_dy
                    else self.fwd.out.local_shape)
        x_full = (self.fwd.gathered_lhs.local_shape if lay.forward_gathers_x
                  else tuple(x_local_shape))
        tokens = dy_local[0] * dy_local[1]
        n_l, k_l = dy_local[-1], x_full[-1]
        self.wgrad = ctx.plan(lhs_shape=(n_l, tokens), rhs_shape=(k_l, tokens), dtype=dtype,
                              contracting_dims=((1,), (1,)), lhs_format=layer.grad_format,
                              rhs_format="e4m3", name=f"{name}.fp8.wgrad", **fp8)
        # A row layer's bias gradient sums every token of the tp group: dy [b, S/tp, N] against
        # ones [b, S/tp, 1], contracting the tokens sharded over tp: the all-reduce in float32.
        self.dbias = None
        if has_bias and lay.dgrad_gathers_dy:
            spec = lay.act(lay.tpa, "None", dp=False)  # this dp rank's tokens only
            self.dbias = ctx.plan(lhs_shape=lay.shape(batch, seq, N),
                                  rhs_shape=lay.shape(batch, seq, 1), dtype=dtype,
                                  lhs_spec=spec, rhs_spec=spec,
                                  contracting_dims=((0, 1), (0, 1)), name=f"{name}.dbias")
            self.ones = torch.ones(self.dbias.rhs.local_shape, dtype=layer.weight.dtype,
                                   device=layer.weight.device)
        rows = x_local_shape[0] * x_local_shape[1]
        qkw = dict(dtype=dtype, scaling=layer.scaling, **layer.fp8_recipe)
        self._quantizers = [
            ctx.quantized_tensor((rows, k_l), format="e4m3", colwise=not lay.forward_gathers_x,
                                 name=f"{name}.x", **qkw),
            ctx.quantized_tensor((self.fwd.out.local_shape[0] * self.fwd.out.local_shape[1],
                                  n_l), format=layer.grad_format,
                                 colwise=not lay.dgrad_gathers_dy, name=f"{name}.dy", **qkw)]
        self.qx, self.qdy = (_register(q) for q in self._quantizers)
        self.ids = tuple(ct.register(p) for p in (self.fwd, self.dgrad, self.wgrad))
        self.lay, self.k_l, self.n_l = lay, k_l, n_l

    def close(self):
        for plan in (self.fwd, self.dgrad, self.wgrad, self.dbias):
            if plan is not None:
                ct.unregister(plan)
                plan.close()
        for tid in (self.qx, self.qdy):
            _TENSORS.pop(tid).close()


def close(layer):
    """The layer's FP8 plans and quantizers destroyed (ColumnParallelLinear.close)."""
    for p in layer._fp8_plans.values():
        p.close()
    if layer._fp8_wq is not None:
        _TENSORS.pop(layer._fp8_wq).close()
    layer._fp8_plans, layer._fp8_wq, layer._fp8_w = {}, None, None


class _Fp8Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, weight_codes, p):
        w8, w8t, sw = weight_codes
        x8, x8t, sx = torch.ops.cgemm.quantize(p.qx, x.reshape(-1, x.shape[-1]))
        x8 = x8.view(x.shape)
        fwd = p.ids[0]
        if p.lay.forward_gathers_x:  # the wgrad reads the codes the all-gather brought
            y, x8t = torch.ops.cgemm.gemm_scaled_gathered(fwd, x8, w8, bias, sx, sw)
        else:
            y = torch.ops.cgemm.gemm_scaled(fwd, x8, w8, bias, sx, sw)
        ctx.save_for_backward(x8t, sx, w8t, sw)
        ctx.p, ctx.has_bias = p, bias is not None
        return y

    @staticmethod
    def backward(ctx, dy):
        x8t, sx, w8t, sw = ctx.saved_tensors
        p = ctx.p
        dgrad, wgrad = p.ids[1], p.ids[2]
        dy = dy.contiguous()
        dy8, dy8t, sdy = torch.ops.cgemm.quantize(p.qdy, dy.reshape(-1, dy.shape[-1]))
        dy8 = dy8.view(dy.shape)
        if p.lay.dgrad_gathers_dy:
            dx, dy_full = torch.ops.cgemm.gemm_scaled_gathered(dgrad, dy8, w8t, None, sdy, sw)
            dy8t = _codes_transposed(dy_full, p.n_l)
        else:
            dx = torch.ops.cgemm.gemm_scaled(dgrad, dy8, w8t, None, sdy, sw)
        if p.lay.forward_gathers_x:
            x8t = _codes_transposed(x8t, p.k_l)
        dw = torch.ops.cgemm.gemm_scaled(wgrad, dy8t, x8t, None, sdy, sx)
        db = None
        if ctx.has_bias:
            db = (ct._sum_tokens(dy) if p.dbias is None else
                  torch.ops.cgemm.gemm(ct.register(p.dbias), dy, p.ones, None).view(-1))
        return dx, dw, db, None, None


def weight_codes(layer, is_first_microbatch):
    """The layer's weight quantized (rowwise [out_l, in_l], colwise [in_l, out_l], scale_inv),
    as TE's is_first_microbatch: None quantizes on every call; True quantizes and keeps the
    codes; False reuses the kept codes (the weight unchanged since: the caller says so, the same
    on every rank, since quantizing is collective)."""
    if is_first_microbatch is False:
        if layer._fp8_w is None:
            raise RuntimeError(f"{layer.name}: is_first_microbatch=False, but no call with True "
                               "(or None) quantized the weight before")
        return layer._fp8_w
    w = layer.weight
    if layer._fp8_wq is None:
        layer._fp8_wq = _register(layer.ctx.quantized_tensor(
            tuple(w.shape), dtype=ct._dtype_name(w.dtype), format="e4m3",
            scaling=layer.scaling, name=f"{layer.name}.weight", **layer.fp8_recipe))
    with torch.no_grad():
        layer._fp8_w = torch.ops.cgemm.quantize(layer._fp8_wq, w.detach())
    return layer._fp8_w


def linear(layer, x, is_first_microbatch=None):
    """The layer's FP8 forward (autograd records its FP8 backward)."""
    key = (tuple(x.shape), x.dtype)
    p = layer._fp8_plans.get(key)
    if p is None:
        seq_dim, batch_dim = (0, 1) if layer.transpose_batch_sequence else (1, 0)
        seq = x.shape[seq_dim] * (layer.ctx.tp if layer.kind == "column" else 1)
        p = layer._fp8_plans[key] = _Fp8Plans(layer, tuple(x.shape), x.shape[batch_dim], seq)
    codes = weight_codes(layer, is_first_microbatch)
    return _Fp8Linear.apply(x.contiguous(), layer.weight, layer.bias, codes, p)
