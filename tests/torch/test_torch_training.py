"""PyTorch training through cgemm (python/cgemm_torch.py) under mpirun: the autograd of the ops,
the tensor-parallel Linear modules, torch.compile's tracing, the refusals, and pre-quantized FP8
operands (torch.ops.cgemm.gemm_scaled, forward-only).

--device cpu (CI): CPU tensors on cgemm's CPU backend. --device cuda (the GPU machine): CUDA
tensors on the CUDA backend, ranks sharing the GPU with gpu_sharing. Every rank draws the same
global tensors from one seed (argv; printed) and passes its shards; the reference is the
global layer in float64 on the CPU. Prints "skipped: ..." and exits 0 without torch.

    mpirun -np N python tests/torch/test_torch_training.py [SEED] [--device cpu|cuda]
"""

import argparse
import io
import os
import sys
import time
import traceback
import zlib

try:
    import torch
except ImportError:
    print("skipped: no torch")
    sys.exit(0)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))
import cgemm  # noqa: E402
import cgemm_torch as ct  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("seed", nargs="?", type=int, default=12345)
parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
args = parser.parse_args()
if args.device == "cuda" and not torch.cuda.is_available():
    print("skipped: no GPU")
    sys.exit(0)
torch.backends.cuda.matmul.allow_tf32 = False
ctx = cgemm.Context(backend="cuda" if args.device == "cuda" else "cpu",
                    gpu_sharing=args.device == "cuda")
tp, rank = ctx.tp, ctx.rank
device = ct.local_device() if args.device == "cuda" else torch.device("cpu")
if args.device == "cuda":
    torch.cuda.set_device(device)
if rank == 0:
    print(f"test_torch_training: {ctx.size} rank(s), tp {tp}, torch {torch.__version__}, "
          f"cgemm's {ctx.backend} backend, seed {args.seed}", flush=True)
failures, checks = [], 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print(f"rank {rank}: FAIL: {what}", flush=True)


def gen(salt):
    return torch.Generator().manual_seed(args.seed * 1000003 + salt)


def randn(g, shape, dtype):
    """Fresh values away from 0, rounded to dtype, returned as float64 (what the reference sees)."""
    v = (torch.rand(shape, generator=g, dtype=torch.float64) * 0.75 + 0.25) * \
        (torch.randint(0, 2, shape, generator=g) * 2 - 1)
    return v.to(dtype).double()


def close(got, ref, tol, what):
    got = got.detach().double().cpu()
    if got.shape != ref.shape:
        check(False, f"{what}: shape {tuple(got.shape)}, reference {tuple(ref.shape)}")
        return
    err = ((got - ref).abs().max() / (ref.abs().max() + 1e-30)).item()
    check(err <= tol and torch.isfinite(got).all().item(),
          f"{what}: largest error {err:.3g} of the largest |value| (bound {tol})")


def shard(t, dim, index=None):
    index = rank if index is None else index
    n = t.shape[dim] // tp
    return t.narrow(dim, index * n, n)


TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2}


def test_linear_autograd():
    """y = x W^T + b through each kind's plans: forward and dx, dW, db of sum(y * R) against
    float64, for every kind x dtype x bias x batch/sequence-first."""
    B, S, K, N = 2, 4 * tp, 8 * tp, 4 * tp
    for kind in ("column", "row", "none"):
        for dtype in (torch.float32, torch.bfloat16):
            for bias in (False, True):
                for tbs in (False, True):
                    what = f"{kind} {dtype} bias={bias} tbs={tbs}"
                    g = gen(zlib.crc32(what.encode()))
                    X = randn(g, (S, B, K) if tbs else (B, S, K), dtype)
                    W, b = randn(g, (N, K), dtype), randn(g, (N,), dtype)
                    R = randn(g, X.shape[:2] + (N,), dtype)
                    Y = X @ W.T + (b if bias else 0)
                    dX, dW, db = R @ W, torch.einsum("...n,...k->nk", R, X), R.sum((0, 1))
                    seq = 0 if tbs else 1
                    if kind == "column":
                        x, w, bb, r = shard(X, seq), shard(W, 0), shard(b, 0), shard(R, 2)
                        want = (shard(Y, 2), shard(dX, seq), shard(dW, 0), shard(db, 0))
                    elif kind == "row":
                        x, w, bb, r = shard(X, 2), shard(W, 1), b, shard(R, seq)
                        want = (shard(Y, seq), shard(dX, 2), shard(dW, 1), db)
                    else:
                        x, w, bb, r, want = X, W, b, R, (Y, dX, dW, db)
                    plan = ct.linear_plans(ctx, kind, B, S, K, N, dtype, bias, tbs, name=what)
                    leaves = [t.to(dtype).to(device).contiguous().requires_grad_()
                              for t in (x, w, bb)]
                    y = ct.gemm(plan, leaves[0], leaves[1], leaves[2] if bias else None)
                    (y.double() * r.to(device)).sum().backward()
                    tol = TOL[dtype]
                    close(y, want[0], tol, f"{what}: y")
                    close(leaves[0].grad, want[1], tol, f"{what}: dx")
                    close(leaves[1].grad, want[2], tol, f"{what}: dW")
                    if bias:
                        close(leaves[2].grad, want[3], tol, f"{what}: db")
                    check(y.grad_fn is not None, f"{what}: the output has no grad_fn")


