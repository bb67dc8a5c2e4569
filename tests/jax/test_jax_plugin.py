"""cgemm_jax under mpirun (every rank runs this file): the seed's gemm and grouped_gemm served by
cgemm through XLA FFI, against numpy (float64) and jax.numpy on the global arrays.

Every rank draws the same global arrays from a seed that is fresh per run (the clock, passed
as argv[1] by the test's command line; 12345 when none is given; printed) and passes its shard;
each check compares this rank's output with its shard of the reference. XLA allocates the
outputs itself (a caller cannot poison them), so every element is compared: one left unwritten
fails. Exits 1 when any check failed on this rank (mpirun then fails).

    mpirun -np N python tests/jax/test_jax_plugin.py [SEED] [--platform cpu|gpu] [--gpu_sharing]
"""

import argparse
import os
import sys
import time
import traceback
import zlib

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))

parser = argparse.ArgumentParser()
parser.add_argument("seed", nargs="?", type=int, default=None)
parser.add_argument("--platform", default="cpu", choices=("cpu", "gpu"))
parser.add_argument("--gpu_sharing", action="store_true")
args = parser.parse_args()
os.environ.setdefault("JAX_PLATFORMS", "cpu" if args.platform == "cpu" else "cuda")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

# The plain-JAX reference in true float32: on GPUs XLA's default matmul precision is TF32
# (about 1e-3), which cgemm's float32 GEMMs are not.
jax.config.update("jax_default_matmul_precision", "highest")

import cgemm  # noqa: E402
import cgemm_jax as cj  # noqa: E402

world, rank = cj.launcher_world()
ctx = cj.collective_gemm_bootstrap(world, 1, rank, world, gpu_sharing=args.gpu_sharing)
tp = ctx.tp
seed = args.seed if args.seed is not None else 12345
if rank == 0:
    print(f"test_jax_plugin: {world} rank(s), tp {tp}, JAX {jax.__version__} on "
          f"{jax.default_backend()}, cgemm's {ctx.backend} backend, seed {seed}", flush=True)

failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print(f"rank {rank}: FAIL: {what}", flush=True)


def rng(salt):
    return np.random.default_rng([seed, salt])


def randn(r, shape, dtype):
    """Fresh values in [-1, 1) away from 0, rounded to dtype (the reference sees the same)."""
    v = r.uniform(0.25, 1.0, shape) * r.choice([-1.0, 1.0], shape)
    return np.asarray(jnp.asarray(v, dtype).astype(jnp.float32), np.float64)


def close(got, ref, scale, tol, what):
    got = np.asarray(jnp.asarray(got).astype(jnp.float32), np.float64)
    if got.shape != ref.shape:
        check(False, f"{what}: shape {got.shape}, reference {ref.shape}")
        return
    err = np.max(np.abs(got - ref) / scale) if got.size else 0.0
    check(np.isfinite(got).all() and err <= tol, f"{what}: largest relative error {err:.3g} "
          f"(bound {tol})")


TOL = {"float32": 1e-5, "bfloat16": 1e-2}
B, S, K, N = 2, 12, 24, 36  # S, K, N divisible by tp 1..4 (and S, N by 3)


def shard(a, dim, parts, index):
    size = a.shape[dim] // parts
    return np.take(a, range(index * size, (index + 1) * size), axis=dim)


def test_forward_matrix():
    """Every collective x bias x dtype x rhs layout (x sequence-first for the collectives)."""
    for collective in ("none", "all_gather", "reduce_scatter"):
        for dtype in ("float32", "bfloat16"):
            for bias in (False, True):
                for rhs_nk in (False, True):
                    for tbs in ((False, True) if collective != "none" else (False,)):
                        one_forward(collective, dtype, bias, rhs_nk, tbs)


