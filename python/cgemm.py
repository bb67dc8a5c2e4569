"""cgemm from Python: the C API (capi/include/cgemm/cgemm.h) through ctypes, on numpy buffers.

No build step and no MPI binding needed: Context() joins MPI_COMM_WORLD (initializing MPI
when nobody has; finalized at exit), or the communicator given as a Fortran handle
(mpi4py: comm.py2f()). Run under mpirun, every rank the same calls:

    import cgemm, numpy as np
    ctx = cgemm.Context(dp=1, backend="cpu")
    plan = ctx.plan(lhs_shape=(2, 32, 64), rhs_shape=(64, 96), bias_shape=(96,),
                    dtype="float32", collective="all_gather",
                    lhs_spec="(None, 'tpsp', None)", rhs_spec="(None, 'tpsp')",
                    bias_spec="('tpsp',)")
    x = np.empty(plan.lhs.local_shape, np.float32)      # this rank's shards
    ...
    plan.execute(x, w, b, y)
    # Device memory (CUDA backend): plan.execute_pointers(x_ptr, w_ptr, b_ptr, y_ptr, stream),
    # or python/cgemm_torch.py's op on torch tensors.
    # A grouped GEMM (experts; local to the rank): ctx.grouped_plan(...) -> GroupedPlan.
    # FP8 codes a caller keeps (pre-quantized operands): ctx.quantized_tensor(...).

The library: $CGEMM_LIBRARY if set, else the build tree's (build/lib/libcgemm.so.0 beside
this folder), else, for the modules `cmake --install` puts in PREFIX/LIBDIR/python, the
PREFIX/LIBDIR/libcgemm.so.0 beside that folder, else the loader's search path (libcgemm.so.0).
Errors raise cgemm.Error carrying the C status name and the library's message.
"""

import atexit
import ctypes
import numbers

import numpy as np

from _cgemm_args import (  # noqa: F401  (re-exported: cgemm_jax.py and the tests use them)
    _INT64_MAX, _INT64_MIN, _INT_MAX, _INT_MIN, _NUMPY_DTYPES, TensorInfo, _bytes, _handle_int,
    _int, _numpy_pointer, _set_dims)
from _cgemm_c import (  # noqa: F401  (re-exported: cgemm_jax.py and the tests use them)
    MAX_NDIM, _STATUS_NAMES, Error, _check, _ContextDesc, _ContextInfo, _ContextOptions, _GroupedPlanDesc,
    _GroupedPlanInfo, _lib, _library_path, _PlanDesc, _PlanOptions, _TensorInfo)
from _cgemm_quantized import QuantizedTensor  # noqa: F401  (Context.quantized_tensor's type)

_OPERANDS = {"lhs": 0, "rhs": 1, "bias": 2, "out": 3}
_GATHERED_LHS = 4  # CGEMM_GATHERED_LHS


def version():
    """The library's version, "0.1.0"."""
    return _lib.cgemm_version_string().decode()


def finalize():
    """Finalizes MPI if this module's Context initialized it (also run at exit)."""
    _check(_lib.cgemm_mpi_finalize())


atexit.register(finalize)