def block_params(seed, H, F):
    return ct.init_linear(seed, H, F), ct.init_linear(seed + 1, F, H)


class TPBlock(torch.nn.Module):
    """Pre-norm MLP: x + row(gelu(column(norm(x)))), on sequence shards."""

    def __init__(self, H, F, dtype, seed):
        super().__init__()
        self.norm = torch.nn.LayerNorm(H, elementwise_affine=False, dtype=dtype, device=device)
        self.up = ct.ColumnParallelLinear(ctx, H, F, dtype=dtype, seed=seed, name="up")
        self.down = ct.RowParallelLinear(ctx, F, H, dtype=dtype, seed=seed + 1, name="down")

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def test_modules_and_compile():
    """The modules' shards are the global layer's; state_dict round-trips them; the block's
    grads equal the plain block's; torch.compile (aot_eager: fake tensors and the traced
    backward) gives the eager bits."""
    H, F, B, S = 8 * tp, 16 * tp, 2, 4 * tp
    blk = TPBlock(H, F, torch.float32, seed=args.seed)
    (w1, b1), (w2, b2) = block_params(args.seed, H, F)
    check(torch.equal(blk.up.weight.detach().cpu(), shard(w1, 0)), "column weight shard")
    check(torch.equal(blk.up.bias.detach().cpu(), shard(b1, 0)), "column bias shard")
    check(torch.equal(blk.down.weight.detach().cpu(), shard(w2, 1)), "row weight shard")
    check(torch.equal(blk.down.bias.detach().cpu(), b2), "row bias (whole)")
    buf = io.BytesIO()
    torch.save(blk.state_dict(), buf)
    other = TPBlock(H, F, torch.float32, seed=args.seed + 7)
    check(not torch.equal(other.up.weight, blk.up.weight), "another seed, other weights")
    buf.seek(0)
    other.load_state_dict(torch.load(buf))
    check(all(torch.equal(a, b) for a, b in zip(other.state_dict().values(),
                                                blk.state_dict().values())),
          "state_dict round trip")
    g = gen(5)
    X = randn(g, (B, S, H), torch.float32)
    x = shard(X, 1).float().to(device).requires_grad_()
    y = blk(x)
    y.square().sum().backward()
    # The plain block on the global tensors, float64.
    ref_x = X.clone().requires_grad_()
    h = torch.nn.functional.layer_norm(ref_x, (H,))
    ref_y = ref_x + torch.nn.functional.gelu(h @ w1.double().T + b1.double()) @ w2.double().T \
        + b2.double()
    ref_y.square().sum().backward()
    close(y, shard(ref_y.detach(), 1), 1e-5, "block output")
    close(x.grad, shard(ref_x.grad, 1), 1e-5, "block dx")
    grads = {n: p.grad.clone() for n, p in blk.named_parameters()}
    compiled = torch.compile(blk, backend="aot_eager")
    for p in blk.parameters():
        p.grad = None
    x2 = x.detach().clone().requires_grad_()
    y2 = compiled(x2)
    y2.square().sum().backward()
    check(torch.equal(y2, y), "torch.compile (aot_eager): output bits")
    for n, p in blk.named_parameters():
        check(torch.equal(p.grad, grads[n]), f"torch.compile (aot_eager): {n}.grad bits")


