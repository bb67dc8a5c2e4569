"""The C API (capi/include/cgemm/cgemm.h) as ctypes sees it: its structs, field for field, its
status names, and libcgemm.so.0 loaded with every function's signature. python/cgemm.py is the
module to use; this one only declares (kept apart so each file holds one idea).

The library: $CGEMM_LIBRARY if set, else the build tree's (build/lib/libcgemm.so.0 beside
this folder), else, for the modules `cmake --install` puts in PREFIX/LIBDIR/python, the
PREFIX/LIBDIR/libcgemm.so.0 beside that folder, else the loader's search path (libcgemm.so.0).
"""

import ctypes
import os

MAX_NDIM = 8

_STATUS_NAMES = {
    0: "CGEMM_SUCCESS",
    1: "CGEMM_ERROR_INVALID_ARGUMENT",
    2: "CGEMM_ERROR_PLAN",
    3: "CGEMM_ERROR_BACKEND",
    4: "CGEMM_ERROR_RUNTIME",
    5: "CGEMM_ERROR_OUT_OF_MEMORY",
    6: "CGEMM_ERROR_MPI",
    7: "CGEMM_ERROR_INTERNAL",
    8: "CGEMM_ERROR_STATE",
}


class _ContextDesc(ctypes.Structure):
    _fields_ = [
        ("dp", ctypes.c_int),
        ("tp", ctypes.c_int),
        ("dp_axis", ctypes.c_char_p),
        ("tpsp_axis", ctypes.c_char_p),
        ("backend", ctypes.c_char_p),
        ("overlap", ctypes.c_char_p),
        ("num_max_streams", ctypes.c_int),
        ("chunks_per_rank", ctypes.c_int),
        ("aggregate_all_gather", ctypes.c_int),
    ]


class _ContextOptions(ctypes.Structure):
    # cgemm_context_options: struct_size says which version of it this module holds.
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("gpu_sharing", ctypes.c_int),
        ("nccl_comm", ctypes.c_void_p),
        ("timeout_s", ctypes.c_double),
        ("fsdp", ctypes.c_int),
        ("fsdp_axis", ctypes.c_char_p),
        ("compute_stream_priority", ctypes.c_int),
        ("communication_stream_priority", ctypes.c_int),
        ("no_ce", ctypes.c_int),
        ("num_sm_for_communication", ctypes.c_int),
    ]


class _ContextInfo(ctypes.Structure):
    _fields_ = [
        ("world_rank", ctypes.c_int),
        ("world_size", ctypes.c_int),
        ("dp", ctypes.c_int),
        ("tp", ctypes.c_int),
        ("dp_rank", ctypes.c_int),
        ("tp_rank", ctypes.c_int),
        ("backend", ctypes.c_char_p),
    ]


_Dims64 = ctypes.c_int64 * MAX_NDIM
_Dims32 = ctypes.c_int * MAX_NDIM


class _PlanDesc(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("lhs_ndim", ctypes.c_int),
        ("lhs_shape", _Dims64),
        ("rhs_ndim", ctypes.c_int),
        ("rhs_shape", _Dims64),
        ("bias_ndim", ctypes.c_int),
        ("bias_shape", _Dims64),
        ("dtype", ctypes.c_char_p),
        ("out_dtype", ctypes.c_char_p),
        ("lhs_spec", ctypes.c_char_p),
        ("rhs_spec", ctypes.c_char_p),
        ("bias_spec", ctypes.c_char_p),
        ("lhs_contracting_ndim", ctypes.c_int),
        ("lhs_contracting", _Dims32),
        ("rhs_contracting_ndim", ctypes.c_int),
        ("rhs_contracting", _Dims32),
        ("collective", ctypes.c_char_p),
        ("transpose_batch_sequence", ctypes.c_int),
    ]


