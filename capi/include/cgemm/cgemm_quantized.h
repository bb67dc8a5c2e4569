/* cgemm's C API, FP8 quantization a caller keeps: a tensor quantized once and read by many
 * GEMMs as a pre-quantized operand (cgemm_plan_options' lhs_quantized / rhs_quantized), as
 * Transformer Engine's quantizers and their ScaledTensor2x. Part of cgemm.h, which includes it:
 * include that. Same rules as cgemm.h's (statuses, handles, collective calls). The runtime side
 * is cgemm/runtime/quantized_tensor.hpp. */
#ifndef CGEMM_CGEMM_QUANTIZED_H
#define CGEMM_CGEMM_QUANTIZED_H

#include <cgemm/cgemm.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A quantizer of one tensor: its shape, formats and per-tensor scale state (the delayed
 * history). Each cgemm_quantized_tensor_quantize writes the caller's buffers:
 *   rowwise [R, C]: the codes of the source [R, C] (a GEMM operand contracting C);
 *   colwise [C, R]: the codes transposed (a GEMM operand contracting R: Hopper's FP8 GEMM
 *     reads both operands contracting their last dim, so the dgrad's weight and the wgrad's
 *     activations are read from this copy);
 *   scale_inv: one float32, 1/scale, the same on every rank (dequantized = code x scale_inv).
 * Scaling, as TE's per-tensor recipes: this rank's amax is max-reduced over every rank of the
 * context, scale = fp8_max / amax / 2^margin; "current" takes this call's amax; "delayed" the
 * amax history of earlier calls (1 at the first call), then this call's amax joins the history
 * (amax_history_len, amax_compute_algo): the history advances once per call.
 * The handle keeps a reference to its context: cgemm_context_destroy refuses
 * (CGEMM_ERROR_STATE) while one remains. */
typedef struct cgemm_quantized_tensor cgemm_quantized_tensor;

typedef struct cgemm_quantized_tensor_desc {
  const char* name;              /* in messages and traces; NULL: "tensor" */
  int64_t rows, cols;            /* this rank's shard [R, C], row-major, both >= 1 */
  const char* dtype;             /* the source's: "bfloat16" (NULL), "float16" or "float32" */
  const char* format;            /* "e4m3" (NULL) or "e5m2" */
  const char* scaling;           /* "current" (NULL) or "delayed" */
  int margin;                    /* 0..127 */
  int amax_history_len;          /* delayed: 1..2^23; 0: 1024 */
  const char* amax_compute_algo; /* delayed: "max" (NULL) or "most_recent" */
  int rowwise;                   /* 1: each call writes the [R, C] copy; 0: not */
  int colwise; /* 1: each call writes the [C, R] copy; 0: not (one of the two: 1) */
} cgemm_quantized_tensor_desc;

/* Defaults: everything NULL / 0, rowwise and colwise 1. NULL is a no-op. */
CGEMM_API void cgemm_quantized_tensor_desc_init(cgemm_quantized_tensor_desc* desc);

/* Collective over the context's ranks: every rank passes the same desc (the name excepted;
 * ranks that differ get CGEMM_ERROR_INVALID_ARGUMENT naming the field, on every rank). A field
 * out of its range, a word it does not know, or rows or cols below 1:
 * CGEMM_ERROR_INVALID_ARGUMENT naming it. Allocates the scale state (backend memory). */
CGEMM_API cgemm_status cgemm_quantized_tensor_create(cgemm_context* ctx,
                                                     const cgemm_quantized_tensor_desc* desc,
                                                     cgemm_quantized_tensor** out);

/* Quantizes src ([R, C] in desc's dtype) into rowwise and colwise (given exactly for the copies
 * the desc keeps, NULL otherwise) and scale_inv, all in the context's backend memory (device
 * memory on the CUDA backend, host memory on the CPU backend). Collective over the context's
 * ranks (the amax reduction): every rank calls it, in the same order as its other collective
 * calls. Ordered on `stream` like cgemm_plan_execute_on_stream (NULL: the backend's stream 0);
 * on more than one rank with current scaling the host waits for the amax. A NULL source or
 * scale_inv, or a copy missing or not kept: CGEMM_ERROR_RUNTIME naming it, before any work. */
CGEMM_API cgemm_status cgemm_quantized_tensor_quantize(cgemm_quantized_tensor* tensor,
                                                       const void* src, void* rowwise,
                                                       void* colwise, float* scale_inv,
                                                       void* stream);

/* The scale state (scale, scale_inv, amax, and for delayed scaling the step count and the amax
 * history), for a checkpoint: *count floats. With state NULL, *count is set to the number of
 * floats; otherwise *count must be that number and the floats are copied into state.
 * Synchronous. */
CGEMM_API cgemm_status cgemm_quantized_tensor_get_scale_state(cgemm_quantized_tensor* tensor,
                                                              float* state, size_t* count);
/* Sets the state back (a resumed run): count must be the number get_scale_state gives. */
CGEMM_API cgemm_status cgemm_quantized_tensor_set_scale_state(cgemm_quantized_tensor* tensor,
                                                              const float* state, size_t count);

/* Not collective. NULL is a no-op. */
CGEMM_API void cgemm_quantized_tensor_destroy(cgemm_quantized_tensor* tensor);

#ifdef __cplusplus
}
#endif

#endif /* CGEMM_CGEMM_QUANTIZED_H */
