"""cgemm for JAX: Transformer Engine's JAX collective GEMM API (gemm.py, the seed) served by
cgemm's runtime through XLA FFI (plugins/jax/: libcgemm_jax.so over libcgemm.so's C API).

One MPI rank per device, each running its own single-device JAX program on its local shards
(what TE's collective GEMM sees after custom partitioning); no jax.distributed needed. Under
mpirun, every rank the same calls:

    import jax, jax.numpy as jnp
    import cgemm_jax as cj
    cj.collective_gemm_bootstrap(num_total_devices=N, num_devices_per_process=1,
                                 process_id=rank, tensor_parallel_size=N)
    ag = cj.CollectiveOpSet.create(cj.CollectiveOp.ALL_GATHER)   # forward AG, backward RS
    y = cj.gemm(x, w1, b1, collective_op=ag.forward)   # x [B, S/tp, H], w1 [H, F/tp] -> [B, S, F/tp]
    z = cj.gemm(jax.nn.gelu(y), w2, b2, collective_op=cj.CollectiveOp.REDUCE_SCATTER)  # [B, S/tp, H]

gemm and grouped_gemm work under jax.jit, jax.grad (jax.custom_vjp with the seed's
CollectiveOpSet pairing) and jax.vmap (each vmapped call runs in turn: the ffi_call's
"sequential" method). JAX's "cpu" platform runs them on cgemm's CPU backend (host buffers), its
"gpu" platform on the CUDA backend (XLA's stream). README.md's "JAX" section has the rules.

The library: $CGEMM_JAX_LIBRARY if set, else libcgemm_jax.so beside the libcgemm.so.0 that
cgemm.py loads (build/lib, or PREFIX/LIBDIR for an installed tree).

Every rank must make the same calls in the same order (as with any collective): a rank that
raises or stops while the others are inside a collective GEMM leaves them waiting until the
deadline (collective_gemm_bootstrap's timeout_s, default 300 s), which ends the job with one
message and exit status 4, never a hang.
"""

import atexit
import ctypes
import dataclasses
import enum
import functools
import json
import os

import jax
import jax.numpy as jnp

import cgemm

_TP_AXIS = "tpsp"
_DTYPES = {jnp.dtype(jnp.float32): "float32", jnp.dtype(jnp.bfloat16): "bfloat16",
           jnp.dtype(jnp.float16): "float16"}
_STATE = {"lib": None, "ctx": None, "platform": None, "registered": set()}
_PLANS = {}  # description text -> (handle, {operand: cgemm.TensorInfo or None})


class CollectiveOp(enum.Enum):
    """The collective of a collective GEMM, as the seed's CollectiveOp."""

    NONE = "none"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"

    @property
    def is_all_gather(self):
        return self == CollectiveOp.ALL_GATHER

    @property
    def is_reduce_scatter(self):
        return self == CollectiveOp.REDUCE_SCATTER

    @property
    def is_none(self):
        return self == CollectiveOp.NONE


def _collective(op):
    if isinstance(op, CollectiveOp):
        return op
    try:
        return CollectiveOp(op)
    except ValueError:
        raise ValueError(f"collective_op: {op!r} is not a CollectiveOp (NONE, ALL_GATHER, "
                         f"REDUCE_SCATTER)") from None


@dataclasses.dataclass(frozen=True)
class CollectiveOpSet:
    """A forward collective and the backward one that pairs with it (the seed's rule)."""

    forward: CollectiveOp
    backward: CollectiveOp

    @staticmethod
    def create(forward_collective_op):
        """All-gather forward -> reduce-scatter backward; reduce-scatter -> all-gather;
        none -> none."""
        op = _collective(forward_collective_op)
        backward = {CollectiveOp.ALL_GATHER: CollectiveOp.REDUCE_SCATTER,
                    CollectiveOp.REDUCE_SCATTER: CollectiveOp.ALL_GATHER}.get(op, CollectiveOp.NONE)
        return CollectiveOpSet(forward=op, backward=backward)


noop_collective_op_set = CollectiveOpSet.create(CollectiveOp.NONE)


# ---- The plugin library, the context and the plans. ----