def one_forward(collective, dtype, bias, rhs_nk, tbs):
    what = f"forward {collective} {dtype} bias={bias} rhs={'NK' if rhs_nk else 'KN'} tbs={tbs}"
    r = rng(zlib.crc32(what.encode()))
    jd = jnp.dtype(dtype)
    X = randn(r, (S, B, K) if tbs else (B, S, K), jd)
    W = randn(r, (K, N), jd)
    bv = randn(r, (N,), jd)
    ref = np.einsum("sbk,kn->sbn" if tbs else "bsk,kn->bsn", X, W) + (bv if bias else 0.0)
    scale = np.einsum("sbk,kn->sbn" if tbs else "bsk,kn->bsn", np.abs(X), np.abs(W)) + \
        (np.abs(bv) if bias else 0.0)
    seq = 0 if tbs else 1
    if collective == "none":
        x, w, b, y_ref, y_scale = X, W, bv, ref, scale
    elif collective == "all_gather":
        x, w, b = shard(X, seq, tp, rank), shard(W, 1, tp, rank), shard(bv, 0, tp, rank)
        y_ref, y_scale = shard(ref, 2, tp, rank), shard(scale, 2, tp, rank)
    else:
        x, w, b = shard(X, 2, tp, rank), shard(W, 0, tp, rank), bv
        y_ref, y_scale = shard(ref, seq, tp, rank), shard(scale, seq, tp, rank)
    w_arg = w.T.copy() if rhs_nk else w
    dims = ((-1,), (1,)) if rhs_nk else ((-1,), (0,))
    op = cj.CollectiveOp(collective)
    f = jax.jit(lambda x, w, b: cj.gemm(x, w, b, contracting_dims=dims, collective_op=op,
                                        transpose_batch_sequence=tbs))
    y = f(jnp.asarray(x, jd), jnp.asarray(w_arg, jd), jnp.asarray(b, jd) if bias else None)
    check(y.dtype == jd, f"{what}: output dtype {y.dtype}")
    close(y, y_ref, y_scale, TOL[dtype], what)


def test_forward_nd():
    """Issue 43 item 1: the collectives on N-D layouts: the all-gather with TE's gated-MLP kernel
    [K, 2, N] (sharded on N, its bias [2, N]), the reduce-scatter contracting [B, S, H, D] over
    (H, D) with H on tp; float32 against the fp64 einsum."""
    r = rng(4301)
    X = randn(r, (B, S, K), jnp.float32)
    W = randn(r, (K, 2, N), jnp.float32)
    bv = randn(r, (2, N), jnp.float32)
    ref = np.einsum("bsk,kgn->bsgn", X, W) + bv
    scale = np.einsum("bsk,kgn->bsgn", np.abs(X), np.abs(W)) + np.abs(bv)
    f = jax.jit(lambda x, w, b: cj.gemm(x, w, b, contracting_dims=((2,), (0,)),
                                        collective_op=cj.CollectiveOp.ALL_GATHER))
    y = f(jnp.asarray(shard(X, 1, tp, rank)), jnp.asarray(shard(W, 2, tp, rank)),
          jnp.asarray(shard(bv, 1, tp, rank)))
    close(y, shard(ref, 3, tp, rank), shard(scale, 3, tp, rank), 1e-5, "all_gather [K, 2, N]")
    H, D = 12, 2  # H divisible by tp 1..4
    X = randn(r, (B, S, H, D), jnp.float32)
    W = randn(r, (H, D, N), jnp.float32)
    ref = np.einsum("bshd,hdn->bsn", X, W)
    scale = np.einsum("bshd,hdn->bsn", np.abs(X), np.abs(W))
    f = jax.jit(lambda x, w: cj.gemm(x, w, contracting_dims=((2, 3), (0, 1)),
                                     collective_op=cj.CollectiveOp.REDUCE_SCATTER))
    y = f(jnp.asarray(shard(X, 2, tp, rank)), jnp.asarray(shard(W, 0, tp, rank)))
    close(y, shard(ref, 1, tp, rank), shard(scale, 1, tp, rank), 1e-5,
          "reduce_scatter [B, S, H, D] x [H, D, N]")


def test_eager_call():
    """Outside jit too (JAX compiles the call alone)."""
    r = rng(7)
    X, W = randn(r, (B, S, K), jnp.float32), randn(r, (K, N), jnp.float32)
    y = cj.gemm(jnp.asarray(shard(X, 1, tp, rank), jnp.float32),
                jnp.asarray(shard(W, 1, tp, rank), jnp.float32),
                collective_op=cj.CollectiveOp.ALL_GATHER)
    close(y, shard(X @ W, 2, tp, rank), shard(np.abs(X) @ np.abs(W), 2, tp, rank), 1e-5,
          "eager all-gather call")


