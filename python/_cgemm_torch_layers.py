"""cgemm_torch's tensor-parallel Linear modules, ColumnParallelLinear and RowParallelLinear
(Megatron's and Transformer Engine's sequence-parallel pair), and init_linear, the global
weights they shard: imported into cgemm_torch, where they are documented and used. Their bf16
(or float32) calls go through cgemm_torch.gemm on linear_plans() plans; with scaling "current"
or "delayed" through _cgemm_torch_fp8.linear.
"""

import torch

import cgemm_torch as ct


def init_linear(seed, in_features, out_features, bias=True):
    """The global weight [out, in] and bias [out] (float32, CPU) of a Linear layer drawn from
    `seed` as torch.nn.Linear draws them (uniform in +-1/sqrt(in)): every mesh, and a one-rank
    reference, builds the same global layer from the same seed."""
    g = torch.Generator().manual_seed(seed)
    bound = 1.0 / in_features ** 0.5
    w = torch.empty(out_features, in_features).uniform_(-bound, bound, generator=g)
    b = torch.empty(out_features).uniform_(-bound, bound, generator=g) if bias else None
    return w, b


class _ParallelLinear(torch.nn.Module):
    def __init__(self, ctx, kind, in_features, out_features, bias, dtype, device, seed,
                 transpose_batch_sequence, name, scaling, grad_format, fp8_recipe):
        super().__init__()
        if scaling not in (None, "none", "current", "delayed"):
            raise ValueError(f"scaling {scaling!r}: None, 'current' or 'delayed'")
        if grad_format not in ("e4m3", "e5m2"):
            raise ValueError(f"grad_format {grad_format!r}: 'e5m2' (HYBRID) or 'e4m3'")
        # FP8 (_cgemm_torch_fp8.py): its plans and quantizers per input shape, the weight's
        # quantizer and its last codes (is_first_microbatch=False reuses them).
        self.scaling = None if scaling == "none" else scaling
        self.grad_format, self.fp8_recipe = grad_format, dict(fp8_recipe or {})
        self._fp8_plans, self._fp8_wq, self._fp8_w = {}, None, None
        tp, r = ctx.tp, ctx.tp_rank
        sharded = out_features if kind == "column" else in_features
        if sharded % tp:
            raise ValueError(f"{'out' if kind == 'column' else 'in'}_features {sharded} is not "
                             f"divisible by tp {tp}")
        self.ctx, self.kind, self.name = ctx, kind, name
        self.in_features, self.out_features = in_features, out_features
        self.transpose_batch_sequence = bool(transpose_batch_sequence)
        if device is None:
            device = ct.local_device() if ctx.backend == "cuda" else torch.device("cpu")
        w, b = init_linear(seed, in_features, out_features, bias)
        if kind == "column":
            n = out_features // tp
            w, b = w[r * n:(r + 1) * n], (None if b is None else b[r * n:(r + 1) * n])
        else:
            k = in_features // tp
            w = w[:, r * k:(r + 1) * k]
        self.weight = torch.nn.Parameter(w.to(device=device, dtype=dtype).contiguous())
        self.bias = (torch.nn.Parameter(b.to(device=device, dtype=dtype).contiguous())
                     if b is not None else None)
        self._plans = {}

    def _plan(self, x):
        if x.dim() != 3:
            raise ValueError(f"{self.name}: input {tuple(x.shape)}: [B, S, H] (or [S, B, H] with "
                             "transpose_batch_sequence) is needed")
        key = (tuple(x.shape), x.dtype)
        plan = self._plans.get(key)
        if plan is None:
            seq_dim, batch_dim = (0, 1) if self.transpose_batch_sequence else (1, 0)
            seq = x.shape[seq_dim] * (self.ctx.tp if self.kind == "column" else 1)
            plan = ct.linear_plans(self.ctx, self.kind, x.shape[batch_dim], seq,
                                   self.in_features, self.out_features, self.weight.dtype,
                                   self.bias is not None, self.transpose_batch_sequence,
                                   self.name)
            self._plans[key] = plan
        return plan

    def forward(self, x, is_first_microbatch=None):
        """is_first_microbatch (FP8 only, TE's): None quantizes the weight on every call; True
        quantizes it and keeps the codes; False reuses them (every rank alike)."""
        if self.scaling:
            import _cgemm_torch_fp8  # the FP8 path: its own module (its ops register on import)
            if x.dim() != 3:
                self._plan(x)  # the shape's message
            return _cgemm_torch_fp8.linear(self, x, is_first_microbatch)
        return ct.gemm(self._plan(x), x.contiguous(), self.weight, self.bias)

    def close(self):
        """Destroys the layer's plans and FP8 quantizers (not collective), so that the context
        can close (cgemm.Context.close refuses while any of its plans is alive); the delayed
        scaling histories go with them. A later call plans again, collectively, as the first
        did; a backward still pending from an earlier call fails (its plans are gone)."""
        for plan in self._plans.values():
            ct.unregister(plan)
            for p in (plan, *getattr(plan, "backward_plans", ())):
                p.close()
        self._plans = {}
        if self._fp8_plans or self._fp8_wq is not None:
            import _cgemm_torch_fp8
            _cgemm_torch_fp8.close(self)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, tp={self.ctx.tp}" +
                (f", scaling={self.scaling}, grad_format={self.grad_format}"
                 if self.scaling else ""))


class ColumnParallelLinear(_ParallelLinear):
    """y = x W^T + b with W's rows (out_features) sharded over the tp group, the input's
    sequence gathered inside the GEMM (sequence parallelism): x [B, S/tp, in] (this rank's
    sequence shard) -> y [B, S, out/tp] (this rank's features). weight: this rank's
    [out/tp, in] shard of the global weight init_linear(seed, ...) draws (so every mesh holds
    the same global layer), bias [out/tp]. Plans are made on the first call of each input shape
    (collective: every rank calls the layer alike). gather_output=True (the output gathered
    over its features) is not implemented: the layer pairs with RowParallelLinear."""

    def __init__(self, ctx, in_features, out_features, bias=True, dtype=torch.float32,
                 device=None, gather_output=False, seed=0, transpose_batch_sequence=False,
                 name="column", scaling=None, grad_format="e5m2", fp8_recipe=None):
        if gather_output:
            raise NotImplementedError("ColumnParallelLinear(gather_output=True): not "
                                      "implemented; its output stays sharded on its features")
        super().__init__(ctx, "column", in_features, out_features, bias, dtype, device, seed,
                         transpose_batch_sequence, name, scaling, grad_format, fp8_recipe)


class RowParallelLinear(_ParallelLinear):
    """y = x W^T + b with W's columns (in_features) sharded over the tp group and the output
    reduce-scattered over the sequence: x [B, S, in/tp] (a ColumnParallelLinear's output) ->
    y [B, S/tp, out] (this rank's sequence shard). weight [out, in/tp], bias [out] (the whole,
    replicated: its gradient sums every rank's tokens). Plans as ColumnParallelLinear's."""

    def __init__(self, ctx, in_features, out_features, bias=True, dtype=torch.float32,
                 device=None, input_is_parallel=True, seed=0, transpose_batch_sequence=False,
                 name="row", scaling=None, grad_format="e5m2", fp8_recipe=None):
        if not input_is_parallel:
            raise NotImplementedError("RowParallelLinear(input_is_parallel=False): not "
                                      "implemented; its input is a ColumnParallelLinear's output")
        super().__init__(ctx, "row", in_features, out_features, bias, dtype, device, seed,
                         transpose_batch_sequence, name, scaling, grad_format, fp8_recipe)