class _PlanOptions(ctypes.Structure):
    # cgemm_plan_options: struct_size says which version of it this module holds.
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("scaling", ctypes.c_char_p),
        ("lhs_format", ctypes.c_char_p),
        ("rhs_format", ctypes.c_char_p),
        ("margin", ctypes.c_int),
        ("amax_history_len", ctypes.c_int),
        ("amax_compute_algo", ctypes.c_char_p),
        ("lhs_quantized", ctypes.c_int),
        ("rhs_quantized", ctypes.c_int),
    ]


class _GroupedPlanDesc(ctypes.Structure):
    _c, _i64, _s = ctypes.c_int, ctypes.c_int64, ctypes.c_char_p
    _fields_ = [("name", _s), ("form", _s), ("num_groups", _i64),
                ("lhs_ndim", _c), ("lhs_shape", _Dims64), ("rhs_ndim", _c), ("rhs_shape", _Dims64),
                ("bias_ndim", _c), ("bias_shape", _Dims64),
                ("dtype", _s), ("rhs_dtype", _s), ("out_dtype", _s),
                ("lhs_contracting_ndim", _c), ("lhs_contracting", _Dims32),
                ("rhs_contracting_ndim", _c), ("rhs_contracting", _Dims32),
                ("path", _s), ("scaling", _s)]


class _GroupedPlanInfo(ctypes.Structure):
    _fields_ = [("num_groups", ctypes.c_int64), ("ragged_extent", ctypes.c_int64),
                ("path", ctypes.c_char_p), ("loop_fallbacks", ctypes.c_int64)]


class _TensorInfo(ctypes.Structure):
    _fields_ = [
        ("ndim", ctypes.c_int),
        ("global_shape", _Dims64),
        ("local_shape", _Dims64),
        ("offset", _Dims64),
        ("bytes", ctypes.c_int64),
        ("dtype", ctypes.c_char_p),
    ]