def test_fp8_forward():
    """cgemm's per-tensor FP8 inside (current and delayed scaling): within e4m3's bound of the
    unquantized product, not equal to it; its grad is refused (no FP8 backward yet)."""
    Nf, Kf = 16 * tp, 32  # FP8: 16-byte output rows, K a multiple of 16
    r = rng(41)
    X, W = randn(r, (B, S, Kf), jnp.float32), randn(r, (Kf, Nf), jnp.float32)
    x = jnp.asarray(shard(X, 1, tp, rank), jnp.float32)
    w = jnp.asarray(shard(W, 1, tp, rank), jnp.float32)
    ref = shard(np.einsum("bsk,kn->bsn", X, W), 2, tp, rank)
    scale = shard(np.einsum("bsk,kn->bsn", np.abs(X), np.abs(W)), 2, tp, rank)
    plain = cj.gemm(x, w, collective_op=cj.CollectiveOp.ALL_GATHER)
    for scaling in ("current", "delayed"):
        f = jax.jit(lambda x, w: cj.gemm(x, w, collective_op=cj.CollectiveOp.ALL_GATHER,
                                         scaling=scaling, name=f"fp8_{scaling}"))
        y = f(x, w)
        y = f(x, w)  # delayed: the second call scales from the first call's amax
        # e4m3 keeps 3 mantissa bits: each operand within 2^-4 relative, the product 2^-3.
        close(y, ref, scale, 0.0625 + 0.0625 + 0.00390625 + 1e-5, f"FP8 {scaling} all-gather")
        check(not np.array_equal(np.asarray(y), np.asarray(plain)),
              f"FP8 {scaling}: the output equals the unquantized one (not quantized?)")
    expect_error(lambda: jax.grad(lambda x: jnp.sum(cj.gemm(
        x, w, collective_op=cj.CollectiveOp.ALL_GATHER, scaling="current")))(x),
        NotImplementedError, "forward-only", "the grad of an FP8 gemm")


def test_fp8_delayed_per_layer():
    """Delayed scaling keeps an amax history per named layer: a layer of the same shapes with
    inputs 10^6 times larger, called in between, leaves the first layer's scale alone."""
    Nf, Kf = 16 * tp, 32
    r = rng(43)
    X, W = randn(r, (B, S, Kf), jnp.float32), randn(r, (Kf, Nf), jnp.float32)
    x = jnp.asarray(shard(X, 1, tp, rank), jnp.float32) * 1e-3
    w = jnp.asarray(shard(W, 1, tp, rank), jnp.float32)
    ref = shard(np.einsum("bsk,kn->bsn", X, W), 2, tp, rank) * 1e-3
    scale = shard(np.einsum("bsk,kn->bsn", np.abs(X), np.abs(W)), 2, tp, rank) * 1e-3
    ag = cj.CollectiveOp.ALL_GATHER
    a = jax.jit(lambda x, w: cj.gemm(x, w, collective_op=ag, scaling="delayed", name="layer_a"))
    b = jax.jit(lambda x, w: cj.gemm(x, w, collective_op=ag, scaling="delayed", name="layer_b"))
    for _ in range(3):
        y = a(x, w)
        jax.block_until_ready(b(x * 1e6, w))
    close(y, ref, scale, 0.0625 + 0.0625 + 0.00390625 + 1e-5,
          "FP8 delayed: layer_a beside a same-shape layer_b of larger inputs")
    expect_error(lambda: cj.gemm(x, w, collective_op=ag, scaling="delayed"), ValueError,
                 "needs name=", "delayed scaling without a layer name")