def _plugin():
    if _STATE["lib"] is not None:
        return _STATE["lib"]
    path = os.environ.get("CGEMM_JAX_LIBRARY")
    if not path:
        core = cgemm._library_path()
        path = os.path.join(os.path.dirname(core), "libcgemm_jax.so") if os.sep in core \
            else "libcgemm_jax.so"
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"cgemm_jax: cannot load the JAX plugin {path} ({e}): build cgemm with "
                          "a Python that has jax (cmake -DCGEMM_JAX_PYTHON=...), or set "
                          "CGEMM_JAX_LIBRARY") from None
    lib.cgemm_jax_last_error.restype = ctypes.c_char_p
    lib.cgemm_jax_set_context.argtypes = [ctypes.c_void_p]
    for name in ("cgemm_jax_dense_plan", "cgemm_jax_grouped_plan"):
        getattr(lib, name).argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    for name in ("dense", "grouped"):
        for part in ("id", "info"):
            getattr(lib, f"cgemm_jax_{name}_state_type_{part}").restype = ctypes.c_void_p
    _STATE["lib"] = lib
    return lib


def _check(status):
    if status != 0:
        message = _plugin().cgemm_jax_last_error().decode(errors="replace")
        raise cgemm.Error(cgemm._STATUS_NAMES.get(status, str(status)), message)


def _capsule(lib, name):
    return jax.ffi.pycapsule(getattr(lib, name))


def _register(platform):
    """The FFI targets and their state types for JAX's platform (once per process)."""
    if platform in _STATE["registered"]:
        return
    lib = _plugin()
    xla_platform = "cpu" if platform == "cpu" else "CUDA"
    suffix = "cpu" if platform == "cpu" else "cuda"
    for kind in ("dense", "grouped"):
        # The types first: XLA refuses a handler whose state type it does not know yet.
        type_id = ctypes.c_void_p(getattr(lib, f"cgemm_jax_{kind}_state_type_id")())
        type_info = ctypes.c_void_p(getattr(lib, f"cgemm_jax_{kind}_state_type_info")())
        jax.ffi.register_ffi_type(
            f"cgemm_jax_{kind}_state",
            {"type_id": jax.ffi.pycapsule(ctypes.cast(type_id, ctypes.CFUNCTYPE(None))),
             "type_info": jax.ffi.pycapsule(ctypes.cast(type_info, ctypes.CFUNCTYPE(None)))},
            platform=xla_platform)
    for target, prefix in (("cgemm_gemm", "cgemm_jax_gemm"),
                           ("cgemm_grouped_gemm", "cgemm_jax_grouped")):
        jax.ffi.register_ffi_target(
            target, {"instantiate": _capsule(lib, f"{prefix}_instantiate"),
                     "execute": _capsule(lib, f"{prefix}_{suffix}")},
            platform=xla_platform)
    _STATE["registered"].add(platform)


# The launchers' world size and rank: Open MPI, MPICH/Hydra (PMI), Slurm's srun.
_WORLD_VARS = (("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"), ("PMI_SIZE", "PMI_RANK"),
               ("SLURM_NTASKS", "SLURM_PROCID"))


def launcher_world():
    """(world size, this rank) from the MPI launcher's environment, for
    collective_gemm_bootstrap's num_total_devices and process_id before any MPI call; (1, 0)
    outside a launcher. The bootstrap checks them against the MPI job."""
    for size, rank in _WORLD_VARS:
        if os.environ.get(size, "").isdigit() and os.environ.get(rank, "").isdigit():
            return int(os.environ[size]), int(os.environ[rank])
    return 1, 0


