"""Trains a tensor-sequence-parallel transformer MLP block with cgemm's collective GEMMs from JAX
(python/cgemm_jax.py), and checks its loss curve against the same model in plain JAX.

    mpirun -np 2 build-venv/bin/python examples/jax_mlp.py [--steps 50] [--dtype float32]

Each rank holds a sequence shard of the activations and a tp shard of the weights, as Megatron
and Transformer Engine lay them out:

    h = normalize(x)                                   x [B, S/tp, H] (no learnable scale)
    u = gelu(gemm(h, w1, b1, ALL_GATHER))              w1 [H, F/tp], b1 [F/tp] -> [B, S, F/tp]
    y = x + gemm(u, w2, b2, REDUCE_SCATTER)            w2 [F/tp, H], b2 [H]    -> [B, S/tp, H]
    loss = mean((y - target)^2) over this rank's tokens, summed over ranks

trained with plain SGD (a few lines, no optax) under jax.jit. The backward runs the seed's
pairing (the all-gather GEMM's dgrad is a reduce-scatter GEMM and the reverse), and the weight
gradients use what the forward (AG(x)) or the dgrad (AG(dy)) gathered. The reference runs the
global model in plain JAX on every rank, and each rank compares its share of the loss (its
tokens) at every step: the run fails (exit 1) when they differ by more than --tolerance.
A learnable norm scale is left out on purpose: its gradient is a sum over every rank's tokens,
an all-reduce this example (no MPI binding in Python) does not have.
"""

import argparse
import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "python"))

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--steps", type=int, default=50, help="SGD steps (default 50)")
parser.add_argument("--batch", type=int, default=2, help="B, sequences per step (default 2)")
parser.add_argument("--seq", type=int, default=48, help="S, the global sequence (default 48)")
parser.add_argument("--hidden", type=int, default=64, help="H (default 64)")
parser.add_argument("--ffn", type=int, default=192, help="F, the MLP's inner size (default 192)")
parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                    help="the parameters' and activations' dtype (default float32)")
parser.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (default 0.05)")
parser.add_argument("--tolerance", type=float, default=None,
                    help="largest relative difference of the losses (default 1e-5 for float32, "
                         "1e-2 for bfloat16)")
parser.add_argument("--gpu_sharing", action="store_true",
                    help="let the ranks share one GPU (copy engines; correctness, not speed)")
parser.add_argument("--seed", type=int, default=0, help="of the data and initial weights")
args = parser.parse_args()
tolerance = args.tolerance or (1e-5 if args.dtype == "float32" else 1e-2)
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

# The plain-JAX reference in true float32: on GPUs XLA's default matmul precision is TF32
# (about 1e-3), which cgemm's float32 GEMMs are not.
jax.config.update("jax_default_matmul_precision", "highest")

import cgemm_jax as cj  # noqa: E402

world, rank = cj.launcher_world()
ctx = cj.collective_gemm_bootstrap(world, 1, rank, world, gpu_sharing=args.gpu_sharing)
tp = ctx.tp
B, S, H, F = args.batch, args.seq, args.hidden, args.ffn
for name, size in (("--seq", S), ("--ffn", F)):
    if size % tp:
        sys.exit(f"jax_mlp.py: error: {name} {size} is not divisible by tp {tp}")
dtype = jnp.dtype(args.dtype)
AG, RS = cj.CollectiveOp.ALL_GATHER, cj.CollectiveOp.REDUCE_SCATTER


def normalize(x):
    x32 = x.astype(jnp.float32)
    mean = jnp.mean(x32, axis=-1, keepdims=True)
    var = jnp.var(x32, axis=-1, keepdims=True)
    return ((x32 - mean) * jax.lax.rsqrt(var + 1e-5)).astype(x.dtype)


def block_tp(p, x):
    u = jax.nn.gelu(cj.gemm(normalize(x), p["w1"], p["b1"], collective_op=AG))
    return x + cj.gemm(u, p["w2"], p["b2"], collective_op=RS)