class Plan:
    """A GEMM planned on a Context (Context.plan). lhs, rhs, bias (None without one) and out
    are TensorInfo; gathered_lhs the lhs an all-gather plan gathers and can hand out (the
    weight gradient's input: execute(..., gathered_lhs=...)), None for other plans.
    lhs_quantized, rhs_quantized: whether that operand is given pre-quantized (Context.plan's
    options); prequantized: either. Destroy with close() (collective) or a with block."""

    def __init__(self, ctx, desc, options):
        handle = ctypes.c_void_p()
        _check(_lib.cgemm_plan_create_ex(ctx._handle, ctypes.byref(desc), ctypes.byref(options),
                                         ctypes.byref(handle)))
        self._handle = handle
        self._ctx = ctx  # the context must outlive the plan
        infos = {}
        for name, op in _OPERANDS.items():
            info = _TensorInfo()
            _check(_lib.cgemm_plan_tensor_info(self._handle, op, ctypes.byref(info)))
            infos[name] = TensorInfo(info) if info.ndim > 0 else None
        self.lhs, self.rhs, self.bias, self.out = (infos[k] for k in ("lhs", "rhs", "bias", "out"))
        info = _TensorInfo()
        _check(_lib.cgemm_plan_tensor_info(self._handle, _GATHERED_LHS, ctypes.byref(info)))
        self.gathered_lhs = TensorInfo(info) if info.ndim > 0 else None
        self.lhs_quantized, self.rhs_quantized = bool(options.lhs_quantized), bool(
            options.rhs_quantized)
        self.prequantized = self.lhs_quantized or self.rhs_quantized

    def _pointer(self, array, info, name, writable=False):
        return _numpy_pointer(array, info, name, writable)

    def execute(self, lhs, rhs, bias, out, stream=None, gathered_lhs=None, lhs_scale_inv=None,
                rhs_scale_inv=None):
        """Collective: out = lhs @ rhs (+ bias) on this rank's shards (numpy arrays of the
        local shapes; host memory, so the CPU backend only: other backends raise). out holds
        the result on return. gathered_lhs: None, or an array of gathered_lhs's local shape
        that an all-gather plan also writes the gathered lhs into (no second collective).
        lhs_scale_inv / rhs_scale_inv: a float32 array of one element for each operand the
        plan takes pre-quantized (Context.plan's lhs_quantized / rhs_quantized; the operand
        itself a uint8 array of FP8 codes), else None (cgemm_plan_execute_scaled).

        stream: None, or the caller's stream as an int handle (a cudaStream_t, e.g. torch's
        torch.cuda.current_stream().cuda_stream; 0, torch's default stream, is passed as
        cudaStreamLegacy): cgemm_plan_execute_on_stream. The CPU backend ignores it."""
        if self._handle is None:
            raise Error("CGEMM_ERROR_STATE", "the plan is closed")
        if self._ctx.backend != "cpu":
            # numpy arrays are host memory; the CUDA backend reads device pointers, and a host
            # pointer there is a fault or a read before the GPU wrote the output.
            raise Error("CGEMM_ERROR_INVALID_ARGUMENT",
                        f"Plan.execute takes numpy (host) arrays, which the {self._ctx.backend} "
                        "backend cannot read: use backend=\"cpu\", or the C API with device "
                        "pointers")
        args = (self._handle, self._pointer(lhs, self.lhs, "lhs"),
                self._pointer(rhs, self.rhs, "rhs"), self._pointer(bias, self.bias, "bias"),
                self._pointer(out, self.out, "out", True))
        scales = [None if v is None else _numpy_pointer(v, None, n, dtype=np.dtype(np.float32),
                                                         shape=(1,))
                  for v, n in ((lhs_scale_inv, "lhs_scale_inv"), (rhs_scale_inv, "rhs_scale_inv"))]
        if gathered_lhs is not None and self.gathered_lhs is None:
            raise ValueError("gathered_lhs: this plan hands no gathered lhs out (only "
                             "all-gather plans that do not quantize their lhs do)")
        g = None if gathered_lhs is None else self._pointer(gathered_lhs, self.gathered_lhs,
                                                            "gathered_lhs", True)
        if self.prequantized or lhs_scale_inv is not None or rhs_scale_inv is not None:
            handle = None if stream is None else (_handle_int(stream, "stream") or 1)
            _check(_lib.cgemm_plan_execute_scaled(*args, *scales, g, ctypes.c_void_p(handle)))
        elif gathered_lhs is not None:
            handle = None if stream is None else (_handle_int(stream, "stream") or 1)
            _check(_lib.cgemm_plan_execute_gathered(*args, g, ctypes.c_void_p(handle)))
        elif stream is None:
            _check(_lib.cgemm_plan_execute(*args))
        else:
            handle = _handle_int(stream, "stream")
            # torch's default stream is cuda_stream 0, the legacy default stream; NULL in the
            # C API means "no stream", so 0 is passed as cudaStreamLegacy (0x1).
            _check(_lib.cgemm_plan_execute_on_stream(*args, ctypes.c_void_p(handle or 1)))

    def execute_pointers(self, lhs, rhs, bias, out, stream=0, gathered_lhs=None,
                         lhs_scale_inv=None, rhs_scale_inv=None):
        """Collective, low level: cgemm_plan_execute_on_stream on raw addresses, for callers
        that hold device memory (python/cgemm_torch.py: t.data_ptr()). lhs, rhs, out: ints;
        bias: an int, or None/0 when the plan has none. stream: an int cudaStream_t of the
        context's GPU (0, torch's default stream, is passed as cudaStreamLegacy); the CPU
        backend ignores it. gathered_lhs: None, or the address of a buffer of gathered_lhs's
        local shape (cgemm_plan_execute_gathered). lhs_scale_inv / rhs_scale_inv: the address
        of the float32 scale_inv of each pre-quantized operand (cgemm_plan_execute_scaled).

        Nothing here checks the buffers: the CALLER guarantees that each address is the start
        of a row-major contiguous buffer of the operand's local_shape and dtype in memory the
        backend reads (device memory of the context's GPU on CUDA, host memory on CPU), that
        out does not overlap the inputs, and that the buffers stay alive until the GEMM on
        `stream` is done. A wrong address is a fault or garbage, not an Error."""
        if self._handle is None:
            raise Error("CGEMM_ERROR_STATE", "the plan is closed")
        if self.bias is not None and not bias:
            raise ValueError("bias: the plan has a bias, pass its address")
        if self.bias is None and bias:
            raise ValueError("bias: the plan has no bias, pass None")
        ptrs = [ctypes.c_void_p(_handle_int(v, name)) for v, name in
                ((lhs, "lhs"), (rhs, "rhs"), (bias or 0, "bias"), (out, "out"))]
        # 0 is torch's default stream, the legacy one; NULL in the C API means "no stream".
        handle = _handle_int(stream, "stream") or 1
        if self.prequantized or lhs_scale_inv or rhs_scale_inv:
            scales = [ctypes.c_void_p(_handle_int(v or 0, n)) for v, n in
                      ((lhs_scale_inv, "lhs_scale_inv"), (rhs_scale_inv, "rhs_scale_inv"))]
            g = ctypes.c_void_p(_handle_int(gathered_lhs or 0, "gathered_lhs"))
            _check(_lib.cgemm_plan_execute_scaled(self._handle, *ptrs, *scales, g,
                                                  ctypes.c_void_p(handle)))
            return
        if gathered_lhs:
            if self.gathered_lhs is None:
                raise ValueError("gathered_lhs: this plan hands no gathered lhs out (only "
                                 "unquantized all-gather plans do)")
            g = ctypes.c_void_p(_handle_int(gathered_lhs, "gathered_lhs"))
            _check(_lib.cgemm_plan_execute_gathered(self._handle, *ptrs, g,
                                                    ctypes.c_void_p(handle)))
            return
        _check(_lib.cgemm_plan_execute_on_stream(self._handle, *ptrs, ctypes.c_void_p(handle)))

    def capture(self, lhs, rhs, bias, out, stream=None, gathered_lhs=None):
        """The call execute(lhs, rhs, bias, out, stream, gathered_lhs) would make, captured into
        a CUDA graph (cgemm_plan_capture; nothing runs now): returns a Graph whose replay()
        runs it again on the same arrays. numpy arrays, so the CPU backend only, which emulates
        graphs (a replay runs the call); on the GPU use capture_pointers. The Graph keeps the
        arrays alive."""
        if self._handle is None:
            raise Error("CGEMM_ERROR_STATE", "the plan is closed")
        if self._ctx.backend != "cpu":
            raise Error("CGEMM_ERROR_INVALID_ARGUMENT",
                        f"Plan.capture takes numpy (host) arrays, which the {self._ctx.backend} "
                        "backend cannot read: use capture_pointers with device addresses")
        ptrs = (self._pointer(lhs, self.lhs, "lhs"), self._pointer(rhs, self.rhs, "rhs"),
                self._pointer(bias, self.bias, "bias"), self._pointer(out, self.out, "out", True))
        g = None
        if gathered_lhs is not None:
            if self.gathered_lhs is None:
                raise ValueError("gathered_lhs: this plan hands no gathered lhs out (only "
                                 "unquantized all-gather plans do)")
            g = self._pointer(gathered_lhs, self.gathered_lhs, "gathered_lhs", True)
        graph = self._capture(*ptrs, g, stream)
        graph._keep = (lhs, rhs, bias, out, gathered_lhs)
        return graph

    def capture_pointers(self, lhs, rhs, bias, out, stream=None, gathered_lhs=None):
        """capture on raw addresses (ints, as execute_pointers takes them; the same caller's
        guarantees, for as long as the Graph is replayed). stream: None (the backend's stream
        0) or an int cudaStream_t of the context's GPU, a created stream that is not being
        captured (torch.cuda.Stream().cuda_stream). A call that cannot be captured raises Error
        (CGEMM_ERROR_RUNTIME) naming the op or transport, before anything is recorded."""
        if self._handle is None:
            raise Error("CGEMM_ERROR_STATE", "the plan is closed")
        if (self.bias is not None) != bool(bias):
            raise ValueError("bias: " + ("the plan has a bias, pass its address"
                                         if self.bias is not None else
                                         "the plan has no bias, pass None"))
        if gathered_lhs and self.gathered_lhs is None:
            raise ValueError("gathered_lhs: this plan hands no gathered lhs out (only "
                             "unquantized all-gather plans do)")
        ptrs = [_handle_int(v or 0, name) for v, name in
                ((lhs, "lhs"), (rhs, "rhs"), (bias, "bias"), (out, "out"),
                 (gathered_lhs, "gathered_lhs"))]
        return self._capture(*ptrs, stream)

    def _capture(self, lhs, rhs, bias, out, gathered_lhs, stream):
        handle = ctypes.c_void_p()
        s = None if stream is None else (_handle_int(stream, "stream") or 1)
        _check(_lib.cgemm_plan_capture(self._handle, lhs, rhs, bias or None, out,
                                       gathered_lhs or None, s, ctypes.byref(handle)))
        return Graph(handle, self)

    def _execute_raw(self, lhs, rhs, bias, out, stream, gathered_lhs, lhs_scale_inv=0,
                     rhs_scale_inv=0):
        """execute_pointers without its argument checks, for callers that pass what they just
        read from their tensors (python/cgemm_torch.py): ints, 0 for no bias, no gathered lhs
        and no scale_inv, stream 0 for the legacy default stream. The C API still checks the
        plan and the NULLs (a scale_inv missing for a pre-quantized operand, or given for
        another)."""
        if self._handle is None:
            raise Error("CGEMM_ERROR_STATE", "the plan is closed")
        if self.prequantized or lhs_scale_inv or rhs_scale_inv:
            _check(_lib.cgemm_plan_execute_scaled(self._handle, lhs, rhs, bias or None, out,
                                                  lhs_scale_inv or None, rhs_scale_inv or None,
                                                  gathered_lhs or None, stream or 1))
        elif gathered_lhs:
            _check(_lib.cgemm_plan_execute_gathered(self._handle, lhs, rhs, bias or None, out,
                                                    gathered_lhs, stream or 1))
        else:
            _check(_lib.cgemm_plan_execute_on_stream(self._handle, lhs, rhs, bias or None, out,
                                                     stream or 1))

    def close(self):
        if self._handle is not None:
            _lib.cgemm_plan_destroy(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Graph:
    """One plan call captured into a CUDA graph (Plan.capture, Plan.capture_pointers,
    GroupedPlan.capture, GroupedPlan.capture_pointers; cgemm_graph): replay() runs it again, one cudaGraphLaunch on the CUDA backend, and gives
    the bytes an execute call would. Destroyed with close(), a with block, or its plan."""

    def __init__(self, handle, plan):
        self._handle, self._plan = handle, plan  # the plan must outlive the graph

    def replay(self, stream=None):
        """Launches the graph on `stream` (None: the stream it was captured from; an int
        cudaStream_t, 0 meaning the legacy default stream). Asynchronous on the CUDA backend;
        the CPU backend runs the call and returns with out written."""
        if self._handle is None or self._plan._handle is None:
            raise Error("CGEMM_ERROR_STATE", "the graph or its plan is closed")
        s = None if stream is None else (_handle_int(stream, "stream") or 1)
        _check(_lib.cgemm_graph_replay(self._handle, s))

    def close(self):
        if self._handle is not None and self._plan._handle is not None:
            _lib.cgemm_graph_destroy(self._handle)
        self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class GroupedPlan:
    """A grouped GEMM planned on a Context (Context.grouped_plan): lhs, rhs, bias (None without
    one) and out are TensorInfo (global = local shapes); num_groups, ragged_extent (what a
    call's sizes sum to at most; less leaves zero padding rows), path and loop_fallbacks come
    from cgemm_grouped_plan_get_info. Destroy with close() or a with block."""

    def __init__(self, ctx, desc):
        handle = ctypes.c_void_p()
        _check(_lib.cgemm_grouped_plan_create(ctx._handle, ctypes.byref(desc),
                                              ctypes.byref(handle)))
        self._handle, self._ctx = handle, ctx
        infos = {}
        for name, op in _OPERANDS.items():
            info = _TensorInfo()
            _check(_lib.cgemm_grouped_plan_tensor_info(self._handle, op, ctypes.byref(info)))
            infos[name] = TensorInfo(info) if info.ndim > 0 else None
        self.lhs, self.rhs, self.bias, self.out = (infos[k] for k in ("lhs", "rhs", "bias", "out"))
        self.scaled = self.lhs.dtype.startswith("float8")
        info = self._info()
        self.num_groups, self.ragged_extent = int(info.num_groups), int(info.ragged_extent)
        self.path = info.path.decode()

    def _info(self):
        if self._handle is None:
            raise Error("CGEMM_ERROR_STATE", "the plan is closed")
        info = _GroupedPlanInfo()
        _check(_lib.cgemm_grouped_plan_get_info(self._handle, ctypes.byref(info)))
        return info

    loop_fallbacks = property(lambda self: int(self._info().loop_fallbacks))

    def execute(self, group_sizes, lhs, rhs, bias, out, lhs_scale_inv=None,
                rhs_scale_inv=None, stream=None):
        """out = each group's lhs @ rhs (+ bias[g]; FP8: times lhs_scale_inv[g] *
        rhs_scale_inv[g]) on numpy arrays (host memory: the CPU backend only). group_sizes:
        int32 [G] summing to at most ragged_extent (less: padding, zero rows of out); the
        scale_invs float32 [G] for an FP8 plan, else
        None. out holds the result on return. stream: as Plan.execute's (ignored on the CPU)."""
        if self._ctx.backend != "cpu":
            raise Error("CGEMM_ERROR_INVALID_ARGUMENT",
                        f"GroupedPlan.execute takes numpy (host) arrays, which the "
                        f"{self._ctx.backend} backend cannot read: use execute_pointers")
        g = (self.num_groups,)
        scales = [None if s is None else _numpy_pointer(s, None, n, dtype=np.dtype(np.float32),
                                                        shape=g)
                  for s, n in ((lhs_scale_inv, "lhs_scale_inv"), (rhs_scale_inv, "rhs_scale_inv"))]
        self.execute_pointers(
            _numpy_pointer(group_sizes, None, "group_sizes", dtype=np.dtype(np.int32), shape=g),
            _numpy_pointer(lhs, self.lhs, "lhs"), _numpy_pointer(rhs, self.rhs, "rhs"),
            _numpy_pointer(bias, self.bias, "bias"), _numpy_pointer(out, self.out, "out", True),
            scales[0], scales[1], stream)

    def execute_pointers(self, group_sizes, lhs, rhs, bias, out, lhs_scale_inv=None,
                         rhs_scale_inv=None, stream=None):
        """cgemm_grouped_plan_execute on raw addresses (ints; None or 0 for an absent bias or
        scale_inv): device memory of the context's GPU on CUDA, host memory on CPU. Nothing here
        checks the buffers: the CALLER guarantees their shapes, dtypes and lifetimes, as for
        Plan.execute_pointers. stream: None (the backend's stream 0) or an int cudaStream_t (0,
        torch's default stream, is passed as cudaStreamLegacy)."""
        self._info()
        ptrs = [ctypes.c_void_p(_handle_int(v or 0, name)) for v, name in (
            (group_sizes, "group_sizes"), (lhs, "lhs"), (rhs, "rhs"), (bias, "bias"),
            (out, "out"), (lhs_scale_inv, "lhs_scale_inv"), (rhs_scale_inv, "rhs_scale_inv"))]
        handle = None if stream is None else ctypes.c_void_p(_handle_int(stream, "stream") or 1)
        _check(_lib.cgemm_grouped_plan_execute(self._handle, *ptrs, handle))

    def check_device_sizes(self):
        """Path "cublaslt_device_tiles" on CUDA: waits for the backend's work, then raises Error
        when a call or replay since the last report had bad group sizes in device memory (its
        out was NaN), naming how many and the last one's fault. Otherwise nothing (the CPU
        backend checks sizes before it runs)."""
        self._info()
        _check(_lib.cgemm_grouped_plan_check_device_sizes(self._handle))

    def capture(self, group_sizes, lhs, rhs, bias, out, lhs_scale_inv=None, rhs_scale_inv=None,
                stream=None):
        """The call execute(...) would make, captured into a CUDA graph
        (cgemm_grouped_plan_capture; nothing runs now): a Graph whose replay() runs it again on
        the same arrays, reading group_sizes as they are then (change them between replays;
        their count and sum may not). numpy arrays, so the CPU backend only, which emulates
        graphs; on the GPU use capture_pointers. Only a plan with path "cublaslt_device_tiles"
        can be captured; others raise Error naming why. The Graph keeps the arrays alive."""
        self._info()
        if self._ctx.backend != "cpu":
            raise Error("CGEMM_ERROR_INVALID_ARGUMENT",
                        f"GroupedPlan.capture takes numpy (host) arrays, which the "
                        f"{self._ctx.backend} backend cannot read: use capture_pointers")
        g = (self.num_groups,)
        f32, i32 = np.dtype(np.float32), np.dtype(np.int32)
        ptrs = [_numpy_pointer(group_sizes, None, "group_sizes", dtype=i32, shape=g),
                _numpy_pointer(lhs, self.lhs, "lhs"), _numpy_pointer(rhs, self.rhs, "rhs"),
                _numpy_pointer(bias, self.bias, "bias"), _numpy_pointer(out, self.out, "out", True)]
        ptrs += [None if v is None else _numpy_pointer(v, None, n, dtype=f32, shape=g)
                 for v, n in ((lhs_scale_inv, "lhs_scale_inv"), (rhs_scale_inv, "rhs_scale_inv"))]
        graph = self.capture_pointers(*ptrs, stream=stream)
        graph._keep = (group_sizes, lhs, rhs, bias, out, lhs_scale_inv, rhs_scale_inv)
        return graph

    def capture_pointers(self, group_sizes, lhs, rhs, bias, out, lhs_scale_inv=None,
                         rhs_scale_inv=None, stream=None):
        """capture on raw addresses (ints, as execute_pointers takes them, group_sizes in
        device memory on CUDA; the same caller's guarantees, for as long as the Graph is
        replayed). stream: None (the backend's stream 0) or an int cudaStream_t of the context's
        GPU that is not being captured."""
        self._info()
        ptrs = [ctypes.c_void_p(_handle_int(v or 0, name)) for v, name in (
            (group_sizes, "group_sizes"), (lhs, "lhs"), (rhs, "rhs"), (bias, "bias"),
            (out, "out"), (lhs_scale_inv, "lhs_scale_inv"), (rhs_scale_inv, "rhs_scale_inv"))]
        s = None if stream is None else ctypes.c_void_p(_handle_int(stream, "stream") or 1)
        handle = ctypes.c_void_p()
        _check(_lib.cgemm_grouped_plan_capture(self._handle, *ptrs, s, ctypes.byref(handle)))
        return Graph(handle, self)

    def close(self):
        if self._handle is not None:
            _lib.cgemm_grouped_plan_destroy(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Context:
    """The mesh on a communicator (collective): dp x fsdp x tp (tp 0: world size / (dp fsdp)),
    the axis names the specs use, the backend ("cpu", "cuda", "auto") and the overlap knobs.
    comm: None for MPI_COMM_WORLD (MPI initialized here if needed), or a Fortran handle (mpi4py:
    comm.py2f()). nccl_comm: None, or the caller's NCCL communicator over this rank's TP group
    as an int handle (an ncclComm_t), which the CUDA backend borrows instead of making its own
    (the caller destroys it after close()). gpu_sharing: let ranks of a host share its GPUs on
    the CUDA backend (copy engines, no NCCL; for correctness runs, not speed; ignored by the
    CPU backend); off, more ranks than GPUs give the CPU backend under "auto" and an Error under
    "cuda". timeout_s: the deadline of every wait of the library, seconds (None: the one in
    force, else 300; at most 1e7): a rank whose wait outlives it (a peer that never makes the
    same call, a dead or stopped peer) prints one line naming the wait and ends the job with
    MPI_Abort (exit status 4). All through cgemm_context_options
    (cgemm_context_create_world_ex / cgemm_context_create_ex_fortran).
    Every rank passes the same arguments (compared over the communicator: ranks that differ
    get an Error naming the argument on every rank).
    fsdp, fsdp_axis: the fsdp axis of a dp x fsdp x tp mesh (docs/FSDP.md): fsdp ranks split
    each replica's batch and shard its weights; a weight given sharded over fsdp_axis where
    gemm.py gathers it is gathered inside its GEMM (pass the shard: plan.rhs.local_shape).
    compute_stream_priority, communication_stream_priority: 0 (the highest) or more, CUDA only;
    use_ce: the copy engines move the ring's chunks where a TP group shares a node (False:
    NCCL); num_sm_for_communication: Transformer Engine's SM bound, accepted WITHOUT EFFECT
    (the copy engines take no SMs; capping NCCL's CTAs starved it), at least 1.
    Attributes: rank, size, dp, tp, fsdp, dp_rank, tp_rank, fsdp_rank, backend, gpu_sharing
    (as asked)."""

    def __init__(self, dp=1, tp=0, backend="auto", dp_axis="dp", tpsp_axis="tpsp",
                 overlap="auto", num_max_streams=3, chunks_per_rank=1,
                 aggregate_all_gather=False, comm=None, nccl_comm=None, gpu_sharing=False,
                 timeout_s=None, fsdp=1, fsdp_axis="fsdp", compute_stream_priority=0,
                 communication_stream_priority=0, use_ce=True, num_sm_for_communication=None):
        desc = _ContextDesc()
        _lib.cgemm_context_desc_init(ctypes.byref(desc))
        desc.dp, desc.tp = _int(dp, "dp"), _int(tp, "tp")
        desc.dp_axis, desc.tpsp_axis = _bytes(dp_axis, "dp_axis"), _bytes(tpsp_axis, "tpsp_axis")
        desc.backend, desc.overlap = _bytes(backend, "backend"), _bytes(overlap, "overlap")
        desc.num_max_streams = _int(num_max_streams, "num_max_streams")
        desc.chunks_per_rank = _int(chunks_per_rank, "chunks_per_rank")
        desc.aggregate_all_gather = int(bool(aggregate_all_gather))
        opts = _ContextOptions()
        _check(_lib.cgemm_context_options_init(ctypes.byref(opts), ctypes.sizeof(opts)))
        if not isinstance(gpu_sharing, numbers.Integral) or int(gpu_sharing) not in (0, 1):
            raise ValueError(f"gpu_sharing: True or False, got {gpu_sharing!r}")
        opts.gpu_sharing = int(gpu_sharing)
        opts.fsdp = _int(fsdp, "fsdp")
        opts.fsdp_axis = _bytes(fsdp_axis, "fsdp_axis")
        opts.compute_stream_priority = _int(compute_stream_priority, "compute_stream_priority")
        opts.communication_stream_priority = _int(communication_stream_priority,
                                                  "communication_stream_priority")
        if not isinstance(use_ce, numbers.Integral) or int(use_ce) not in (0, 1):
            raise ValueError(f"use_ce: True or False, got {use_ce!r}")
        opts.no_ce = 0 if use_ce else 1
        if num_sm_for_communication is not None:  # None: the C default (0 bytes), so an
            # older library, which refuses bytes it does not know, still takes the struct
            if _int(num_sm_for_communication, "num_sm_for_communication") < 1:
                raise ValueError(f"num_sm_for_communication: at least 1, got "
                                 f"{num_sm_for_communication}")
            opts.num_sm_for_communication = num_sm_for_communication
        if timeout_s is not None:
            if isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real):
                raise TypeError(f"timeout_s: a number of seconds is needed, got "
                                f"{type(timeout_s).__name__} {timeout_s!r}")
            # The C API refuses what is out of bounds (0 would mean "the default" there).
            if float(timeout_s) == 0.0:
                raise ValueError("timeout_s: 0 is no deadline cgemm keeps; pass None for the "
                                 "default")
            opts.timeout_s = float(timeout_s)
        if nccl_comm is not None:
            comm_handle = _handle_int(nccl_comm, "nccl_comm")
            if comm_handle == 0:
                raise ValueError("nccl_comm: 0 is not an NCCL communicator (pass None for none)")
            opts.nccl_comm = comm_handle
        handle = ctypes.c_void_p()
        if comm is None:
            _check(_lib.cgemm_context_create_world_ex(ctypes.byref(desc), ctypes.byref(opts),
                                                      ctypes.byref(handle)))
        else:
            _check(_lib.cgemm_context_create_ex_fortran(_int(comm, "comm"), ctypes.byref(desc),
                                                        ctypes.byref(opts), ctypes.byref(handle)))
        self._handle = handle
        self.gpu_sharing = bool(gpu_sharing)
        info = _ContextInfo()
        _check(_lib.cgemm_context_get_info(self._handle, ctypes.byref(info)))
        self.rank, self.size = info.world_rank, info.world_size
        self.dp, self.tp, self.dp_rank, self.tp_rank = info.dp, info.tp, info.dp_rank, info.tp_rank
        self.backend = info.backend.decode()
        self.dp_axis, self.tpsp_axis = str(dp_axis), str(tpsp_axis)
        fsdp_size, fsdp_rank = ctypes.c_int(), ctypes.c_int()
        _check(_lib.cgemm_context_get_fsdp(self._handle, ctypes.byref(fsdp_size),
                                           ctypes.byref(fsdp_rank)))
        self.fsdp, self.fsdp_rank, self.fsdp_axis = fsdp_size.value, fsdp_rank.value, str(fsdp_axis)

    def plan(self, lhs_shape, rhs_shape, bias_shape=None, dtype="bfloat16", out_dtype=None,
             lhs_spec=None, rhs_spec=None, bias_spec=None, contracting_dims=((-1,), (0,)),
             collective="none", transpose_batch_sequence=False, name="gemm", scaling=None,
             lhs_format=None, rhs_format=None, margin=0, amax_history_len=0,
             amax_compute_algo=None, lhs_quantized=False, rhs_quantized=False):
        """Collective: a Plan of lhs @ rhs (+ bias) with global shapes and PartitionSpecs as
        strings in Python's notation ("('dp', 'tpsp', None)"; None: unsharded).

        Quantization (cgemm_plan_options, cgemm-run's words): scaling None or "none" (the GEMM
        in dtype), "current" or "delayed" (per-tensor FP8), "mxfp8", "nvfp4", "nvfp4_2d";
        lhs_format / rhs_format "e4m3" (None) or "e5m2"; margin 0..127; amax_history_len (0:
        1024; at most 2**23) and amax_compute_algo ("max" or "most_recent") for delayed
        scaling. The buffers stay in dtype: the plan quantizes them on every call, except an
        operand given pre-quantized (lhs_quantized / rhs_quantized, current or delayed
        scaling): its buffer holds lhs_format / rhs_format codes (uint8), contracting its
        trailing dims, and each call passes its scale_inv (execute's lhs_scale_inv /
        rhs_scale_inv: one scale for the global tensor, the same on every rank).

        Every rank passes the same arguments (compared over the communicator, the name
        excepted: ranks that differ get an Error naming the argument on every rank). Integers
        out of their C type's range and non-integers raise ValueError / TypeError, and strings
        with a NUL ValueError, naming the argument, before any C call."""
        desc = _PlanDesc()
        _lib.cgemm_plan_desc_init(ctypes.byref(desc))
        desc.name = _bytes(name, "name")

        def dims(field, values, what):
            return _set_dims(desc, field, values, what)

        desc.lhs_ndim = dims("lhs_shape", lhs_shape, "lhs_shape")
        desc.rhs_ndim = dims("rhs_shape", rhs_shape, "rhs_shape")
        if bias_shape is not None:
            desc.bias_ndim = dims("bias_shape", bias_shape, "bias_shape")
        desc.dtype, desc.out_dtype = _bytes(dtype, "dtype"), _bytes(out_dtype, "out_dtype")
        desc.lhs_spec, desc.rhs_spec = _bytes(lhs_spec, "lhs_spec"), _bytes(rhs_spec, "rhs_spec")
        desc.bias_spec = _bytes(bias_spec, "bias_spec")
        desc.lhs_contracting_ndim = dims("lhs_contracting", contracting_dims[0], "lhs dims")
        desc.rhs_contracting_ndim = dims("rhs_contracting", contracting_dims[1], "rhs dims")
        desc.collective = _bytes(collective, "collective")
        desc.transpose_batch_sequence = int(bool(transpose_batch_sequence))
        opts = _PlanOptions()
        _check(_lib.cgemm_plan_options_init(ctypes.byref(opts), ctypes.sizeof(opts)))
        opts.scaling = _bytes(scaling, "scaling")
        opts.amax_compute_algo = _bytes(amax_compute_algo, "amax_compute_algo")
        opts.lhs_format, opts.rhs_format = _bytes(lhs_format, "lhs_format"), _bytes(rhs_format,
                                                                                    "rhs_format")
        opts.margin = _int(margin, "margin")
        opts.amax_history_len = _int(amax_history_len, "amax_history_len")
        opts.lhs_quantized = int(bool(lhs_quantized))
        opts.rhs_quantized = int(bool(rhs_quantized))
        plan = Plan(self, desc, opts)
        plan.scaling = scaling or "none"  # quantized plans have no backward (cgemm_torch)
        return plan

    def grouped_plan(self, lhs_shape, rhs_shape, num_groups, bias_shape=None, dtype="bfloat16",
                     rhs_dtype=None, out_dtype=None, contracting_dims=((1,), (2,)),
                     form="ragged_rows", path="auto", scaling=None, name="grouped_gemm"):
        """A GroupedPlan (cgemm_grouped_plan_create; local to this rank, not collective): G =
        num_groups GEMMs in one call, one dim ragged (gemm.py's grouped_gemm). form
        "ragged_rows": lhs [M, K] (contracting (1,)) or [K, M] ((0,)), rhs [G, K, N] ((1,)) or
        [G, N, K] ((2,)), out [M, N]; "ragged_contracting": lhs [K, M] or [M, K], rhs [K, N] or
        [N, K], out [G, M, N]. bias_shape None or (G, N). dtype "float32", "float16", "bfloat16"
        or FP8 "float8_e4m3fn" / "float8_e5m2" with scaling "current" or "delayed" (a scale_inv
        per group and operand; lhs [M, K] with rhs [G, N, K] or, ragged contracting, [N, K]).
        out_dtype: gemm.py's
        preferred_element_type. path (CUDA): "auto", "loop", "cublas_grouped", "cublaslt_tiles",
        "cublaslt_device_tiles" (sizes read on the device: capturable, see GroupedPlan.capture).
        Errors as Context.plan's."""
        desc = _GroupedPlanDesc()
        _lib.cgemm_grouped_plan_desc_init(ctypes.byref(desc))
        desc.name, desc.form = _bytes(name, "name"), _bytes(form, "form")
        desc.num_groups = _int(num_groups, "num_groups", _INT64_MIN, _INT64_MAX)
        desc.lhs_ndim = _set_dims(desc, "lhs_shape", lhs_shape, "lhs_shape")
        desc.rhs_ndim = _set_dims(desc, "rhs_shape", rhs_shape, "rhs_shape")
        if bias_shape is not None:
            desc.bias_ndim = _set_dims(desc, "bias_shape", bias_shape, "bias_shape")
        desc.dtype, desc.rhs_dtype = _bytes(dtype, "dtype"), _bytes(rhs_dtype, "rhs_dtype")
        desc.out_dtype = _bytes(out_dtype, "out_dtype")
        desc.lhs_contracting_ndim = _set_dims(desc, "lhs_contracting", contracting_dims[0],
                                              "lhs dims")
        desc.rhs_contracting_ndim = _set_dims(desc, "rhs_contracting", contracting_dims[1],
                                              "rhs dims")
        desc.path, desc.scaling = _bytes(path, "path"), _bytes(scaling, "scaling")
        return GroupedPlan(self, desc)

    def quantized_tensor(self, shape, dtype="bfloat16", format="e4m3", scaling="current",
                         margin=0, amax_history_len=0, amax_compute_algo=None, rowwise=True,
                         colwise=True, name="tensor"):
        """Collective: a QuantizedTensor (cgemm_quantized_tensor_create), the quantizer of
        this rank's shard `shape` [R, C] of a tensor in dtype, into FP8 `format` codes with
        per-tensor `scaling` ("current" or "delayed"; margin, amax_history_len,
        amax_compute_algo as Context.plan's). Every rank passes the same arguments (the name
        excepted)."""
        return QuantizedTensor(self, shape, dtype, format, scaling, margin, amax_history_len,
                               amax_compute_algo, rowwise, colwise, name)

    def close(self):
        """Collective; every plan of this context must be closed first."""
        if self._handle is not None:
            _check(_lib.cgemm_context_destroy(self._handle))
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