def collective_gemm_bootstrap(num_total_devices, num_devices_per_process, process_id,
                              tensor_parallel_size, num_max_streams=3, compute_stream_priority=0,
                              communication_stream_priority=0, num_sm_for_communication=2,
                              use_ce=True, aggregate_all_gather=False, *, gpu_sharing=False,
                              overlap="auto", timeout_s=None):
    """Makes this process's cgemm context (collective over MPI_COMM_WORLD; MPI initialized here
    when nobody has) and registers cgemm's FFI targets with JAX. As the seed's, with cgemm's
    bootstrap: the mesh is num_total_devices // tensor_parallel_size (dp) x tensor_parallel_size
    (tp) over the MPI job, so the arguments are checked against it (num_total_devices: the
    world size; process_id: this rank; one device per process).

    JAX's default platform picks the backend: "cpu" -> cgemm's CPU backend, "gpu" -> its CUDA
    backend. num_max_streams, aggregate_all_gather, compute_stream_priority,
    communication_stream_priority (0..3) and use_ce are cgemm's overlap knobs (the C API's);
    num_sm_for_communication (>= 1) is accepted without effect, as in cgemm-run (the copy engines
    take no SMs; capping NCCL's CTAs starved it).
    gpu_sharing: let ranks share one GPU (copy engines; for correctness runs, not speed);
    overlap: "auto", "on", "off"; timeout_s: the deadline of every wait (None: 300 s).
    Raises ValueError naming the argument that does not fit the job, cgemm.Error for the
    library's errors."""
    if num_devices_per_process != 1:
        raise ValueError(f"num_devices_per_process {num_devices_per_process}: cgemm runs one "
                         "device per process (one MPI rank per device)")
    if jax.local_device_count() != 1:
        raise ValueError(f"this process sees {jax.local_device_count()} JAX devices: cgemm runs "
                         "one device per process (set CUDA_VISIBLE_DEVICES per rank)")
    if num_total_devices % num_devices_per_process:
        raise ValueError(f"num_total_devices {num_total_devices} is not a multiple of "
                         f"num_devices_per_process {num_devices_per_process}")
    if tensor_parallel_size < 1 or num_total_devices % tensor_parallel_size:
        raise ValueError(f"tensor_parallel_size {tensor_parallel_size} does not divide "
                         f"num_total_devices {num_total_devices}")
    for name, value in (("compute_stream_priority", compute_stream_priority),
                        ("communication_stream_priority", communication_stream_priority)):
        if value not in (0, 1, 2, 3):
            raise ValueError(f"{name} {value!r}: 0 (highest) to 3 (lowest)")
    if num_sm_for_communication < 1:
        raise ValueError(f"num_sm_for_communication {num_sm_for_communication}: at least 1")
    if _STATE["ctx"] is not None:
        raise RuntimeError("collective_gemm_bootstrap: cgemm is bootstrapped already in this "
                           "process (call shutdown() first)")
    platform = jax.default_backend()
    if platform not in ("cpu", "gpu"):
        raise ValueError(f"JAX's platform {platform!r}: cgemm runs on 'cpu' and 'gpu' (CUDA)")
    ctx = cgemm.Context(dp=num_total_devices // tensor_parallel_size, tp=tensor_parallel_size,
                        backend="cpu" if platform == "cpu" else "cuda", overlap=overlap,
                        num_max_streams=num_max_streams,
                        aggregate_all_gather=aggregate_all_gather, gpu_sharing=gpu_sharing,
                        timeout_s=timeout_s, compute_stream_priority=compute_stream_priority,
                        communication_stream_priority=communication_stream_priority,
                        use_ce=use_ce, num_sm_for_communication=num_sm_for_communication)
    # Alike on every rank: the size. The process id: the rank that differs says so.
    if ctx.size != num_total_devices or ctx.rank != process_id:
        ctx.close()
        raise ValueError(f"num_total_devices {num_total_devices} / process_id {process_id}: the "
                         f"MPI job has {ctx.size} ranks and this is rank {ctx.rank}")
    _check(_plugin().cgemm_jax_set_context(ctx._handle))
    _register(platform)
    _STATE["ctx"], _STATE["platform"] = ctx, platform
    return ctx


def shutdown():
    """Destroys cgemm's plans and context (collective; also run at exit)."""
    if _STATE["ctx"] is None:
        return
    _plugin().cgemm_jax_release()
    _PLANS.clear()
    # Functions compiled before hold released plans (their calls would be refused): retrace.
    jax.clear_caches()
    _STATE["ctx"].close()
    _STATE["ctx"] = None


def _context():
    if _STATE["ctx"] is None:
        raise RuntimeError("cgemm_jax: call collective_gemm_bootstrap(...) first")
    return _STATE["ctx"]