def test_grad_matrix():
    """dx, dw, db of every collective x rhs layout x batch/sequence-first x bias against
    float64 numpy: L = sum(y * R) for a random R, so dy = R."""
    Bg, Sg, Kg, Ng = 2, 6 * tp, 4 * tp, 5 * tp
    for coll in ("none", "all_gather", "reduce_scatter"):
        for rhs_nk in (False, True):
            for tbs in ((False, True) if coll != "none" else (False,)):
                for bias in (False, True):
                    what = f"grad {coll} rhs={'NK' if rhs_nk else 'KN'} tbs={tbs} bias={bias}"
                    r = rng(zlib.crc32(what.encode()))
                    X = randn(r, (Sg, Bg, Kg) if tbs else (Bg, Sg, Kg), jnp.float32)
                    W, bv = randn(r, (Kg, Ng), jnp.float32), randn(r, (Ng,), jnp.float32)
                    R = randn(r, X.shape[:2] + (Ng,), jnp.float32)
                    dX = np.einsum("...n,kn->...k", R, W)
                    dW = np.tensordot(X, R, axes=([0, 1], [0, 1]))
                    db = R.sum((0, 1))
                    seq = 0 if tbs else 1
                    if coll == "none":
                        x, w, b, Rl, want = X, W, bv, R, (dX, dW, db)
                    elif coll == "all_gather":
                        x, w, b = shard(X, seq, tp, rank), shard(W, 1, tp, rank), \
                            shard(bv, 0, tp, rank)
                        Rl = shard(R, 2, tp, rank)
                        want = (shard(dX, seq, tp, rank), shard(dW, 1, tp, rank),
                                shard(db, 0, tp, rank))
                    else:
                        x, w, b = shard(X, 2, tp, rank), shard(W, 0, tp, rank), bv
                        Rl = shard(R, seq, tp, rank)
                        want = (shard(dX, 2, tp, rank), shard(dW, 0, tp, rank), db)
                    dims = ((-1,), (1,)) if rhs_nk else ((-1,), (0,))
                    want = (want[0], want[1].T if rhs_nk else want[1], want[2])
                    rl = jnp.asarray(Rl, jnp.float32)

                    def loss(x, w, b, dims=dims, coll=coll, tbs=tbs, bias=bias, rl=rl):
                        y = cj.gemm(x, w, b if bias else None, contracting_dims=dims,
                                    collective_op=coll, transpose_batch_sequence=tbs)
                        return jnp.sum(y * rl)

                    got = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(
                        *(jnp.asarray(a, jnp.float32) for a in (x, w.T.copy() if rhs_nk else w,
                                                                b)))
                    for name, g, wv in zip(("dx", "dw", "db"), got, want):
                        if name == "db" and not bias:
                            continue
                        close(g, wv, np.max(np.abs(wv)) + 1e-30, 1e-5, f"{what} {name}")


def mlp_global(x, w1, b1, w2, b2):
    h = jax.nn.gelu(jnp.einsum("bsh,hf->bsf", x, w1) + b1)
    return jnp.einsum("bsf,fh->bsh", h, w2) + b2


def mlp_tp(x, w1, b1, w2, b2):
    ops = cj.CollectiveOpSet.create(cj.CollectiveOp.ALL_GATHER)
    h = jax.nn.gelu(cj.gemm(x, w1, b1, collective_op=ops.forward))
    return cj.gemm(h, w2, b2, collective_op=cj.CollectiveOpSet.create(ops.backward).forward)


def mlp_params(r, H, F):
    return [randn(r, s, jnp.float32) * f for s, f in
            (((B, S, H), 1.0), ((H, F), 0.2), ((F,), 1.0), ((F, H), 0.2), ((H,), 1.0))]


def mlp_shards(x, w1, b1, w2, b2):
    return (shard(x, 1, tp, rank), shard(w1, 1, tp, rank), shard(b1, 0, tp, rank),
            shard(w2, 0, tp, rank), b2)


def test_mlp_grad():
    """jax.grad of a two-layer TP MLP (AG then RS) against jax.grad of the plain-jnp model."""
    H, F = K, N
    glob = mlp_params(rng(11), H, F)
    target = randn(rng(12), (B, S, H), jnp.float32)

    def loss_global(*p):
        return jnp.sum((mlp_global(*p) - target) ** 2)

    t_local = jnp.asarray(shard(target, 1, tp, rank), jnp.float32)

    def loss_tp(*p):  # this rank's share of the global loss: the sum over ranks is the loss
        return jnp.sum((mlp_tp(*p) - t_local) ** 2)

    ref = jax.grad(loss_global, argnums=range(5))(*[jnp.asarray(a, jnp.float32) for a in glob])
    got = jax.jit(jax.grad(loss_tp, argnums=range(5)))(
        *[jnp.asarray(a, jnp.float32) for a in mlp_shards(*glob)])
    ref_shards = mlp_shards(*[np.asarray(g, np.float64) for g in ref])
    for name, g, want in zip(("dx", "dw1", "db1", "dw2", "db2"), got, ref_shards):
        scale = np.max(np.abs(want)) + 1e-30
        close(g, want, scale, 1e-5, f"MLP grad {name} (relative to its largest |value|)")