def _library_path():
    env = os.environ.get("CGEMM_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    # The source tree's python/ beside build/, or `cmake --install`'s LIBDIR/python beside
    # LIBDIR/libcgemm.so.0; else the loader's search path.
    for candidate in (os.path.join(os.path.dirname(here), "build", "lib", "libcgemm.so.0"),
                      os.path.join(os.path.dirname(here), "libcgemm.so.0")):
        if os.path.exists(candidate):
            return candidate
    return "libcgemm.so.0"


class _QuantizedTensorDesc(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("rows", ctypes.c_int64),
        ("cols", ctypes.c_int64),
        ("dtype", ctypes.c_char_p),
        ("format", ctypes.c_char_p),
        ("scaling", ctypes.c_char_p),
        ("margin", ctypes.c_int),
        ("amax_history_len", ctypes.c_int),
        ("amax_compute_algo", ctypes.c_char_p),
        ("rowwise", ctypes.c_int),
        ("colwise", ctypes.c_int),
    ]


def _load():
    # RTLD_GLOBAL: Open MPI loads its components with dlopen and they look for libmpi's
    # symbols globally (mpi4py loads libmpi the same way).
    path = _library_path()
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        raise ImportError(f"cgemm: cannot load the library {path} ({e}): build cgemm first "
                          "(bash scripts/build.sh, or scripts/demo.sh), or set CGEMM_LIBRARY") \
            from None
    status = ctypes.c_int
    c_void_pp = ctypes.POINTER(ctypes.c_void_p)
    sigs = {
        "cgemm_version_string": (ctypes.c_char_p, []),
        "cgemm_last_error": (ctypes.c_char_p, []),
        "cgemm_context_desc_init": (None, [ctypes.POINTER(_ContextDesc)]),
        "cgemm_context_get_info": (status, [ctypes.c_void_p, ctypes.POINTER(_ContextInfo)]),
        "cgemm_context_get_fsdp": (status, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int),
                                            ctypes.POINTER(ctypes.c_int)]),
        "cgemm_context_destroy": (status, [ctypes.c_void_p]),
        "cgemm_mpi_finalize": (status, []),
        "cgemm_plan_desc_init": (None, [ctypes.POINTER(_PlanDesc)]),
        "cgemm_plan_options_init": (status, [ctypes.POINTER(_PlanOptions), ctypes.c_size_t]),
        "cgemm_plan_create_ex": (
            status, [ctypes.c_void_p, ctypes.POINTER(_PlanDesc), ctypes.POINTER(_PlanOptions),
                     c_void_pp]),
        "cgemm_plan_destroy": (None, [ctypes.c_void_p]),
        "cgemm_plan_tensor_info": (
            status, [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(_TensorInfo)]),
        "cgemm_plan_execute": (status, [ctypes.c_void_p] * 5),
        "cgemm_plan_execute_on_stream": (status, [ctypes.c_void_p] * 6),
        "cgemm_plan_execute_gathered": (status, [ctypes.c_void_p] * 7),
        "cgemm_plan_execute_scaled": (status, [ctypes.c_void_p] * 9),
        "cgemm_plan_capture": (status, [ctypes.c_void_p] * 7 + [c_void_pp]),
        "cgemm_graph_replay": (status, [ctypes.c_void_p] * 2),
        "cgemm_graph_destroy": (None, [ctypes.c_void_p]),
        "cgemm_grouped_plan_desc_init": (None, [ctypes.POINTER(_GroupedPlanDesc)]),
        "cgemm_grouped_plan_create": (
            status, [ctypes.c_void_p, ctypes.POINTER(_GroupedPlanDesc), c_void_pp]),
        "cgemm_grouped_plan_destroy": (None, [ctypes.c_void_p]),
        "cgemm_grouped_plan_tensor_info": (
            status, [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(_TensorInfo)]),
        "cgemm_grouped_plan_get_info": (
            status, [ctypes.c_void_p, ctypes.POINTER(_GroupedPlanInfo)]),
        "cgemm_grouped_plan_execute": (status, [ctypes.c_void_p] * 9),
        "cgemm_grouped_plan_capture": (status, [ctypes.c_void_p] * 9 + [c_void_pp]),
        "cgemm_grouped_plan_check_device_sizes": (status, [ctypes.c_void_p]),
        "cgemm_quantized_tensor_desc_init": (None, [ctypes.POINTER(_QuantizedTensorDesc)]),
        "cgemm_quantized_tensor_create": (
            status, [ctypes.c_void_p, ctypes.POINTER(_QuantizedTensorDesc), c_void_pp]),
        "cgemm_quantized_tensor_quantize": (status, [ctypes.c_void_p] * 6),
        "cgemm_quantized_tensor_get_scale_state": (
            status, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float),
                     ctypes.POINTER(ctypes.c_size_t)]),
        "cgemm_quantized_tensor_set_scale_state": (
            status, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.c_size_t]),
        "cgemm_quantized_tensor_destroy": (None, [ctypes.c_void_p]),
        "cgemm_context_options_init": (
            status, [ctypes.POINTER(_ContextOptions), ctypes.c_size_t]),
        "cgemm_context_create_world_ex": (
            status, [ctypes.POINTER(_ContextDesc), ctypes.POINTER(_ContextOptions), c_void_pp]),
        "cgemm_context_create_ex_fortran": (
            status, [ctypes.c_int, ctypes.POINTER(_ContextDesc), ctypes.POINTER(_ContextOptions),
                     c_void_pp]),
    }
    for name, (restype, argtypes) in sigs.items():
        f = getattr(lib, name)
        f.restype = restype
        f.argtypes = argtypes
    return lib


_lib = _load()


class Error(RuntimeError):
    """A failed call: status (e.g. "CGEMM_ERROR_PLAN") and the library's message."""

    def __init__(self, status, message):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def _check(status):
    if status != 0:
        raise Error(_STATUS_NAMES.get(status, f"status {status}"),
                    _lib.cgemm_last_error().decode(errors="replace"))