def _plan(kind, description):
    """The process's plan for a description (made once: collective for a dense plan), and its
    operands' TensorInfo."""
    text = json.dumps(description, sort_keys=True)
    if text in _PLANS:
        return text, _PLANS[text]
    handle = ctypes.c_void_p()
    _check(getattr(_plugin(), f"cgemm_jax_{kind}_plan")(text.encode(), ctypes.byref(handle)))
    query = (cgemm._lib.cgemm_plan_tensor_info if kind == "dense"
             else cgemm._lib.cgemm_grouped_plan_tensor_info)
    infos = {}
    for name, op in (("lhs", 0), ("rhs", 1), ("bias", 2), ("out", 3), ("gathered_lhs", 4)):
        if kind == "grouped" and name == "gathered_lhs":
            continue
        info = cgemm._TensorInfo()
        cgemm._check(query(handle, op, ctypes.byref(info)))
        infos[name] = cgemm.TensorInfo(info) if info.ndim > 0 else None
    _PLANS[text] = infos
    return text, infos


# ---- The dense GEMM. ----

@dataclasses.dataclass(frozen=True)
class _Config:
    collective: str
    lhs_cdims: tuple
    rhs_cdims: tuple
    transpose_batch_sequence: bool
    scaling: str
    out_dtype: str
    name: str = ""


def _dims(dims, ndim, what):
    out = []
    for d in dims:
        if not -ndim <= d < ndim:
            raise ValueError(f"contracting_dims: {what} dim {d} is outside its {ndim} dims")
        out.append(d % ndim)
    return tuple(out)


def _spec(ndim, sharded_dim):
    entries = ["None"] * ndim
    if sharded_dim is not None:
        entries[sharded_dim] = repr(_TP_AXIS)
    return "(" + ", ".join(entries) + ("," if ndim == 1 else "") + ")"


def _describe(lhs_shape, rhs_shape, bias_shape, dtype, cfg, tp):
    """The plan description of a call on this rank's shards: global shapes and the specs of the
    seed's collective GEMM layouts (all-gather: lhs sharded on its sequence dim, rhs on its
    output dim N (the last of [K..., N...], the first of [N..., K...]); reduce-scatter: both on
    their first contracting dim; none: nothing sharded). The collectives take lhs [B, S, K...]
    (or [S, B, K...]) contracting its trailing dims, and any rhs a plain GEMM takes (TE's
    gated-MLP kernel [K, 2, N] included)."""
    lhs_g, rhs_g = list(lhs_shape), list(rhs_shape)
    bias_g = None if bias_shape is None else list(bias_shape)
    lhs_shard = rhs_shard = bias_shard = None
    if cfg.collective != "none":
        trailing = tuple(range(2, len(lhs_shape)))
        if len(lhs_shape) < 3 or tuple(sorted(cfg.lhs_cdims)) != trailing:
            raise ValueError(
                f"collective_op {cfg.collective}: cgemm runs it on lhs [B, S, K...] (or "
                f"[S, B, K...] with transpose_batch_sequence) contracting its dims after the "
                f"first two; got lhs {tuple(lhs_shape)} contracting {cfg.lhs_cdims}")
        rc = sorted(cfg.rhs_cdims)
        if cfg.collective == "all_gather":
            lhs_shard = 0 if cfg.transpose_batch_sequence else 1
            # N: the last dim of [K..., N...], the first of [N..., K...].
            rhs_shard = len(rhs_shape) - 1 if rc[0] == 0 else 0
            kept = [d for d in range(len(rhs_shape)) if d not in rc]
            bias_shard = kept.index(rhs_shard)
        else:
            lhs_shard, rhs_shard = 2, rc[0]
        lhs_g[lhs_shard] *= tp
        rhs_g[rhs_shard] *= tp
        if bias_g is not None and bias_shard is not None:
            bias_g[bias_shard] *= tp
    d = {"name": cfg.name or f"jax_{cfg.collective}", "lhs_shape": lhs_g, "rhs_shape": rhs_g,
         "dtype": dtype, "out_dtype": cfg.out_dtype, "collective": cfg.collective,
         "lhs_contracting": list(cfg.lhs_cdims), "rhs_contracting": list(cfg.rhs_cdims),
         "transpose_batch_sequence": cfg.transpose_batch_sequence,
         "lhs_spec": _spec(len(lhs_g), lhs_shard), "rhs_spec": _spec(len(rhs_g), rhs_shard)}
    if bias_g is not None:
        d["bias_shape"] = bias_g
        d["bias_spec"] = _spec(len(bias_g), bias_shard)
    if cfg.scaling != "none":
        d["scaling"] = cfg.scaling
    return d


