"""cgemm.QuantizedTensor: FP8 codes a caller keeps (capi/include/cgemm/cgemm_quantized.h), to
pass to plans that take pre-quantized operands (Context.plan's lhs_quantized / rhs_quantized).
Made by Context.quantized_tensor(...); kept apart from cgemm.py so each file holds one idea."""

import ctypes

import numpy as np

from _cgemm_args import _NUMPY_DTYPES, _bytes, _handle_int, _int, _numpy_pointer
from _cgemm_c import _check, _lib, _QuantizedTensorDesc


class QuantizedTensor:
    """The quantizer of this rank's shard [R, C] of one tensor: each quantize() writes its FP8
    codes rowwise [R, C] (for a GEMM contracting C) and colwise [C, R] (contracting R: Hopper's
    FP8 GEMM reads both operands contracting their last dim) into the caller's buffers, with
    one float32 scale_inv, the same on every rank (the amax is max-reduced over the context's
    ranks; "current" scaling takes this call's amax, "delayed" the history of earlier calls,
    as Transformer Engine's recipes). quantize() is collective: every rank calls it, in the
    same order as its other collective calls. Destroy with close() or a with block."""

    def __init__(self, ctx, shape, dtype, format, scaling, margin, amax_history_len,
                 amax_compute_algo, rowwise, colwise, name):
        if len(tuple(shape)) != 2:
            raise ValueError(f"shape {tuple(shape)}: this rank's 2-D shard [R, C]")
        desc = _QuantizedTensorDesc()
        _lib.cgemm_quantized_tensor_desc_init(ctypes.byref(desc))
        desc.name = _bytes(name, "name")
        desc.rows, desc.cols = (_int(v, f"shape[{i}]", -2**63, 2**63 - 1)
                                for i, v in enumerate(shape))
        desc.dtype, desc.format = _bytes(dtype, "dtype"), _bytes(format, "format")
        desc.scaling = _bytes(scaling, "scaling")
        desc.margin = _int(margin, "margin")
        desc.amax_history_len = _int(amax_history_len, "amax_history_len")
        desc.amax_compute_algo = _bytes(amax_compute_algo, "amax_compute_algo")
        desc.rowwise, desc.colwise = int(bool(rowwise)), int(bool(colwise))
        handle = ctypes.c_void_p()
        _check(_lib.cgemm_quantized_tensor_create(ctx._handle, ctypes.byref(desc),
                                                  ctypes.byref(handle)))
        self._handle, self._ctx = handle.value, ctx
        self.shape = (int(shape[0]), int(shape[1]))
        self.dtype, self.format, self.scaling = dtype, format, scaling
        self.rowwise, self.colwise = bool(rowwise), bool(colwise)

    def quantize(self, src, rowwise=None, colwise=None, scale_inv=None):
        """Quantizes the numpy array src (shape, dtype: bfloat16 as uint16) into the numpy
        buffers given (uint8 codes [R, C] and [C, R], a float32 array of one element), or new
        ones where None; returns (rowwise, colwise, scale_inv), None for a copy not kept."""
        if self._ctx.backend == "cuda":
            raise ValueError("quantize: numpy arrays are host memory; the CUDA backend takes "
                             "device addresses: quantize_pointers(...)")
        r, c = self.shape
        src_p = _numpy_pointer(src, None, "src", dtype=_NUMPY_DTYPES[self.dtype], shape=(r, c))
        out, ptrs = [], []
        for keep, buf, shape, dtype, what in (
                (self.rowwise, rowwise, (r, c), np.uint8, "rowwise"),
                (self.colwise, colwise, (c, r), np.uint8, "colwise"),
                (True, scale_inv, (1,), np.float32, "scale_inv")):
            if buf is None and keep:
                buf = np.empty(shape, dtype)
            elif buf is not None and not keep:
                raise ValueError(f"{what}: this tensor keeps no {what} copy, pass None")
            out.append(buf)
            ptrs.append(None if buf is None else _numpy_pointer(buf, None, what, True, dtype, shape))
        self.quantize_pointers(src_p, *ptrs)
        return tuple(out)

    def quantize_pointers(self, src, rowwise, colwise, scale_inv, stream=0):
        """quantize() on addresses (ints) in the backend's memory (device pointers on the CUDA
        backend, e.g. torch's data_ptr()), ordered on `stream` (a cudaStream_t as an int; 0:
        the backend's stream 0); None or 0 for a copy not kept. The library checks what it
        can (a NULL source or scale_inv, a copy missing or not kept)."""
        ptrs = [ctypes.c_void_p(_handle_int(v or 0, w))
                for v, w in ((src, "src"), (rowwise, "rowwise"), (colwise, "colwise"),
                             (scale_inv, "scale_inv"), (stream, "stream"))]
        _check(_lib.cgemm_quantized_tensor_quantize(self._handle, *ptrs))

    def scale_state(self):
        """The scale state as a float32 numpy array (scale, scale_inv, amax, and for delayed
        scaling the step count and the amax history): save it with a checkpoint."""
        n = ctypes.c_size_t()
        _check(_lib.cgemm_quantized_tensor_get_scale_state(self._handle, None, ctypes.byref(n)))
        state = np.empty(n.value, np.float32)
        _check(_lib.cgemm_quantized_tensor_get_scale_state(
            self._handle, state.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), ctypes.byref(n)))
        return state

    def set_scale_state(self, state):
        """Sets the scale state back (a resumed run); its length must be scale_state()'s."""
        state = np.ascontiguousarray(state, np.float32)
        _check(_lib.cgemm_quantized_tensor_set_scale_state(
            self._handle, state.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), state.size))

    def close(self):
        """Not collective."""
        if self._handle is not None:
            _lib.cgemm_quantized_tensor_destroy(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
