"""The JAX plugin's dense GEMM inside jax.jit against jnp.dot (XLA's own cuBLAS call) at tp 1,
and the FFI call's host overhead against the same plan executed directly through the C API, and the
same call marked side-effecting (what cgemm_jax does on JAX's cpu platform).

    python3 bench/jax_ffi_bench.py [--shapes standard,small] [--reps 7] [--calls 20]

One rank, one GPU (JAX's gpu platform; the CPU platform also runs, as a smoke test). Timing:
JAX has no CUDA-event API for XLA's stream, so each figure is wall-clock around `--calls`
back-to-back jitted calls ended by block_until_ready (the GPU runs them back to back while the
host queues ahead), divided by the calls; the median of --reps such loops, after a warm-up loop,
the cases' loops taking turns in a rotating order. Both sides are measured alike in the same
run, and the ratio is printed beside them. The direct
path calls cgemm_plan_execute_on_stream through ctypes (python/cgemm.py's execute_pointers) on
JAX's buffers, on a non-blocking stream of its own (as XLA's), ended by cudaDeviceSynchronize.
"""

import argparse
import ctypes
import os
import statistics
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "python"))
# JAX's default allocator (a preallocated pool): with XLA_PYTHON_CLIENT_PREALLOCATE=false every
# output of a large shape is a cudaMalloc, which both jitted paths pay and the direct one not.
os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = os.environ.get("CGEMM_BENCH_PREALLOCATE", "true")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cgemm_jax as cj  # noqa: E402

SHAPES = {  # name: (B, S, K, N), bf16, as docs/PERFORMANCE.md's standard cases
    "standard": (4, 8192, 4096, 8192),
    "llama70b_up": (1, 8192, 8192, 28672),
    "small": (2, 2048, 768, 3072),
    "tiny": (1, 128, 128, 128),
}
parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--shapes", default="standard,llama70b_up,small,tiny",
                    help=f"comma-separated, of {', '.join(SHAPES)}")
parser.add_argument("--reps", type=int, default=7, help="timed loops per figure (median)")
parser.add_argument("--calls", type=int, default=20, help="jitted calls per timed loop")
args = parser.parse_args()

ctx = cj.collective_gemm_bootstrap(1, 1, 0, 1)
gpu = jax.default_backend() == "gpu"
sync_device = None
stream = ctypes.c_void_p()
if gpu:
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
        try:
            cudart = ctypes.CDLL(name)
        except OSError:
            continue
        # A non-blocking stream of our own, as XLA's: the direct call runs on it as a caller's
        # stream, so both paths go through cgemm_plan_execute_on_stream's events alike.
        if cudart.cudaStreamCreateWithFlags(ctypes.byref(stream), 1) == 0:
            sync_device = cudart.cudaDeviceSynchronize
        break


def timed(cases):
    """Median seconds per call of each case (run, finish): per rep, one loop of --calls calls
    of each case (then finish()), the cases in a rotated order each rep, so no case always
    runs first or last on a GPU whose clocks drift; the first rep warms up."""
    samples = [[] for _ in cases]
    for rep in range(args.reps + 1):
        for k in range(len(cases)):
            i = (k + rep) % len(cases)
            run, finish = cases[i]
            t0 = time.perf_counter()
            for _ in range(args.calls):
                out = run()
            finish(out)
            if rep:
                samples[i].append((time.perf_counter() - t0) / args.calls)
    return [statistics.median(x) for x in samples]


print(f"jax_ffi_bench: JAX {jax.__version__} on {jax.default_backend()} "
      f"({jax.devices()[0].device_kind}), cgemm's {ctx.backend} backend, bf16, tp 1; "
      f"median of {args.reps} loops of {args.calls} calls")
print(f"{'shape':>12} {'B x S, K -> N':>24} {'jnp.dot ms':>11} {'cgemm ms':>9} {'ratio':>6} "
      f"{'effectful ms':>12} {'direct ms':>10} {'ffi-direct us':>14}")
for name in args.shapes.split(","):
    B, S, K, N = SHAPES[name]
    kx, kw = jax.random.split(jax.random.PRNGKey(0))
    x = jax.random.normal(kx, (B, S, K), jnp.bfloat16)
    w = jax.random.normal(kw, (K, N), jnp.bfloat16) / K ** 0.5
    xla = jax.jit(lambda x, w: jnp.dot(x, w))
    ours = jax.jit(lambda x, w: cj.gemm(x, w))
    # The same call marked side-effecting (as on JAX's cpu platform, and for delayed scaling):
    # JAX then dispatches each computation after the previous one finished.
    side_effect = cj._side_effect
    cj._side_effect = lambda stateful: True
    effectful = jax.jit(lambda x, w: cj.gemm(x, w, name="effectful"))
    effectful(x, w)
    cj._side_effect = side_effect
    y_xla, y_ours = xla(x, w), ours(x, w)
    err = float(jnp.max(jnp.abs(y_xla.astype(jnp.float32) - y_ours.astype(jnp.float32))))
    cases = [(lambda: xla(x, w), jax.block_until_ready),
             (lambda: ours(x, w), jax.block_until_ready),
             (lambda: effectful(x, w), jax.block_until_ready)]
    plan = None
    if sync_device is not None:
        plan = ctx.plan(lhs_shape=(B, S, K), rhs_shape=(K, N), dtype="bfloat16", name="direct")
        y = jnp.empty((B, S, N), jnp.bfloat16)
        ptrs = [a.unsafe_buffer_pointer() for a in (x, w, y)]
        cases.append((lambda: plan.execute_pointers(ptrs[0], ptrs[1], None, ptrs[2],
                                                    stream.value),
                      lambda _: sync_device()))
    t_xla, t_ours, t_effectful, *t_direct = timed(cases)
    direct = ""
    if plan is not None:
        plan.close()
        direct = f"{t_direct[0] * 1e3:10.3f} {(t_ours - t_direct[0]) * 1e6:14.1f}"
    print(f"{name:>12} {f'{B} x {S}, {K} -> {N}':>24} {t_xla * 1e3:11.3f} {t_ours * 1e3:9.3f} "
          f"{t_xla / t_ours:5.3f}x {t_effectful * 1e3:12.3f} {direct}  (max |diff| {err:.3g})",
          flush=True)