def _side_effect(stateful):
    """Whether XLA must treat a call as side-effecting. On JAX's cpu platform always: XLA then
    keeps the calls in program order on every rank (its CPU runtime may otherwise run
    independent calls at once, and a collective's order must match across ranks). On the gpu
    platform only for a plan with state (delayed scaling's amax history, which two merged calls
    would update once): there the calls are ordered on XLA's stream anyway, and JAX dispatches
    an effectful computation only after the previous one finished, which costs about 0.1 ms a
    call (measured on an H100: docs/PERFORMANCE.md)."""
    return stateful or _STATE["platform"] == "cpu"


def _shaped(info, dtype):
    return jax.ShapeDtypeStruct(info.local_shape, dtype)


def _forward(lhs, rhs, bias, cfg, gathered):
    """One cgemm call: out (and the gathered lhs when asked for) on this rank's shards."""
    ctx = _context()
    dtype = _DTYPES[jnp.dtype(lhs.dtype)]
    text, infos = _plan("dense", _describe(lhs.shape, rhs.shape,
                                           None if bias is None else bias.shape, dtype, cfg,
                                           ctx.tp))
    for name, x in (("lhs", lhs), ("rhs", rhs), ("bias", bias)):
        want = infos[name]
        if x is not None and tuple(x.shape) != want.local_shape:
            raise ValueError(f"{name}: shape {tuple(x.shape)} is not the plan's "
                             f"{want.local_shape} (this rank's shard)")
    out_dtype = jnp.dtype(cfg.out_dtype)
    if gathered and infos["gathered_lhs"] is None:
        raise ValueError(f"this {cfg.collective} plan hands no gathered lhs out")
    g_type = (_shaped(infos["gathered_lhs"], lhs.dtype) if gathered
              else jax.ShapeDtypeStruct((0,), lhs.dtype))
    bias_arg = bias if bias is not None else jnp.zeros((0,), out_dtype)
    call = jax.ffi.ffi_call("cgemm_gemm", (_shaped(infos["out"], out_dtype), g_type),
                            has_side_effect=_side_effect(cfg.scaling == "delayed"),
                            vmap_method="sequential")
    out, g = call(lhs, rhs, bias_arg, plan=text)
    return out, (g if gathered else None)


def _leading(ndim):
    return tuple(range(ndim - 1))


def _plain(lhs, rhs, lhs_cdims, rhs_cdims, out_dtype):
    cfg = _Config("none", lhs_cdims, rhs_cdims, False, "none", out_dtype)
    return _forward(lhs, rhs, None, cfg, False)[0]


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _dense(lhs, rhs, bias, cfg):
    return _forward(lhs, rhs, bias, cfg, False)[0]


def _dense_fwd(lhs, rhs, bias, cfg):
    if cfg.scaling != "none":
        raise NotImplementedError(
            f"cgemm_jax.gemm with scaling={cfg.scaling!r} is forward-only: the plugin has no FP8 "
            "backward yet (cgemm's C++ layer pair has one)")
    if cfg.lhs_cdims != (lhs.ndim - 1,) or rhs.ndim != 2:
        raise NotImplementedError(
            f"cgemm_jax.gemm differentiates lhs [..., K] contracting its last dim with a 2-D "
            f"rhs; got lhs {lhs.shape} contracting {cfg.lhs_cdims}, rhs {rhs.shape}")
    keep = cfg.collective == "all_gather"
    out, gathered = _forward(lhs, rhs, bias, cfg, keep)
    # The wgrad's lhs: the forward's AG(x) for all-gather, else x itself.
    return out, (gathered if keep else lhs, rhs, bias)