def grouped_reference(sizes, lhs, rhs, bias):
    out, off = np.zeros((lhs.shape[0], rhs.shape[2])), 0
    scale = np.zeros_like(out)
    for g, m in enumerate(sizes):
        out[off:off + m] = lhs[off:off + m] @ rhs[g] + (bias[g] if bias is not None else 0.0)
        scale[off:off + m] = np.abs(lhs[off:off + m]) @ np.abs(rhs[g]) + \
            (np.abs(bias[g]) if bias is not None else 0.0)
        off += m
    return out, scale


def test_grouped():
    """Both forms against a numpy loop, empty groups included; the grad against jnp's."""
    G, M, Kg, Ng = 4, 20, 16, 12
    sizes = np.array([7, 0, 13, 0], np.int32)  # two empty groups
    r = rng(21)
    for dtype in ("float32", "bfloat16"):
        jd = jnp.dtype(dtype)
        lhs, rhs, bias = randn(r, (M, Kg), jd), randn(r, (G, Kg, Ng), jd), randn(r, (G, Ng), jd)
        for with_bias in (False, True):
            ref, scale = grouped_reference(sizes, lhs, rhs, bias if with_bias else None)
            y = jax.jit(lambda s, a, w, b: cj.grouped_gemm(a, w, s, contracting_dims=((1,), (1,)),
                                                           bias=b))(
                jnp.asarray(sizes), jnp.asarray(lhs, jd), jnp.asarray(rhs, jd),
                jnp.asarray(bias, jd) if with_bias else None)
            close(y, ref, scale, TOL[dtype], f"grouped ragged_rows {dtype} bias={with_bias}")
        # [G, N, K] storage, contracting (2,).
        y = jax.jit(lambda s, a, w: cj.grouped_gemm(a, w, s))(
            jnp.asarray(sizes), jnp.asarray(lhs, jd),
            jnp.asarray(np.transpose(rhs, (0, 2, 1)).copy(), jd))
        ref, scale = grouped_reference(sizes, lhs, rhs, None)
        close(y, ref, scale, TOL[dtype], f"grouped ragged_rows [G, N, K] {dtype}")
        # The wgrad form: out[g] = lhs_g^T @ dy_g over group g's rows.
        dy = randn(r, (M, Ng), jd)
        y = jax.jit(lambda s, a, d: cj.grouped_gemm(a, d, s, contracting_dims=((0,), (0,))))(
            jnp.asarray(sizes), jnp.asarray(lhs, jd), jnp.asarray(dy, jd))
        offs = np.concatenate([[0], np.cumsum(sizes)])
        ref = np.stack([lhs[offs[g]:offs[g + 1]].T @ dy[offs[g]:offs[g + 1]] for g in range(G)])
        scale = np.stack([np.abs(lhs[offs[g]:offs[g + 1]]).T @ np.abs(dy[offs[g]:offs[g + 1]])
                          for g in range(G)]) + 1.0
        close(y, ref, scale, TOL[dtype], f"grouped ragged_contracting {dtype} (empty: zeros)")
    # The grad (float32) against jnp's on the same loop; then with padded sizes (summing to 16
    # of the 20 rows: the padding rows are zeros whatever the bias, so they add to no gradient).
    # The loss weighs every output row (cw), padding rows included: their dy is not zero, so a
    # bias gradient that counted them would show.
    lhs, rhs, bias = (randn(r, s, jnp.float32) for s in ((M, Kg), (G, Kg, Ng), (G, Ng)))
    cw = jnp.asarray(randn(r, (M, Ng), jnp.float32))
    for sz, what in ((sizes, ""), (np.array([7, 0, 9, 0], np.int32), " (padded sizes)")):

        def loss_ref(a, w, b, sz=sz):
            offs = np.concatenate([[0], np.cumsum(sz)])
            parts = [a[offs[g]:offs[g + 1]] @ w[g] + b[g] for g in range(G)]
            y = jnp.concatenate(parts + [jnp.zeros((M - int(offs[-1]), Ng), jnp.float32)])
            return jnp.sum(y ** 2 + y * cw)

        def loss_cgemm(a, w, b, sz=sz):
            y = cj.grouped_gemm(a, w, jnp.asarray(sz), ((1,), (1,)), bias=b)
            return jnp.sum(y ** 2 + y * cw)

        args32 = [jnp.asarray(v, jnp.float32) for v in (lhs, rhs, bias)]
        ref = jax.grad(loss_ref, argnums=(0, 1, 2))(*args32)
        got = jax.jit(jax.grad(loss_cgemm, argnums=(0, 1, 2)))(*args32)
        for name, g, want in zip(("dlhs", "drhs", "dbias"), got, ref):
            want = np.asarray(want, np.float64)
            close(g, want, np.max(np.abs(want)) + 1e-30, 1e-5, f"grouped grad {name}{what}")


