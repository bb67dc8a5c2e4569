/* cgemm's C API, the grouped GEMM: G GEMMs in one call, one dim ragged (mixture-of-experts
 * layers). Part of cgemm.h, which includes it: include that. Same rules as cgemm.h's (statuses,
 * handles, collective calls, the struct versioning). */
#ifndef CGEMM_CGEMM_GROUPED_H
#define CGEMM_CGEMM_GROUPED_H

#include <cgemm/cgemm.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Grouped plan: G GEMMs in one call, one dim ragged, the G group sizes given per call
 * (the expert GEMMs of a mixture-of-experts layer; Transformer Engine's JAX gemm.py
 * grouped_gemm). cgemm/runtime/grouped_plan.hpp and docs/GROUPED_GEMM.md have the rules. ----
 *
 * Local to the rank: unlike cgemm_plan_*, no function of this family is collective (no rank
 * agreement, no communication); each rank may plan and call its own. A grouped plan keeps a
 * reference to its context: cgemm_context_destroy refuses (CGEMM_ERROR_STATE) while one
 * remains. Row-major shapes, G = num_groups:
 *   form "ragged_rows" (forward, dgrad): lhs [M, K] (contracting (1,)) or [K, M] ((0,)),
 *     rhs [G, K, N] (contracting (1,)) or [G, N, K] ((2,)), out [M, N]; group g owns rows
 *     [off_g, off_g + size_g) of lhs and out (off_g: the sum of the sizes before g).
 *   form "ragged_contracting" (wgrad): lhs [K, M] ((0,)) or [M, K] ((1,)), rhs [K, N] ((0,))
 *     or [N, K] ((1,)), out [G, M, N]; group g owns contracting indices [off_g, off_g + size_g).
 * The ragged dim (M, or K) is the plan's capacity: every call's sizes sum to at most it, and
 * every workspace is made for it when the plan is made. Sizes that sum to less leave padding
 * (gemm.py allows it: TE's MoE capacity buffers): ragged_rows writes zeros to the out rows past
 * the sum; ragged_contracting contracts only the indices below it. */

typedef struct cgemm_grouped_plan cgemm_grouped_plan;

typedef struct cgemm_grouped_plan_desc {
  const char* name;   /* in messages and traces ("NAME group g"); NULL: "grouped_gemm" */
  const char* form;   /* "ragged_rows" or "ragged_contracting"; NULL: "ragged_rows" */
  int64_t num_groups; /* G, >= 1: the length of every call's group sizes */
  int lhs_ndim;       /* 2; N-D collapses at gemm.py's axis boundary (GROUPED_GEMM.md) */
  int64_t lhs_shape[CGEMM_MAX_NDIM];
  int rhs_ndim; /* 3 (ragged_rows) or 2 (ragged_contracting); or more, as lhs_ndim */
  int64_t rhs_shape[CGEMM_MAX_NDIM];
  int bias_ndim; /* 0: no bias; else 2, bias [G, N] in the output dtype */
  int64_t bias_shape[CGEMM_MAX_NDIM];
  /* lhs and rhs: "bfloat16", "float16", "float32", or FP8 "float8_e4m3fn" / "float8_e5m2"
   * (with scaling below); NULL: "bfloat16". */
  const char* dtype;
  const char* rhs_dtype; /* FP8 only, rhs's format when it differs from dtype; NULL: dtype */
  const char* out_dtype; /* gemm.py's preferred_element_type; NULL: dtype (FP8: bfloat16) */
  /* gemm.py's contracting_dims, used as given; the defaults (1,) and (2,). */
  int lhs_contracting_ndim;
  int lhs_contracting[CGEMM_MAX_NDIM];
  int rhs_contracting_ndim;
  int rhs_contracting[CGEMM_MAX_NDIM];
  /* How calls run on the CUDA backend: "auto" (NULL: the cuBLASLt tiles below 4096 rows per
   * group on average, else the loop), "loop" (a cuBLASLt GEMM per group), "cublas_grouped" (one
   * cublasGemmGroupedBatchedEx), "cublaslt_tiles" (pointer-array cuBLASLt matmuls over row
   * tiles), "cublaslt_device_tiles" (one pointer-array matmul of fixed shape whose pointers a
   * kernel computes from the sizes on the device: no host round trip, so calls can be captured
   * and replayed with sizes that change; ragged_rows, lhs [M, K], unscaled; computes up to
   * G 128 rows beyond M; never chosen by "auto"). The CPU backend always loops (reading the
   * sizes in place for "cublaslt_device_tiles", which it refuses by the CUDA backend's rules).
   * A path that does not run the plan: CGEMM_ERROR_RUNTIME naming why. */
  const char* path;
  /* FP8 inputs only: "delayed" or "current" (tensor scaling: a scale_inv per group and
   * operand; lhs [M, K] with rhs [G, N, K] (ragged_rows) or [N, K] (ragged_contracting, sizes
   * multiples of 16); K and the output rows on 16 bytes); NULL or "none" otherwise.
   * cgemm_plan_options' words; block scaling is refused. */
  const char* scaling;
} cgemm_grouped_plan_desc;

/* Zeros, then the defaults above (contracting (1,) and (2,)). */
CGEMM_API void cgemm_grouped_plan_desc_init(cgemm_grouped_plan_desc* desc);

/* Plans `desc` (the planner's grouped_gemm: gemm.py's rules, CGEMM_ERROR_PLAN with its
 * message; the layouts the runtime runs, else CGEMM_ERROR_RUNTIME naming the layout) on ctx's
 * backend and makes its workspaces (and on CUDA, for the cuBLAS paths, their handles and
 * staging). Not collective. CGEMM_ERROR_INVALID_ARGUMENT: a NULL, an unknown name, a shape with
 * a dim <= 0 or more than CGEMM_MAX_NDIM dims, bias_ndim other than 0 or 2. */
CGEMM_API cgemm_status cgemm_grouped_plan_create(cgemm_context* ctx,
                                                 const cgemm_grouped_plan_desc* desc,
                                                 cgemm_grouped_plan** out);
/* NULL: nothing. A handle that is not live: nothing either, and cgemm_last_error() says so. */
CGEMM_API void cgemm_grouped_plan_destroy(cgemm_grouped_plan* plan);

/* An operand's shape, dtype and bytes (CGEMM_LHS, CGEMM_RHS, CGEMM_BIAS: ndim 0 without one,
 * CGEMM_OUT): a grouped plan is local, so global_shape = local_shape and offset is zeros. */
CGEMM_API cgemm_status cgemm_grouped_plan_tensor_info(const cgemm_grouped_plan* plan,
                                                      cgemm_operand operand,
                                                      cgemm_tensor_info* out);

typedef struct cgemm_grouped_plan_info {
  int64_t num_groups;
  int64_t ragged_extent;  /* M (ragged_rows) or K (ragged_contracting): what sizes sum to at most */
  const char* path;       /* the path calls run: "loop", "cublas_grouped", "cublaslt_tiles",
                             "cublaslt_device_tiles" */
  int64_t loop_fallbacks; /* calls of a cuBLAS path that ran the loop (unaligned pointers) */
} cgemm_grouped_plan_info;

CGEMM_API cgemm_status cgemm_grouped_plan_get_info(const cgemm_grouped_plan* plan,
                                                   cgemm_grouped_plan_info* out);

/* The grouped GEMM: out = for each group g, its rows (or contracting indices) of lhs @ rhs's
 * (+ bias[g]); FP8: times lhs_scale_inv[g] * rhs_scale_inv[g]. Every pointer is backend memory
 * (host memory on the CPU backend, device memory of the context's GPU on CUDA), row-major and
 * contiguous with cgemm_grouped_plan_tensor_info's shapes: group_sizes G int32 values, none
 * negative, summing to at most ragged_extent (less: padding, zero rows of out in ragged_rows;
 * checked once they are on the host, before any GEMM runs:
 * CGEMM_ERROR_RUNTIME naming the group or the sum; on CUDA the sizes are copied to the host
 * first, which waits for the work queued before the call; path "cublaslt_device_tiles" reads
 * them on the device instead: bad sizes fill out with NaN, and the first call or replay of the
 * plan issued after the device ran that call answers CGEMM_ERROR_RUNTIME naming them, without
 * running (calls issued before then still run; cgemm_grouped_plan_check_device_sizes waits
 * for them; one never reported is printed to stderr when the plan is destroyed)); bias NULL iff
 * the plan has none;
 * lhs_scale_inv and rhs_scale_inv G float32 each for an FP8 plan, NULL otherwise; out must not
 * overlap the inputs. stream: the caller's stream as cgemm_plan_execute_on_stream takes it (a
 * cudaStream_t of the context's GPU; events only: the call starts after the work queued on it
 * and work queued on it afterwards sees the output), NULL: the backend's stream 0; the CPU
 * backend ignores it and returns with out written. CGEMM_ERROR_INVALID_ARGUMENT for a NULL
 * that must be set or a pointer that must be NULL, naming it. */
CGEMM_API cgemm_status cgemm_grouped_plan_execute(cgemm_grouped_plan* plan,
                                                  const int32_t* group_sizes, const void* lhs,
                                                  const void* rhs, const void* bias, void* out,
                                                  const float* lhs_scale_inv,
                                                  const float* rhs_scale_inv, void* stream);
/* Path "cublaslt_device_tiles" on CUDA: waits for the work queued on the backend, then answers
 * CGEMM_ERROR_RUNTIME when a call or replay since the last report had bad group sizes in device
 * memory (its out was filled with NaN), naming how many and the last one's fault; else, and on
 * every other path and the CPU backend (which checks sizes before it runs), CGEMM_SUCCESS. */
CGEMM_API cgemm_status cgemm_grouped_plan_check_device_sizes(cgemm_grouped_plan* plan);

/* The call cgemm_grouped_plan_execute would make, captured for replays (see "CUDA graphs"
 * above). Only a plan with path "cublaslt_device_tiles" can be captured: each replay reads
 * group_sizes (in device memory) as they are then, so they may change between replays. Other
 * paths need the host mid-call (the sizes copied there and the groups' pointers computed
 * there): CGEMM_ERROR_RUNTIME "grouped GEMM 'NAME' cannot be captured into a CUDA graph: ..."
 * naming that op and the path that would capture, after the execute call's argument checks
 * and before anything is recorded; so does cgemm_grouped_plan_execute inside the caller's
 * capture. */
CGEMM_API cgemm_status cgemm_grouped_plan_capture(cgemm_grouped_plan* plan,
                                                  const int32_t* group_sizes, const void* lhs,
                                                  const void* rhs, const void* bias, void* out,
                                                  const float* lhs_scale_inv,
                                                  const float* rhs_scale_inv, void* stream,
                                                  cgemm_graph** graph);

#ifdef __cplusplus
}
#endif

#endif /* CGEMM_CGEMM_GROUPED_H */