def _dense_bwd(cfg, residuals, dy):
    x, w, bias = residuals
    rc = cfg.rhs_cdims[0]
    nd = dy.ndim
    dtype = cfg.out_dtype
    dgrad = _Config(CollectiveOpSet.create(CollectiveOp(cfg.collective)).backward.value,
                    (nd - 1,), (1 - rc,), cfg.transpose_batch_sequence, "none", dtype)
    # dgrad: dy @ w^T, with the backward collective (AG fwd -> RS, RS fwd -> AG, none -> none);
    # an all-gather dgrad hands out AG(dy) for the wgrad.
    dx, dy_gathered = _forward(dy, w, None, dgrad, dgrad.collective == "all_gather")
    dy_full = dy_gathered if dy_gathered is not None else dy
    lead = _leading(nd)
    # wgrad: x^T @ dy over every token this rank holds (gathered where the layer gathers).
    dw = (_plain(x, dy_full, lead, lead, dtype) if rc == 0
          else _plain(dy_full, x, lead, lead, dtype))
    db = None
    if bias is not None:
        db = jnp.sum(dy_full.astype(jnp.float32), axis=lead).astype(bias.dtype)
    return dx.astype(x.dtype), dw.astype(w.dtype), db


_dense.defvjp(_dense_fwd, _dense_bwd)


def gemm(lhs, rhs, bias=None, contracting_dims=((-1,), (0,)), transpose_batch_sequence=False,
         collective_op=CollectiveOp.NONE, scaling=None, name=None, **kwargs):
    """out = lhs @ rhs (+ bias) on this rank's shards, as the seed's gemm: lhs and rhs in
    float32, bfloat16 or float16 (the same dtype), bias [N] in that dtype; the output in it.

    collective_op NONE: a plain GEMM of the local arrays (any layout with each operand's
    contracting dims at one of its ends). ALL_GATHER: lhs [B, S/tp, K] (or [S/tp, B, K] with
    transpose_batch_sequence) gathered over the tp group inside the GEMM, rhs [K, N/tp] (or
    [N/tp, K] with contracting_dims ((-1,), (1,))), bias [N/tp] -> [B, S, N/tp].
    REDUCE_SCATTER: lhs [B, S, K/tp], rhs [K/tp, N] (or [N, K/tp]), bias [N] -> [B, S/tp, N],
    the partial sums reduced in float32. Both collectives also take K as several trailing lhs
    dims ([B, S, H, D] contracting (2, 3); the reduce-scatter shards the first, H) and an N-D
    rhs ([K, 2, N], TE's gated-MLP kernel, sharded on its last dim by the all-gather; the bias
    is the rhs's non-contracting dims, [2, N/tp]); forward only for those. scaling "current" / "delayed": cgemm's per-tensor FP8
    (e4m3) inside, forward only. lhs_quantizer / rhs_quantizer / quantizer_set are refused:
    cgemm quantizes inside (pass scaling).

    name: the plan's name (messages, traces). Calls with the same shapes and arguments share
    one plan per process; with scaling "delayed" the plan holds the amax history, so each
    layer needs its own: name is required then (e.g. "layer3.fc1"), and calls with one name
    share one history (TE's per-layer FP8 meta).

    Differentiable (lhs [..., K] contracting its last dim, 2-D rhs): the backward runs the
    dgrad with the paired collective and the wgrad on the lhs the forward gathered."""
    for key, value in kwargs.items():
        if key in ("lhs_quantizer", "rhs_quantizer", "quantizer_set") and value is None:
            continue
        raise TypeError(f"gemm: argument {key!r} is not taken by cgemm_jax.gemm" +
                        (" (cgemm quantizes inside: pass scaling='current' or 'delayed')"
                         if "quantizer" in key else ""))
    op = _collective(collective_op)
    for operand, x in (("lhs", lhs), ("rhs", rhs)):
        if jnp.dtype(x.dtype) not in _DTYPES:
            raise TypeError(f"{operand}: dtype {x.dtype} is not float32, bfloat16 or float16")
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"rhs: dtype {rhs.dtype} differs from lhs's {lhs.dtype}")
    if bias is not None:
        if bias.dtype != lhs.dtype:
            raise TypeError(f"bias: dtype {bias.dtype} differs from the output's {lhs.dtype}")
    if scaling not in (None, "none", "current", "delayed"):
        raise ValueError(f"scaling {scaling!r}: None, 'current' or 'delayed'")
    if scaling == "delayed" and not name:
        raise ValueError("scaling 'delayed' needs name=...: the plan holds the layer's amax "
                         "history, so each layer names its own")
    lhs_c, rhs_c = contracting_dims
    cfg = _Config(op.value, _dims(lhs_c, lhs.ndim, "lhs"), _dims(rhs_c, rhs.ndim, "rhs"),
                  bool(transpose_batch_sequence), scaling or "none",
                  _DTYPES[jnp.dtype(lhs.dtype)], str(name or ""))
    # The bias is the rhs's non-contracting dims (gemm.py's abstract), this rank's shard of them.
    n_dims = tuple(d for i, d in enumerate(rhs.shape) if i not in cfg.rhs_cdims)
    if bias is not None and tuple(bias.shape) != n_dims:
        raise ValueError(f"bias: shape {tuple(bias.shape)}: the rhs's non-contracting dims "
                         f"{n_dims} are needed (this rank's shard)")
    return _dense(lhs, rhs, bias, cfg)