def block_global(p, x):
    u = jax.nn.gelu(jnp.einsum("bsh,hf->bsf", normalize(x), p["w1"]) + p["b1"])
    return x + jnp.einsum("bsf,fh->bsh", u, p["w2"]) + p["b2"]


def share_loss(y, target):
    """This rank's share: its tokens' squared error over every token of the step."""
    err = (y.astype(jnp.float32) - target.astype(jnp.float32)) ** 2
    return jnp.sum(err) / (B * S * H)


def sgd(loss_fn):
    @jax.jit
    def step(p, x, target):
        loss, grads = jax.value_and_grad(loss_fn)(p, x, target)
        return loss, jax.tree.map(lambda w, g: (w - args.lr * g).astype(w.dtype), p, grads)
    return step


key = jax.random.PRNGKey(args.seed)
k1, k2, k3, k4, k5 = jax.random.split(key, 5)
params_global = {
    "w1": (jax.random.normal(k1, (H, F)) / H ** 0.5).astype(dtype),
    "b1": (0.1 * jax.random.normal(k2, (F,))).astype(dtype),
    "w2": (jax.random.normal(k3, (F, H)) / F ** 0.5).astype(dtype),
    "b2": (0.1 * jax.random.normal(k4, (H,))).astype(dtype),
}
s, f = S // tp, F // tp
params_tp = {"w1": params_global["w1"][:, rank * f:(rank + 1) * f],
             "b1": params_global["b1"][rank * f:(rank + 1) * f],
             "w2": params_global["w2"][rank * f:(rank + 1) * f], "b2": params_global["b2"]}
# A fixed regression task: targets from a random linear map of the inputs.
data_key, map_key = jax.random.split(k5)
proj = jax.random.normal(map_key, (H, H)) / H ** 0.5
step_tp = sgd(lambda p, x, t: share_loss(block_tp(p, x), t))
step_ref_full = sgd(lambda p, x, t: share_loss(block_global(p, x), t))

if rank == 0:
    print(f"jax_mlp: tp {tp}, B {B}, S {S}, H {H}, F {F}, {args.dtype}, JAX {jax.__version__} "
          f"on {jax.default_backend()}, cgemm's {ctx.backend} backend", flush=True)
worst = 0.0
start = time.time()
for i in range(args.steps):
    x_global = jax.random.normal(jax.random.fold_in(data_key, i), (B, S, H)).astype(dtype)
    target = jnp.tanh(x_global.astype(jnp.float32) @ proj).astype(dtype)
    x = x_global[:, rank * s:(rank + 1) * s]
    loss_tp, params_tp = step_tp(params_tp, x, target[:, rank * s:(rank + 1) * s])
    # The reference: this rank's share of the loss from the global model, whose parameters
    # take the whole gradient (every rank's tokens) as the TP model's shards do.
    loss_ref = share_loss(block_global(params_global, x_global)[:, rank * s:(rank + 1) * s],
                          target[:, rank * s:(rank + 1) * s])
    _, params_global = step_ref_full(params_global, x_global, target)
    diff = abs(float(loss_tp) - float(loss_ref)) / max(abs(float(loss_ref)), 1e-30)
    worst = max(worst, diff)
    if rank == 0 and (i % 10 == 0 or i == args.steps - 1):
        print(f"step {i:4d}  loss share (rank 0) cgemm {float(loss_tp):.6f}  "
              f"plain JAX {float(loss_ref):.6f}  relative difference {diff:.2e}", flush=True)
ok = worst <= tolerance
print(f"rank {rank}: {args.steps} steps in {time.time() - start:.1f} s; largest relative "
      f"difference of the loss {worst:.3e} (bound {tolerance}): {'PASSED' if ok else 'FAILED'}",
      flush=True)
sys.exit(0 if ok else 1)