def test_jit_grad_vmap():
    """vmap of a jitted grad over a leading axis of x: each vmapped call runs in turn."""
    V = 3
    r = rng(31)
    X = randn(r, (V, B, S, K), jnp.float32)
    W = randn(r, (K, N), jnp.float32)
    x = jnp.asarray(shard(X, 2, tp, rank), jnp.float32)
    w = jnp.asarray(shard(W, 1, tp, rank), jnp.float32)

    def loss(x, w):
        return jnp.sum(cj.gemm(x, w, collective_op=cj.CollectiveOp.ALL_GATHER) ** 2)

    f = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1)), in_axes=(0, None)))
    dx, dw = f(x, w)
    for v in range(V):
        dxv, dwv = jax.grad(loss, argnums=(0, 1))(x[v], w)
        close(dx[v], np.asarray(dxv, np.float64), 1.0, 1e-6, f"vmap grad dx[{v}] against a loop")
        close(dw[v], np.asarray(dwv, np.float64), 1.0, 1e-6, f"vmap grad dw[{v}] against a loop")
    # and against the global model
    gx = 2 * np.einsum("bsn,kn->bsk", np.einsum("bsk,kn->bsn", X[0], W), W)
    close(dx[0], shard(gx, 1, tp, rank), np.max(np.abs(gx)), 1e-5, "vmap grad dx[0] vs numpy")


def expect_error(fn, kind, fragment, what):
    try:
        fn()
    except kind as e:
        check(fragment in str(e), f"{what}: message {str(e)[:300]!r} lacks {fragment!r}")
        return
    except Exception as e:  # noqa: BLE001
        check(False, f"{what}: {type(e).__name__} {str(e)[:300]!r}, not {kind.__name__}")
        return
    check(False, f"{what}: no error")