# ---- The grouped GEMM. ----

@dataclasses.dataclass(frozen=True)
class _GroupedConfig:
    form: str
    lhs_cdims: tuple
    rhs_cdims: tuple
    out_dtype: str
    path: str


def _grouped_forward(group_sizes, lhs, rhs, bias, cfg):
    _context()
    d = {"name": "jax_grouped_gemm", "form": cfg.form, "num_groups": int(group_sizes.shape[0]),
         "lhs_shape": list(lhs.shape), "rhs_shape": list(rhs.shape),
         "dtype": _DTYPES[jnp.dtype(lhs.dtype)], "out_dtype": cfg.out_dtype,
         "lhs_contracting": list(cfg.lhs_cdims), "rhs_contracting": list(cfg.rhs_cdims),
         "path": cfg.path}
    if bias is not None:
        d["bias_shape"] = list(bias.shape)
    text, infos = _plan("grouped", d)
    empty_f32 = jnp.zeros((0,), jnp.float32)
    bias_arg = bias if bias is not None else jnp.zeros((0,), jnp.dtype(cfg.out_dtype))
    call = jax.ffi.ffi_call("cgemm_grouped_gemm",
                            _shaped(infos["out"], jnp.dtype(cfg.out_dtype)),
                            has_side_effect=_side_effect(False), vmap_method="sequential")
    return call(group_sizes.astype(jnp.int32), lhs, rhs, bias_arg, empty_f32, empty_f32,
                plan=text)


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def _grouped(group_sizes, lhs, rhs, bias, cfg):
    return _grouped_forward(group_sizes, lhs, rhs, bias, cfg)


def _grouped_fwd(group_sizes, lhs, rhs, bias, cfg):
    if cfg.form != "ragged_rows" or cfg.lhs_cdims != (1,) or cfg.rhs_cdims != (1,):
        raise NotImplementedError(
            "cgemm_jax.grouped_gemm differentiates the ragged-rows form with lhs [M, K] and rhs "
            f"[G, K, N] (contracting ((1,), (1,))); got {cfg.form} contracting "
            f"({cfg.lhs_cdims}, {cfg.rhs_cdims})")
    return _grouped_forward(group_sizes, lhs, rhs, bias, cfg), (group_sizes, lhs, rhs, bias)