def test_refusals():
    """A backward that cannot run says why, once, before any collective (same on every rank)."""
    B, S, K, N = 2, 4 * tp, 16 * tp, 16 * tp  # FP8: K a multiple of 16
    x = torch.ones(B, S // tp, K, device=device, requires_grad=True)
    plain = ctx.plan(lhs_shape=(B, S, K), rhs_shape=(K, N), dtype="float32",
                     lhs_spec="(None, 'tpsp', None)", rhs_spec="(None, 'tpsp')",
                     collective="all_gather", name="no_backward")
    w = torch.ones(K, N // tp, device=device)
    try:
        ct.gemm(plain, x, w)
        check(False, "a plan without backward plans: no error")
    except RuntimeError as e:
        check("linear_plans" in str(e), f"a plan without backward plans: {e}")
    fp8 = ctx.plan(lhs_shape=(B, S, K), rhs_shape=(K, N), dtype="float32",
                   lhs_spec="(None, 'tpsp', None)", rhs_spec="(None, 'tpsp')",
                   collective="all_gather", scaling="current", name="fp8")
    try:
        ct.gemm(fp8, x, w)
        check(False, "an FP8 plan with requires_grad: no error")
    except RuntimeError as e:
        check("forward-only" in str(e), f"an FP8 plan with requires_grad: {e}")
    with torch.no_grad():
        check(ct.gemm(fp8, x, w).shape == (B, S, N // tp), "an FP8 plan without grad runs")
    col = ct.linear_plans(ctx, "column", B, S, K, N, torch.float32, False, name="raw")
    wc = torch.ones(N // tp, K, device=device, requires_grad=True)
    y = torch.ops.cgemm.gemm(ct.register(col), x, wc, None)
    if tp == 1:  # nothing gathered: the op's backward has its lhs
        y.sum().backward()
        check(wc.grad is not None, "the raw op's backward at tp 1 gives the weight gradient")
    else:
        try:
            y.sum().backward()
            check(False, "torch.ops.cgemm.gemm's backward on an all-gather plan: no error")
        except RuntimeError as e:
            check("gemm_gathered" in str(e), f"the raw op's backward on an all-gather plan: {e}")
    other = "cuda" if device.type == "cpu" else "cpu"
    if other == "cpu" or torch.cuda.is_available():
        try:
            ct.gemm(col, x.detach().to(other), wc.detach().to(other))
            check(False, "tensors on the other device kind: no error")
        except ValueError as e:
            check("tensor is needed" in str(e), f"tensors on the other device kind: {e}")
    try:
        ct.ColumnParallelLinear(ctx, K, N, gather_output=True)
        check(False, "gather_output=True: no error")
    except NotImplementedError:
        check(True, "")
    # Meta tensors (deferred init) would skip this rank's collective: refused on every rank.
    meta = ct.ColumnParallelLinear(ctx, K, N, device="meta", name="meta")
    try:
        meta(x.detach())
        check(False, "a module on the meta device: no error")
    except ValueError as e:
        check("meta tensor" in str(e), f"a module on the meta device: {e}")
    # A double backward says so.
    lin = ct.ColumnParallelLinear(ctx, K, N, name="double", device=device)
    xg = x.detach().clone().requires_grad_()
    (gx,) = torch.autograd.grad(lin(xg).square().sum(), xg, create_graph=True)
    try:
        gx.sum().backward()
        check(False, "a double backward: no error")
    except RuntimeError as e:
        check("double backward" in str(e), f"a double backward: {e}")


def expect_error(call, error, fragments, what):
    """call() raises `error` whose message holds every fragment (the problem and the operand)."""
    try:
        call()
        check(False, f"{what}: no error")
    except error as e:
        check(all(f in str(e) for f in fragments), f"{what}: {type(e).__name__}: {e}")


def quantize(X, fp8):
    """FP8 codes of the global tensor X (float64) as a per-tensor current-scaling quantizer makes
    them: scale = fp8_max / amax, codes = X scale cast to fp8 (clamped: torch's cast gives NaN
    past the range), scale_inv = 1 / scale (float32, one element). Every rank holds X, so its
    amax is the max-reduce of the ranks' shards' amaxes: one scale_inv for the global tensor,
    the same on every rank, as cgemm requires. Also the dequantized values, float64."""
    fmax = torch.finfo(fp8).max
    scale = torch.tensor([fmax / X.abs().max().item()], dtype=torch.float32)
    codes = (X.float() * scale).clamp(-fmax, fmax).to(fp8)
    scale_inv = 1.0 / scale
    return codes, scale_inv, codes.double() * scale_inv.double()


def test_prequantized():
    """Pre-quantized operands (Context.plan's lhs_quantized / rhs_quantized) through
    cgemm_torch.gemm's scale_invs: an all-gather plan (both e4m3, fp32 out, bias) and a
    reduce-scatter plan (e5m2 x e4m3, bf16 out) against the float64 product of the dequantized
    codes, element by element: fp32 accumulation of the exact FP8 products on the CPU (cuBLASLt's
    fast accumulation on CUDA, test_prequantized.cpp's 2e-3) plus the output's rounding; a plan
    quantizing its lhs itself with a pre-quantized rhs within the e4m3 bound. Then each refusal:
    one ValueError naming the operand (RuntimeError for a gradient), before any collective."""
    B, S, K, N = 2, 4 * tp, 16 * tp, 8 * tp  # FP8: the local K a multiple of 16
    acc = 1e-5 if device.type == "cpu" else 2e-3
    kw = dict(lhs_shape=(B, S, K), rhs_shape=(N, K), contracting_dims=((-1,), (1,)),
              scaling="current")  # the rhs is a [K, N] weight's colwise copy [N, K]
    cases = {  # collective: specs, formats (lhs, rhs), out dtype (None: the plan's), bias
        "all_gather": ("(None, 'tpsp', None)", "('tpsp', None)", ("e4m3", "e4m3"), "float32",
                       True),
        "reduce_scatter": ("(None, None, 'tpsp')", "(None, 'tpsp')", ("e5m2", "e4m3"), None,
                           False),
    }
    fp8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    for collective, (x_spec, w_spec, (fx, fw), out_dtype, bias) in cases.items():
        g = gen(zlib.crc32(collective.encode()))
        X8, sx, Xd = quantize(randn(g, (B, S, K), torch.float64) * 3.0, fp8[fx])
        W8, sw, Wd = quantize(randn(g, (N, K), torch.float64) * 0.1, fp8[fw])
        bg = randn(g, (N,), torch.bfloat16)
        ref = torch.einsum("bsk,nk->bsn", Xd, Wd) + (bg if bias else 0)
        mag = torch.einsum("bsk,nk->bsn", Xd.abs(), Wd.abs()) + (bg.abs() if bias else 0)
        plan = ctx.plan(**kw, bias_shape=(N,) if bias else None, dtype="bfloat16",
                        out_dtype=out_dtype, lhs_spec=x_spec, rhs_spec=w_spec,
                        bias_spec="('tpsp',)" if bias else None, collective=collective,
                        lhs_format=fx, rhs_format=fw, lhs_quantized=True, rhs_quantized=True,
                        name=f"pre {collective}")
        x = X8[plan.lhs.slices].contiguous().to(device)
        w = W8[plan.rhs.slices].contiguous().to(device)
        b = (bg[plan.bias.slices].to(getattr(torch, plan.bias.dtype)).contiguous().to(device)
             if bias else None)  # the bias in the out dtype
        y = ct.gemm(plan, x, w, b, lhs_scale_inv=sx.to(device), rhs_scale_inv=sw.to(device))
        want = torch.float32 if out_dtype else torch.bfloat16
        # bf16 out (unit roundoff 2^-8): the result is rounded once, and a reduce-scatter's
        # partials (each K shard's product, kept in the out dtype) once each before their sum.
        rounding = ref.abs()
        if collective == "reduce_scatter":
            rounding = rounding + sum(torch.einsum("bsk,nk->bsn", shard(Xd, 2, i),
                                                   shard(Wd, 1, i)).abs() for i in range(tp))
        rounding = rounding * (0.0 if out_dtype else 2.0 ** -8)
        err = (y.double().cpu() - ref[plan.out.slices]).abs()
        bad = (err > acc * mag[plan.out.slices] + rounding[plan.out.slices])
        check(y.dtype == want and tuple(y.shape) == plan.out.local_shape and
              int(bad.sum()) == 0 and torch.isfinite(y).all().item(),
              f"pre-quantized {collective}: {y.dtype} {tuple(y.shape)}, {int(bad.sum())} "
              f"elements off the dequantized product (largest error {err.max().item():.3g})")
        if collective == "all_gather":
            pre, pre_args = plan, (x, w, b, sx.to(device), sw.to(device))
    x, w, b, sx, sw = pre_args  # the all-gather plan's, for the refusals
    pid = ct.register(pre)

    # The lhs quantized by the plan (its global amax), the rhs pre-quantized: within e4m3's
    # rounding (2^-4 of each product's magnitude).
    g = gen(7)
    Xf = randn(g, (B, S, K), torch.float32)
    W8, sw8, Wd = quantize(randn(g, (N, K), torch.float64), torch.float8_e4m3fn)
    mixed = ctx.plan(**kw, dtype="float32", lhs_spec="(None, 'tpsp', None)",
                     rhs_spec="('tpsp', None)", collective="all_gather", rhs_quantized=True,
                     name="mixed")
    xm = Xf[mixed.lhs.slices].float().contiguous().to(device)
    wm = W8[mixed.rhs.slices].contiguous().to(device)
    y = ct.gemm(mixed, xm, wm, rhs_scale_inv=sw8.to(device))
    ref = torch.einsum("bsk,nk->bsn", Xf, Wd)[mixed.out.slices]
    bound = (2.0 ** -4 + acc) * torch.einsum("bsk,nk->bsn", Xf.abs(), Wd.abs())[mixed.out.slices]
    check(bool(((y.double().cpu() - ref).abs() <= bound).all()),
          "lhs quantized by the plan, rhs pre-quantized: beyond the e4m3 bound")

    # The refusals.
    sw8 = sw8.to(device)
    expect_error(lambda: ct.gemm(mixed, xm.to(torch.float8_e4m3fn), wm, rhs_scale_inv=sw8),
                 ValueError, ("lhs:", "FP8 tensor", "unquantized"),
                 "FP8 codes for an unquantized lhs")
    expect_error(lambda: ct.gemm(pre, x, w.float(), b, lhs_scale_inv=sx, rhs_scale_inv=sw),
                 ValueError, ("rhs:", "pre-quantized"), "float32 for a pre-quantized rhs")
    expect_error(lambda: ct.gemm(pre, x, w, b, rhs_scale_inv=sw), ValueError,
                 ("lhs_scale_inv:", "needed"), "a missing lhs_scale_inv")
    expect_error(lambda: ct.gemm(mixed, xm, wm, lhs_scale_inv=sw8, rhs_scale_inv=sw8),
                 ValueError, ("lhs_scale_inv:", "not take lhs pre-quantized"),
                 "an lhs_scale_inv for a plan-quantized lhs")
    for bad, fragment in ((sw.double(), "float64"), (sw.repeat(2), "(2,)")):
        expect_error(lambda: ct.gemm(pre, x, w, b, lhs_scale_inv=sx, rhs_scale_inv=bad),
                     ValueError, ("rhs_scale_inv:", "float32 tensor of one element", fragment),
                     f"an rhs_scale_inv of {fragment}")
    # Another device: the real kernel refuses a CPU scale_inv beside CUDA operands; beside CPU
    # operands a meta one sends the call to the fake, which refuses it.
    other = torch.device("meta" if device.type == "cpu" else "cpu")
    expect_error(lambda: ct.gemm(pre, x, w, b, lhs_scale_inv=sx, rhs_scale_inv=sw.to(other)),
                 ValueError, ("rhs_scale_inv:", str(other.type)), "an rhs_scale_inv elsewhere")
    expect_error(lambda: torch.ops.cgemm.gemm(pid, x, w, b), ValueError,
                 ("pre-quantized", "gemm_scaled"), "torch.ops.cgemm.gemm on a pre-quantized plan")
    plain = ct.linear_plans(ctx, "none", B, S, K, N, torch.float32, False, name="plain")
    xp, wp = torch.ones(B, S, K, device=device), torch.ones(N, K, device=device)
    expect_error(lambda: torch.ops.cgemm.gemm_scaled(ct.register(plain), xp, wp, None, None,
                                                     None),
                 ValueError, ("no pre-quantized operand",), "gemm_scaled on a plain plan")
    expect_error(lambda: ct.gemm(plain, xp, wp, rhs_scale_inv=sw), ValueError,
                 ("rhs_scale_inv:", "pass None"), "an rhs_scale_inv for a plain plan")
    # Autograd: refused before the call by gemm(), in the backward by the raw op.
    expect_error(lambda: ct.gemm(mixed, xm.clone().requires_grad_(), wm, rhs_scale_inv=sw8),
                 RuntimeError, ("forward-only",), "a gradient through a pre-quantized plan")
    y = torch.ops.cgemm.gemm_scaled(ct.register(mixed), xm.clone().requires_grad_(), wm, None,
                                    None, sw8)
    expect_error(lambda: y.sum().backward(), RuntimeError, ("forward-only",),
                 "gemm_scaled's backward")


tests = [test_linear_autograd, test_modules_and_compile, test_refusals, test_prequantized]
start = time.time()
for t in tests:
    before = len(failures)
    try:
        t()
    except Exception:  # noqa: BLE001
        failures.append(f"{t.__name__} raised")
        print(f"rank {rank}: {t.__name__} raised:\n{traceback.format_exc()}", flush=True)
    if rank == 0:
        print(f"  {t.__name__}: {'PASS' if len(failures) == before else 'FAIL'}", flush=True)
if rank == 0 or failures:
    print(f"rank {rank}: {checks} checks, {len(failures)} failed, {time.time() - start:.1f} s",
          flush=True)
sys.exit(1 if failures else 0)
