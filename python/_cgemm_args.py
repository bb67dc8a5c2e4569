"""Argument checks of the Python module (cgemm.py): C strings and integers checked before ctypes
would cut or wrap them, native handles, and numpy buffers checked against a plan's operands
(TensorInfo). No library call here."""

import ctypes
import numbers

import numpy as np

from _cgemm_c import MAX_NDIM

# numpy has no bfloat16: such buffers are passed as uint16 (same bytes).
_NUMPY_DTYPES = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(np.uint16),
    # numpy has no FP8 either: the bytes as uint8 (grouped plans' FP8 inputs).
    "float8_e4m3fn": np.dtype(np.uint8),
    "float8_e5m2": np.dtype(np.uint8),
}


def _bytes(s, what):
    """A C string argument; a NUL inside would end it early in C, so it is refused."""
    if s is None:
        return None
    b = str(s).encode()
    if b"\0" in b:
        raise ValueError(f"{what}: {str(s)!r} contains a NUL character")
    return b


_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _int(value, what, lo=_INT_MIN, hi=_INT_MAX):
    """An integer argument checked against its C type's range: ctypes would wrap it silently
    (2**32 + 1 into a C int is 1) and int() would truncate a float (2.7 is 2)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what}: an int is needed, got {type(value).__name__} {value!r}")
    value = int(value)
    if not lo <= value <= hi:
        raise ValueError(f"{what}: {value} is outside the C type's range {lo}..{hi}")
    return value


def _handle_int(value, what):
    """A native handle (a stream, a communicator) given as an int (numpy integers too)."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{what}: an int handle is needed, got {type(value).__name__}")
    value = int(value)
    if value < 0 or value >= 1 << (8 * ctypes.sizeof(ctypes.c_void_p)):
        raise ValueError(f"{what}: {value} is not a pointer value")
    return value


class TensorInfo:
    """One operand of a plan: global_shape, local_shape, offset (tuples, elements), nbytes,
    dtype (a name) and slices (this rank's shard of the global tensor, for numpy)."""

    def __init__(self, info):
        n = info.ndim
        self.global_shape = tuple(info.global_shape[:n])
        self.local_shape = tuple(info.local_shape[:n])
        self.offset = tuple(info.offset[:n])
        self.nbytes = int(info.bytes)
        self.dtype = info.dtype.decode()
        self.slices = tuple(slice(o, o + s) for o, s in zip(self.offset, self.local_shape))

    def empty(self):
        """An uninitialized numpy buffer for this rank's shard."""
        return np.empty(self.local_shape, _NUMPY_DTYPES[self.dtype])


def _numpy_pointer(array, info, name, writable=False, dtype=None, shape=None):
    """The address of a numpy operand checked against its TensorInfo (or dtype and shape)."""
    if info is None and dtype is None:
        if array is not None:
            raise ValueError(f"{name}: the plan has no {name}, pass None")
        return None
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name}: a numpy array is needed, got {type(array).__name__}")
    if not array.flags.c_contiguous or (writable and not array.flags.writeable):
        raise ValueError(f"{name}: the array must be C-contiguous" +
                         (" and writeable" if writable else ""))
    want_dtype = dtype if dtype is not None else _NUMPY_DTYPES[info.dtype]
    want_shape = shape if shape is not None else info.local_shape
    if array.dtype != want_dtype or array.shape != want_shape:
        raise ValueError(f"{name}: {array.dtype} {array.shape} given, the plan needs "
                         f"{want_dtype if info is None else info.dtype} {want_shape}"
                         f"{'' if info is None else ' (this rank' + chr(39) + 's shard)'}")
    return array.ctypes.data


def _set_dims(desc, field, values, what):
    lo, hi = (_INT64_MIN, _INT64_MAX) if field.endswith("_shape") else (_INT_MIN, _INT_MAX)
    values = tuple(_int(v, f"{what}[{i}]", lo, hi) for i, v in enumerate(values))
    if len(values) > MAX_NDIM:
        raise ValueError(f"{what}: {len(values)} dims, at most {MAX_NDIM}")
    for i, v in enumerate(values):
        getattr(desc, field)[i] = v
    return len(values)