def _grouped_bwd(cfg, residuals, dy):
    group_sizes, lhs, rhs, bias = residuals
    # dlhs: per group dy_g [m_g, N] @ rhs[g]^T (rhs [G, K, N] contracting its N).
    dgrad = _GroupedConfig("ragged_rows", (1,), (2,), _DTYPES[jnp.dtype(lhs.dtype)], cfg.path)
    dlhs = _grouped_forward(group_sizes, dy.astype(lhs.dtype), rhs, None, dgrad)
    # drhs: per group lhs_g^T @ dy_g, the groups' rows being the ragged contracting dim.
    wgrad = _GroupedConfig("ragged_contracting", (0,), (0,), _DTYPES[jnp.dtype(rhs.dtype)],
                           cfg.path)
    drhs = _grouped_forward(group_sizes, lhs, dy.astype(lhs.dtype), None, wgrad)
    dbias = None
    if bias is not None:
        # Rows past the sizes' sum (padding) are zeros whatever the bias: segment G, dropped.
        g = group_sizes.shape[0]
        rows = jnp.arange(dy.shape[0])
        segment = jnp.searchsorted(jnp.cumsum(group_sizes), rows, side="right")
        dbias = jax.ops.segment_sum(dy.astype(jnp.float32), segment,
                                    num_segments=g + 1)[:g].astype(bias.dtype)
    zero_sizes = jnp.zeros(group_sizes.shape, jax.dtypes.float0)
    return zero_sizes, dlhs, drhs, dbias


_grouped.defvjp(_grouped_fwd, _grouped_bwd)


def grouped_gemm(lhs, rhs, group_sizes, contracting_dims=((1,), (2,)), bias=None,
                 preferred_element_type=None, path="auto"):
    """G GEMMs in one call, as the seed's grouped_gemm (local to the rank). group_sizes: G int32
    (summing to at most the ragged dim; the rest is padding, zero rows of out). rhs 3-D: the ragged-rows form, lhs [M, K] (contracting (1,))
    or [K, M] ((0,)), rhs [G, K, N] ((1,)) or [G, N, K] ((2,)), out [M, N], group g owning
    rows off_g..off_g + size_g; rhs 2-D: the ragged-contracting (wgrad) form, lhs [K, M] or
    [M, K], rhs [K, N] or [N, K], out [G, M, N]. bias [G, N] or None. float32, bfloat16 or
    float16; preferred_element_type: the output dtype (default: the inputs'). path (CUDA):
    "auto", "loop", "cublas_grouped", "cublaslt_tiles". Differentiable in the ragged-rows form
    with lhs [M, K] and rhs [G, K, N]."""
    for name, x in (("lhs", lhs), ("rhs", rhs)):
        if jnp.dtype(x.dtype) not in _DTYPES:
            raise TypeError(f"{name}: dtype {x.dtype} is not float32, bfloat16 or float16")
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"rhs: dtype {rhs.dtype} differs from lhs's {lhs.dtype}")
    if group_sizes.ndim != 1 or not jnp.issubdtype(group_sizes.dtype, jnp.integer):
        raise TypeError(f"group_sizes: {group_sizes.dtype} {group_sizes.shape}: a 1-D integer "
                        "array of G sizes is needed")
    out_dtype = jnp.dtype(preferred_element_type or lhs.dtype)
    if out_dtype not in _DTYPES:
        raise TypeError(f"preferred_element_type {out_dtype}: float32, bfloat16 or float16")
    if bias is not None and jnp.dtype(bias.dtype) != out_dtype:
        raise TypeError(f"bias: dtype {bias.dtype} differs from the output's {out_dtype}")
    # The form follows the rhs's rank, so the wrapper takes the seed's 2-D / 3-D operands only
    # (the C++ plan and cgemm.Context.grouped_plan, which name the form, also take N-D ones).
    if lhs.ndim != 2 or rhs.ndim not in (2, 3):
        raise ValueError(f"cgemm_jax.grouped_gemm takes lhs 2-D and rhs 3-D (ragged rows) or 2-D "
                         f"(ragged contracting); got lhs {lhs.shape}, rhs {rhs.shape}")
    form = "ragged_rows" if rhs.ndim == 3 else "ragged_contracting"
    lhs_c, rhs_c = contracting_dims
    cfg = _GroupedConfig(form, _dims(lhs_c, lhs.ndim, "lhs"), _dims(rhs_c, rhs.ndim, "rhs"),
                         _DTYPES[out_dtype], path)
    return _grouped(group_sizes, lhs, rhs, bias, cfg)


# Before cgemm.py's MPI finalize (registered earlier, so run later).
atexit.register(shutdown)