def test_bad_inputs():
    """Python errors naming the operand (never a crash); the same on every rank."""
    x = jnp.ones((B, S // tp, K), jnp.float32)
    w = jnp.ones((K, N // tp), jnp.float32)
    ag = cj.CollectiveOp.ALL_GATHER
    expect_error(lambda: cj.gemm(x, w.astype(jnp.bfloat16), collective_op=ag), TypeError,
                 "rhs: dtype bfloat16 differs", "a dtype that does not match")
    expect_error(lambda: cj.gemm(x, w, jnp.ones((N // tp + 1,), jnp.float32), collective_op=ag),
                 ValueError, "the rhs's non-contracting dims", "a bias of the wrong shape")
    expect_error(lambda: cj.gemm(x, w, collective_op="all_reduce"), ValueError,
                 "'all_reduce' is not a CollectiveOp", "an unknown collective")
    expect_error(lambda: cj.gemm(x.astype(jnp.int32), w, collective_op=ag), TypeError,
                 "lhs: dtype int32", "an integer lhs")
    expect_error(lambda: cj.gemm(x, w, lhs_quantizer=object()), TypeError, "scaling=",
                 "a TE quantizer")
    expect_error(lambda: cj.gemm(x[0], w, collective_op=ag), ValueError, "lhs [B, S, K...]",
                 "a 2-D lhs with a collective")
    # A buffer that is not the plan's reaches the handler only through a raw FFI call: the
    # handler names it (XLA raises it as a Python error), never a crash.
    text, infos = cj._plan("dense", cj._describe(x.shape, w.shape, None, "float32",
                                                 cj._Config("all_gather", (2,), (0,), False,
                                                            "none", "float32"), tp))
    raw = jax.ffi.ffi_call("cgemm_gemm", (jax.ShapeDtypeStruct(infos["out"].local_shape,
                                                               jnp.float32),
                                          jax.ShapeDtypeStruct((0,), jnp.float32)),
                           has_side_effect=True)
    expect_error(lambda: jax.block_until_ready(raw(x[:, :1], w, jnp.zeros((0,), jnp.float32),
                                                   plan=text)),
                 Exception, "cgemm: lhs: float32 [2, 1, 24] given, the plan needs float32",
                 "a raw FFI call with an lhs that is not the plan's")
    expect_error(lambda: jax.block_until_ready(raw(x, w, x, plan=text)), Exception,
                 "cgemm: bias: the plan has no bias", "a raw FFI call with a bias the plan lacks")
    expect_error(lambda: jax.block_until_ready(raw(x, w, jnp.zeros((0,), jnp.float32),
                                                   plan='{"lhs_shape": 3}')),
                 Exception, "lhs_shape: a list of at most 8 ints", "a malformed plan attribute")
    # Grouped: sizes that sum past M are refused at run time, naming the sum (less is padding).
    a, g = jnp.ones((6, 4), jnp.float32), jnp.ones((2, 4, 3), jnp.float32)
    expect_error(lambda: jax.block_until_ready(
        cj.grouped_gemm(a, g, jnp.asarray([4, 3], jnp.int32), ((1,), (1,)))),
        Exception, "sum", "grouped sizes that sum past M")


def test_shutdown_and_bootstrap_again():
    """An executable compiled before shutdown() is refused with a message (its plan was
    released), never run on freed memory; after a new bootstrap, jit retraces and both run."""
    global ctx
    r = rng(51)
    X, W = randn(r, (B, S, K), jnp.float32), randn(r, (K, N), jnp.float32)
    x = jnp.asarray(shard(X, 1, tp, rank), jnp.float32)
    w = jnp.asarray(shard(W, 1, tp, rank), jnp.float32)
    ref = shard(X @ W, 2, tp, rank)
    scale = shard(np.abs(X) @ np.abs(W), 2, tp, rank)

    def g(x, w):
        return cj.gemm(x, w, collective_op=cj.CollectiveOp.ALL_GATHER, name="rebootstrap")

    compiled = jax.jit(g).lower(x, w).compile()
    close(compiled(x, w), ref, scale, 1e-5, "AOT-compiled call before shutdown")
    cj.shutdown()
    ctx = cj.collective_gemm_bootstrap(world, 1, rank, world, gpu_sharing=args.gpu_sharing)
    expect_error(lambda: jax.block_until_ready(compiled(x, w)), Exception,
                 "released by cgemm_jax.shutdown()", "an executable compiled before shutdown")
    close(jax.jit(g)(x, w), ref, scale, 1e-5, "jit after a new bootstrap")
    close(compiled(x, w), ref, scale, 1e-5, "the old executable once the plan is made again")


tests = [test_forward_matrix, test_forward_nd, test_eager_call, test_fp8_forward, test_fp8_delayed_per_layer,
         test_grad_matrix, test_mlp_grad, test_grouped, test_jit_grad_vmap,
         test_bad_inputs, test_shutdown_and_bootstrap_again]
start = time.time()
for t in tests:
    before = len(failures)
    try:
        t()
    except Exception:  # noqa: BLE001
        failures.append(f"{t.__name__} raised")
        print(f"rank {rank}: {t.__name__} raised:\n{traceback.format_exc()}", flush=True)
    if rank == 0:
        status = "PASS" if len(failures) == before else "FAIL"
        print(f"  {t.__name__}: {status}", flush=True)
if rank == 0 or failures:
    print(f"rank {rank}: {checks} checks, {len(failures)} failed, {time.time() - start:.1f} s",
          flush=True)
sys.exit(1 if failures else 0)
