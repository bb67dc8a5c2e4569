/* cgemm's C API: the plugin boundary of libcgemm.so (find_package(cgemm): cgemm::cgemm).
 *
 * The same library as the C++ one (cgemm/runtime/plan.hpp), behind plain C types, for callers
 * that are not C++ or that must not share cgemm's C++ runtime (Python through ctypes:
 * python/cgemm.py; Fortran through the MPI_Fint constructor; other plugins). The shared library
 * exports these functions only.
 *
 * The sequence:
 *   cgemm_context_desc cd;  cgemm_context_desc_init(&cd);  cd.backend = "cpu";
 *   cgemm_context* ctx;     cgemm_context_create(MPI_COMM_WORLD, &cd, &ctx);
 *   cgemm_plan_desc pd;     cgemm_plan_desc_init(&pd);  ... shapes, specs, collective ...
 *   cgemm_plan* plan;       cgemm_plan_create(ctx, &pd, &plan);
 *   cgemm_tensor_info out;  cgemm_plan_tensor_info(plan, CGEMM_OUT, &out);  (allocate buffers)
 *   cgemm_plan_execute(plan, lhs, rhs, bias, y);   as often as you like
 *     (or cgemm_plan_execute_on_stream(plan, lhs, rhs, bias, y, stream): on your CUDA stream)
 *   cgemm_plan_destroy(plan);  cgemm_context_destroy(ctx);
 *
 * Errors: every function that can fail returns a cgemm_status; CGEMM_SUCCESS is 0. On failure
 * cgemm_last_error() gives a message naming what is wrong (the operand, the shape, the spec,
 * the rule of gemm.py), and output arguments are left unchanged. No C++ exception and no abort
 * crosses this boundary: the library catches everything at each function.
 *
 * Units: shapes and offsets in elements, outermost dim first; byte counts in bytes (int64_t).
 * Names are the planner's: dtypes "float32", "bfloat16", "float16" (also "fp32", "bf16",
 * "fp16"); collectives "none", "all_gather", "reduce_scatter"; backends "cpu", "cuda", "auto".
 *
 * Versions and the ABI: the library's SONAME is libcgemm.so.<major> (libcgemm.so.0). Within a
 * major version the ABI only grows: new functions, never a new field in an existing struct or
 * a changed signature, so a program built against an older header keeps working with a newer
 * library. That is why the caller's stream and the borrowed NCCL communicator are arguments
 * of new functions (cgemm_plan_execute_on_stream, cgemm_context_create_nccl*) and not fields
 * of the descriptors: cgemm_context_desc_init fills sizeof(cgemm_context_desc) bytes of the
 * caller's struct, which must keep its size. Knobs added later go into option structs that
 * carry their own size and may grow at their end (cgemm_context_options: gpu_sharing;
 * cgemm_plan_options: FP8 quantization), passed to the _ex functions (cgemm_context_create_ex*,
 * cgemm_plan_create_ex).
 *
 * Collective calls: cgemm_context_create*, cgemm_context_destroy, cgemm_plan_create*,
 * cgemm_plan_execute* and cgemm_plan_destroy are collective over the context's communicator:
 * every rank calls them in the same order with the same descriptors. cgemm_context_create*
 * and cgemm_plan_create* check that: first of all they compare every rank's arguments over
 * the communicator (the descriptor and the options, field by field; the plan's name and the
 * borrowed nccl_comm pointer excepted), and ranks that differ get CGEMM_ERROR_INVALID_ARGUMENT
 * on every rank with one message naming the field, the lowest differing rank and both values
 * ("the ranks' arguments differ: rank 1 of the communicator passes lhs_shape [2, 8, 16], rank
 * 0 passes [2, 8, 32] ..."). Setting up then fails alike on every rank (the checks see the
 * arguments only; cgemm_plan_create* also allocates the plan's workspaces, and a rank whose
 * allocation fails makes it fail on every rank, naming that rank); cgemm_plan_execute may fail
 * on one rank only (its device, its transport).
 *
 * Deadlines: every wait of the library (the argument check above, the bootstrap, each
 * collective of an execute) has one, cgemm_context_options' timeout_s (default 300 s). A rank
 * whose wait outlives it (a peer that never makes the call, a peer that died or stopped)
 * prints one line naming what it waited for and ends the job with MPI_Abort (exit status 4):
 * it never waits forever, and it never returns to the caller then (the other ranks may be
 * inside a collective that cannot be cancelled). MPI errors the library meets return a status
 * instead: it runs its own MPI calls under MPI_ERRORS_RETURN (the caller's handlers are put
 * back before each call returns).
 *
 * Thread safety: cgemm_version*, cgemm_status_name and cgemm_last_error may be called from any
 * thread at any time (the last error is per thread: the message of the last failed call on the
 * calling thread). A context and its plans must be used by one thread at a time, as MPI
 * collectives on one communicator must; distinct contexts may be used by distinct threads
 * when MPI was initialized with MPI_THREAD_MULTIPLE.
 *
 * Ownership: the library owns contexts and plans (create, then destroy exactly once); the
 * caller owns every buffer and every string it passes (they are read during the call only)
 * and must not free strings the library returns (static, or per thread: see each function).
 * A context must outlive its plans: cgemm_context_destroy refuses while plans remain.
 *
 * Handles: a cgemm_context* or cgemm_plan* is a handle, not an address (never dereference
 * it). Each is unique for the life of the process: once destroyed it is never valid again,
 * even after new objects are made. Every function checks the handles it is given: one that
 * was destroyed already, one of the other kind or any other value is
 * CGEMM_ERROR_INVALID_ARGUMENT ("ctx is not a live cgemm_context: it was destroyed already";
 * "... not a handle cgemm returned"), never a crash or an answer from freed memory; so a
 * second destroy is refused, not a double free.
 *
 * Messages: cgemm_last_error() shows control bytes and invalid UTF-8 of the caller's strings
 * (a name, a spec) as \xNN, as cgemm-run does, so a message is always one printable line.
 */
#ifndef CGEMM_CGEMM_H
#define CGEMM_CGEMM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

/* The shared library is built with hidden visibility; CGEMM_API marks what it exports. */
#if defined(CGEMM_BUILDING_CAPI)
#define CGEMM_API __attribute__((visibility("default")))
#else
#define CGEMM_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The most dims of any operand, and of each operand's contracting dims. */
#define CGEMM_MAX_NDIM 8

typedef enum cgemm_status {
  CGEMM_SUCCESS = 0,
  /* A null pointer, an unknown name, a malformed spec string, a buffer size that differs. */
  CGEMM_ERROR_INVALID_ARGUMENT = 1,
  /* A rule of Transformer Engine's gemm.py (its ValueError / assert): cgemm::PlanError. */
  CGEMM_ERROR_PLAN = 2,
  /* The backend rule refused the job (e.g. "cuda" with more ranks than GPUs). */
  CGEMM_ERROR_BACKEND = 3,
  /* Any other of cgemm's errors (a layout the runtime does not run, an MPI or device call). */
  CGEMM_ERROR_RUNTIME = 4,
  /* The memory cannot hold it: a host allocation failed, or the memory check of
   * cgemm_plan_create* (the plan's workspaces and scale state against the binding limit of the
   * host (MemAvailable, the cgroup, RLIMIT_AS) or the GPU's free memory, summed over the ranks
   * sharing it, as cgemm-run checks; the message names the limit, nothing was allocated). */
  CGEMM_ERROR_OUT_OF_MEMORY = 5,
  /* MPI could not be initialized (cgemm_context_create_world), or a context was asked for in a
   * process that torchrun (RANK / WORLD_SIZE / LOCAL_RANK set, no MPI launcher) started as an
   * MPI world of its own: start the ranks with mpirun or srun. */
  CGEMM_ERROR_MPI = 6,
  /* Not one of cgemm's errors: a bug; the message says what was thrown. */
  CGEMM_ERROR_INTERNAL = 7,
  /* The call is refused in this state (a context destroyed while plans remain). */
  CGEMM_ERROR_STATE = 8
} cgemm_status;

/* "0.1.0": the project's version (static string). */
CGEMM_API const char* cgemm_version_string(void);
/* The same as numbers; any pointer may be NULL. */
CGEMM_API void cgemm_version(int* major, int* minor, int* patch);
/* "CGEMM_ERROR_PLAN" etc. (static string; "unknown status" for other values). */
CGEMM_API const char* cgemm_status_name(cgemm_status status);
/* The message of the last failed call on this thread ("" when none failed). Valid until the
 * next failing call on this thread; copy it to keep it. */
CGEMM_API const char* cgemm_last_error(void);

/* ---- Context: the communicator, the dp x tp mesh, the backend and the overlap knobs. ---- */

typedef struct cgemm_context cgemm_context;

typedef struct cgemm_context_desc {
  int dp;                /* data-parallel size, >= 1; it must divide the world size */
  int tp;                /* tensor-parallel size; 0: world size / (dp x fsdp) */
  const char* dp_axis;   /* the mesh axis names the specs use; NULL: "dp" */
  const char* tpsp_axis; /* NULL: "tpsp" */
  const char* backend;   /* "cpu", "cuda" or "auto" (the backend rule); NULL: "auto" */
  /* Overlap knobs (cgemm/runtime/options.hpp, TE's collective_gemm_bootstrap): */
  const char* overlap;      /* "auto", "on" (always overlapped) or "off"; NULL: "auto" */
  int num_max_streams;      /* GEMM streams of a collective GEMM, >= 1 */
  int chunks_per_rank;      /* pieces per ring chunk, >= 1 */
  int aggregate_all_gather; /* nonzero: the all-gather goes both ways round the ring */
} cgemm_context_desc;

/* Defaults: dp 1, tp 0, names NULL (their defaults), num_max_streams 3, chunks_per_rank 1,
 * aggregate_all_gather 0. Fill a desc with this first, then set what you need. */
CGEMM_API void cgemm_context_desc_init(cgemm_context_desc* desc);

/* Collective over `comm` (which the caller keeps and frees after cgemm_context_destroy; the
 * context builds its own communicators from it). MPI must be initialized. Every
 * cgemm_context_create* refuses (CGEMM_ERROR_MPI) a world of 1 rank in a process started as
 * one of several by a launcher other than MPI's (torchrun's WORLD_SIZE > 1, ...). */
CGEMM_API cgemm_status cgemm_context_create(MPI_Comm comm, const cgemm_context_desc* desc,
                                            cgemm_context** out);
/* The same from a Fortran handle (MPI_Comm_f2c): Fortran's MPI module, or mpi4py's
 * comm.py2f(). A handle that names no communicator (MPI_Comm_f2c of an unknown index is not
 * MPI_COMM_NULL) or an intercommunicator is CGEMM_ERROR_INVALID_ARGUMENT "comm (Fortran handle
 * N): not a communicator ...", checked under MPI_ERRORS_RETURN: no abort. The same check in
 * every constructor that takes a communicator. */
CGEMM_API cgemm_status cgemm_context_create_fortran(MPI_Fint comm, const cgemm_context_desc* desc,
                                                    cgemm_context** out);
/* On MPI_COMM_WORLD, for callers that have no MPI binding (Python through ctypes): initializes
 * MPI (MPI_THREAD_MULTIPLE) when nobody has; cgemm_mpi_finalize then finalizes it. */
CGEMM_API cgemm_status cgemm_context_create_world(const cgemm_context_desc* desc,
                                                  cgemm_context** out);
/* The same on the caller's NCCL communicator over this rank's tensor-parallel group, which
 * the CUDA backend uses instead of making its own (a framework that has one already; `comm`
 * still bootstraps the mesh and the copy engines). nccl_comm is an ncclComm_t passed as void*
 * (this header needs no NCCL header). Borrowed: the caller keeps it alive until
 * cgemm_context_destroy returns and destroys it itself afterwards; the context never destroys
 * it. Its NCCL ranks must be the TP ranks (world rank = dp_rank * tp + tp_rank; with dp 1 the
 * ranks of comm), on the GPU the backend gives each rank (its local rank modulo the GPUs it
 * sees, as cudaSetDevice before ncclCommInitRank): checked with ncclCommCount,
 * ncclCommUserRank and ncclCommCuDevice (a mismatch: one message on the TP group's ranks, the
 * other ranks' pointing at it), then its members with an all-gather of world ranks over it
 * (size and ranks cannot tell communicators over world ranks {0, 3} and {2, 1} at tp 2 x dp 2
 * from the right ones; a mismatch: one message on every rank, naming both lists); each
 * mismatch is CGEMM_ERROR_BACKEND on every rank of the job. Every rank passes one, or every rank
 * NULL (as cgemm_context_create); else CGEMM_ERROR_BACKEND on every rank. CGEMM_ERROR_BACKEND too
 * when the backend is not cuda: a build without CUDA (the message says so), backend "cpu", "auto"
 * that chose the CPU backend, or ranks sharing a GPU. */
CGEMM_API cgemm_status cgemm_context_create_nccl(MPI_Comm comm, void* nccl_comm,
                                                 const cgemm_context_desc* desc,
                                                 cgemm_context** out);
/* The same from a Fortran handle (mpi4py's comm.py2f()). */
CGEMM_API cgemm_status cgemm_context_create_nccl_fortran(MPI_Fint comm, void* nccl_comm,
                                                         const cgemm_context_desc* desc,
                                                         cgemm_context** out);
/* ---- Context options: what cgemm_context_desc cannot hold (the ABI rule above). ----
 *
 * A struct of its own that may grow at its end from one release to the next, so each caller
 * says which version it holds: struct_size is sizeof(cgemm_context_options) as the caller
 * compiled it, set by cgemm_context_options_init. The library reads only struct_size bytes:
 * a caller built against an older header (a smaller struct) gets the defaults of the fields
 * it does not know; a caller built against a newer header (a larger struct) is accepted when
 * the bytes this library does not know are all zero (those fields at their defaults), and
 * refused otherwise (CGEMM_ERROR_INVALID_ARGUMENT naming the sizes), so a setting is never
 * dropped silently. Fields are only ever appended, and each one's default is all zero bytes. */
typedef struct cgemm_context_options {
  size_t struct_size; /* bytes of this struct as the caller compiled it: set by _init */
  /* 0 (the default) or 1: ranks of a host may share its GPUs (cgemm/runtime/options.hpp,
   * BackendOptions::gpu_sharing; cgemm-run's --gpu_sharing). 0: one rank per GPU, and more
   * ranks than GPUs on a host give the CPU backend under "auto" and CGEMM_ERROR_BACKEND under
   * "cuda". 1: rank -> GPU by local rank modulo the GPUs it sees; where a GPU is shared, the
   * collectives go through the copy engines (no NCCL: it refuses two ranks of one communicator
   * on one GPU), every tensor-parallel group must be on one host (else CGEMM_ERROR_BACKEND)
   * and times are not a speed measurement. For correctness runs of any tp on few GPUs. The CPU
   * backend ignores it, as the C++ runtime does (backend "cpu", or "auto" that chose the CPU
   * backend: accepted, no effect). With a GPU really shared, a borrowed NCCL communicator is
   * CGEMM_ERROR_BACKEND. Other values: CGEMM_ERROR_INVALID_ARGUMENT. */
  int gpu_sharing;
  /* NULL (the default), or the caller's NCCL communicator over this rank's tensor-parallel
   * group (an ncclComm_t as void*): exactly cgemm_context_create_nccl's nccl_comm, its checks,
   * statuses and ownership (borrowed: the caller destroys it after cgemm_context_destroy). */
  void* nccl_comm;
  /* Appended in 0.1 (a struct_size without it: the default). Seconds every wait of the library
   * may last (see "Deadlines" above): 0 (the default) keeps the deadline already in force in
   * this process (a context made earlier, or a tool's --timeout), else 300; otherwise more
   * than 0 and at most 1e7. The deadline is the process's: the last context made with a
   * nonzero timeout_s sets it for every context. Other values (negative, NaN, above 1e7):
   * CGEMM_ERROR_INVALID_ARGUMENT. */
  double timeout_s;
  /* Appended in 0.1, after timeout_s. The fsdp axis of a dp x fsdp x tp mesh (docs/FSDP.md;
   * gemm.py's fsdp_resource): 0 (the default) or 1: none, the dp x tp mesh; N > 1: each replica's
   * batch and weights are split over N ranks, world rank (dp_rank * fsdp + fsdp_rank) * tp +
   * tp_rank, tp 0 meaning world size / (dp x fsdp), and a weight given sharded over the fsdp axis
   * where gemm.py gathers it is gathered inside its GEMM (pass the shard: cgemm_plan_tensor_info's
   * rhs local shape and offset). Negative: CGEMM_ERROR_INVALID_ARGUMENT; a mesh that does not
   * factor the world, as for dp. */
  int fsdp;
  const char* fsdp_axis; /* NULL (the default): "fsdp"; it must differ from dp_axis, tpsp_axis */
  /* Appended after fsdp_axis (still 0.1.0): the stream and transport knobs of cgemm-run's options
   * (cgemm/runtime/options.hpp's OverlapOptions; TE's collective_gemm_bootstrap arguments).
   * compute_stream_priority, communication_stream_priority: 0 (the default) the highest, larger
   * lower (CUDA only: the CPU backend ignores them). no_ce: 0 (the default): the copy engines
   * over CUDA IPC move the ring's chunks where a tensor-parallel group shares a node (TE's
   * use_ce); 1: they do not (NCCL instead; ranks sharing a GPU then have no transport:
   * CGEMM_ERROR_BACKEND). num_sm_for_communication: TE's bound on the SMs the transport takes,
   * accepted WITHOUT EFFECT (the copy engines take no SMs, and capping NCCL's CTAs starved it;
   * CGEMM_NCCL_MIN_CTAS / CGEMM_NCCL_MAX_CTAS set NCCL's): 0 (the default) or at least 1.
   * Negative values, and no_ce other than 0 or 1: CGEMM_ERROR_INVALID_ARGUMENT. */
  int compute_stream_priority;
  int communication_stream_priority;
  int no_ce;
  int num_sm_for_communication;
} cgemm_context_options;

/* Fills the struct_size bytes at options with the defaults (zeros: gpu_sharing 0, nccl_comm
 * NULL, and any field this library does not know) and sets options->struct_size. Pass
 * sizeof(cgemm_context_options): the caller's, so a struct of an older header is never
 * written past. CGEMM_ERROR_INVALID_ARGUMENT (nothing written): options NULL, or struct_size
 * smaller than the first version of the struct (struct_size, gpu_sharing, nccl_comm: 24 bytes
 * on LP64) or larger than 4096 bytes (not a size). */
CGEMM_API cgemm_status cgemm_context_options_init(cgemm_context_options* options,
                                                  size_t struct_size);

/* cgemm_context_create with options: collective over `comm`, the same descriptor, statuses and
 * messages (each function's own name first), plus the options'. options NULL: the defaults,
 * so exactly cgemm_context_create; with options->nccl_comm set, cgemm_context_create_nccl.
 * Every rank passes the same options (they are part of the collective's arguments, and
 * compared as such). Its errors: CGEMM_ERROR_INVALID_ARGUMENT for desc or out NULL, a
 * struct_size as above, a gpu_sharing other than 0 or 1, a timeout_s outside its bounds (alike
 * on every rank: the checks see the arguments only). */
CGEMM_API cgemm_status cgemm_context_create_ex(MPI_Comm comm, const cgemm_context_desc* desc,
                                               const cgemm_context_options* options,
                                               cgemm_context** out);
/* The same from a Fortran handle (mpi4py's comm.py2f()). */
CGEMM_API cgemm_status cgemm_context_create_ex_fortran(MPI_Fint comm,
                                                       const cgemm_context_desc* desc,
                                                       const cgemm_context_options* options,
                                                       cgemm_context** out);
/* The same on MPI_COMM_WORLD, initializing MPI as cgemm_context_create_world does. */
CGEMM_API cgemm_status cgemm_context_create_world_ex(const cgemm_context_desc* desc,
                                                     const cgemm_context_options* options,
                                                     cgemm_context** out);

/* Finalizes MPI if cgemm_context_create_world[_ex] initialized it and it is not finalized yet;
 * otherwise does nothing (MPI is the caller's). Collective; destroy every context first. */
CGEMM_API cgemm_status cgemm_mpi_finalize(void);

typedef struct cgemm_context_info {
  int world_rank, world_size; /* in the communicator the context was made from */
  int dp, tp;                 /* the mesh, tp resolved */
  int dp_rank, tp_rank;       /* world rank = dp_rank * tp + tp_rank (fsdp 1) */
  const char* backend;        /* the backend built: "cpu" or "cuda" (static string) */
} cgemm_context_info;

CGEMM_API cgemm_status cgemm_context_get_info(const cgemm_context* ctx, cgemm_context_info* out);
/* The context's fsdp axis (cgemm_context_options' fsdp; 1 without one) and this rank's place
 * on it: world rank = (dp_rank * fsdp + fsdp_rank) * tp + tp_rank. Either pointer may be NULL.
 * CGEMM_ERROR_INVALID_ARGUMENT: ctx unknown. */
CGEMM_API cgemm_status cgemm_context_get_fsdp(const cgemm_context* ctx, int* fsdp, int* fsdp_rank);
/* Collective. NULL: nothing. CGEMM_ERROR_STATE (and the context kept) while plans remain. */
CGEMM_API cgemm_status cgemm_context_destroy(cgemm_context* ctx);

/* ---- Plan: one GEMM planned on the context's mesh, as gemm.py plans it. ---- */

typedef struct cgemm_plan cgemm_plan;

typedef struct cgemm_plan_desc {
  const char* name; /* in messages and traces; NULL: "gemm" */
  /* Global shapes (every rank's shards together), outermost dim first. */
  int lhs_ndim;
  int64_t lhs_shape[CGEMM_MAX_NDIM];
  int rhs_ndim;
  int64_t rhs_shape[CGEMM_MAX_NDIM];
  int bias_ndim; /* 0: no bias; else 1, bias [N] */
  int64_t bias_shape[CGEMM_MAX_NDIM];
  const char* dtype;     /* lhs and rhs; NULL: "bfloat16" */
  const char* out_dtype; /* output and bias; NULL: as dtype */
  /* PartitionSpecs in Python's notation, e.g. "('dp', 'tpsp', None)" (also "P(...)"); NULL
   * or "()": every dim unsharded. Each must be the planner's answer for the layout (cgemm
   * does not reshard): CGEMM_ERROR_PLAN names the given and the planner's spec otherwise. */
  const char* lhs_spec;
  const char* rhs_spec;
  const char* bias_spec; /* NULL unless bias_ndim is 1 (else CGEMM_ERROR_INVALID_ARGUMENT) */
  /* Contracting dims of each operand (negative: from the end), as gemm.py's
   * contracting_dims; the defaults (-1,) and (0,): lhs [..., K] @ rhs [K, N]. */
  int lhs_contracting_ndim;
  int lhs_contracting[CGEMM_MAX_NDIM];
  int rhs_contracting_ndim;
  int rhs_contracting[CGEMM_MAX_NDIM];
  const char* collective;       /* "none", "all_gather", "reduce_scatter"; NULL: "none" */
  int transpose_batch_sequence; /* nonzero: activations are [S, B, H] */
} cgemm_plan_desc;

/* Zeros, then the defaults above (contracting (-1,) and (0,)). */
CGEMM_API void cgemm_plan_desc_init(cgemm_plan_desc* desc);

/* Collective. Plans `desc` (infer_gemm_sharding, gemm_abstract, the reorder checks); the plan
 * keeps a reference to ctx. The layouts the runtime runs are those of cgemm/runtime/plan.hpp
 * (a plain GEMM with its contracting dims at one end of each operand; all_gather and
 * reduce_scatter on lhs [B, S, K...] or [S, B, K...] contracting its trailing dims, the
 * reduce-scatter also on [K..., S, B] or a batch of 1 (FP8: any), the rhs as a plain GEMM's);
 * others: CGEMM_ERROR_RUNTIME naming the layout. */
CGEMM_API cgemm_status cgemm_plan_create(cgemm_context* ctx, const cgemm_plan_desc* desc,
                                         cgemm_plan** out);
/* ---- Plan options: what cgemm_plan_desc cannot hold, versioned as cgemm_context_options
 * (struct_size set by _init; a smaller struct: the later fields' defaults; a larger one: its
 * unknown bytes must be zero; every default is all zero bytes). ---- */
typedef struct cgemm_plan_options {
  size_t struct_size; /* bytes of this struct as the caller compiled it: set by _init */
  /* Quantization (cgemm/runtime/plan_description.hpp, QuantizationDesc; Transformer Engine's
   * recipes), in cgemm-run's notation (--scaling): NULL or "none": the GEMM runs in
   * desc->dtype. Otherwise the plan quantizes the caller's lhs and rhs (desc->dtype: "float32",
   * "bfloat16" or "float16", as without quantization: execute takes the same buffers) on
   * every call and runs the GEMM on the quantized copies, its output and bias in
   * desc->out_dtype. "current": per-tensor FP8, the scale from this call's amax (each
   * operand's max |x| over every rank of the job, so the quantized values do not depend on
   * the mesh; on more than one rank the host waits for the amax: see
   * cgemm_plan_execute_on_stream). "delayed": per-tensor FP8, the scale from the amax history
   * of the plan's earlier calls (the first call: scale 1). "mxfp8", "nvfp4", "nvfp4_2d": block
   * scaling, emulated by the CPU backend only: the CUDA backend has no block-scaling kernels
   * yet, on any GPU (CGEMM_ERROR_RUNTIME naming it when planned). Unknown words:
   * CGEMM_ERROR_INVALID_ARGUMENT; a combination gemm.py refuses (e.g. e5m2 x e5m2, NVFP4 with a
   * collective, a contracting dim not a multiple of 16): CGEMM_ERROR_PLAN. Shapes no backend runs,
   * refused on every backend when planned (CGEMM_ERROR_RUNTIME naming the GEMM and its shapes):
   * "current" and "delayed" need 16-byte aligned rows (cuBLASLt's FP8 rule), so each GEMM's output
   * columns (N, or N / tp where N is sharded) times the bytes of out_dtype must be a multiple of 16
   * (bfloat16: N a multiple of 8); "mxfp8" ("nvfp4") scales blocks of 32 (16) contracting
   * elements, so each GEMM's K must be a multiple of 32 (16). */
  const char* scaling;
  const char* lhs_format; /* FP8 format of the quantized lhs: NULL: "e4m3"; or "e5m2" */
  const char* rhs_format; /* of the quantized rhs: NULL: "e4m3"; or "e5m2" (nvfp4: ignored) */
  /* scale = fp8_max / amax / 2^margin (delayed and current), in powers of 2: 0..127. */
  int margin;
  /* delayed: amaxes of the last N calls the scale is taken from, 1..8388608 (2^23: the scale
   * state counts its calls in a float); 0: 1024 (TE's default); negative or above 2^23:
   * CGEMM_ERROR_INVALID_ARGUMENT. The same bound as cgemm-run's and cgemm-bench's
   * --amax_history_len. */
  int amax_history_len;
  /* delayed: NULL or "max" (of the history), "most_recent" (the last call's amax). */
  const char* amax_compute_algo;
  /* Appended after amax_compute_algo (still 0.1.0). Pre-quantized operands (Transformer Engine's
   * ScaledTensor: a cached FP8 weight, a norm's FP8 output), scaling "current" or "delayed" only:
   * nonzero, the caller's lhs (rhs) already holds lhs_format (rhs_format) codes, one byte per
   * element (its tensor info's dtype says "float8_e4m3fn" or "float8_e5m2"), and each call passes
   * its scale_inv (cgemm_plan_execute_scaled); the plan quantizes only the other operand. The
   * scale_inv is one float32 for the global tensor, the same on every rank (TE's amax reduction
   * over the mesh); the all-gather moves the FP8 bytes and every chunk's GEMM applies this rank's
   * scale_inv. The operand must contract its trailing dims (Hopper's FP8 layout: an lhs [M...,
   * K...], an rhs [N..., K...], a [K, N] weight passed as [N, K] with rhs_contracting (1,));
   * another layout, or a block-scaling mode: CGEMM_ERROR_RUNTIME naming it. 0 or 1; other values:
   * CGEMM_ERROR_INVALID_ARGUMENT. */
  int lhs_quantized;
  int rhs_quantized;
} cgemm_plan_options;

/* As cgemm_context_options_init: the defaults (no quantization) in the struct_size bytes at
 * options, struct_size set. CGEMM_ERROR_INVALID_ARGUMENT (nothing written): options NULL, or
 * struct_size below the first version (struct_size through amax_compute_algo: 48 bytes on
 * LP64) or above 4096. */
CGEMM_API cgemm_status cgemm_plan_options_init(cgemm_plan_options* options, size_t struct_size);

/* cgemm_plan_create with options: collective, the same descriptor, statuses and messages plus
 * the options' (CGEMM_ERROR_INVALID_ARGUMENT for a struct_size as above, an unknown word, a
 * margin outside 0..127, an amax_history_len outside 0..2^23). options NULL:
 * cgemm_plan_create. The plan's operands keep desc's dtypes (cgemm_plan_tensor_info):
 * quantization is inside, except a pre-quantized operand's (lhs_quantized / rhs_quantized),
 * whose dtype is its FP8 format. */
CGEMM_API cgemm_status cgemm_plan_create_ex(cgemm_context* ctx, const cgemm_plan_desc* desc,
                                            const cgemm_plan_options* options, cgemm_plan** out);

/* Collective. NULL: nothing. A handle that is not live (destroyed already): nothing either,
 * and cgemm_last_error() says so (no status to return). */
CGEMM_API void cgemm_plan_destroy(cgemm_plan* plan);

typedef enum cgemm_operand {
  CGEMM_LHS = 0,
  CGEMM_RHS = 1,
  CGEMM_BIAS = 2,
  CGEMM_OUT = 3,
  /* An all-gather plan's gathered lhs, which cgemm_plan_execute_gathered can hand out: this
   * rank's lhs shard with its sequence dim (1, or 0 with transpose_batch_sequence) times tp,
   * in sequence order. Its tensor info: local_shape that shape, global_shape the lhs's global
   * shape, offset the lhs's offset with the sequence entry 0, dtype the lhs's. ndim 0 where a
   * plan hands none out (reduce_scatter and none; plans that quantize their lhs, whose ring
   * carries the plan's quantized copy; a pre-quantized lhs is handed out, in its FP8 format). */
  CGEMM_GATHERED_LHS = 4
} cgemm_operand;

typedef struct cgemm_tensor_info {
  int ndim;                             /* 0: the plan has no such operand (a bias) */
  int64_t global_shape[CGEMM_MAX_NDIM]; /* the whole tensor */
  int64_t local_shape[CGEMM_MAX_NDIM];  /* this rank's shard: the buffer execute takes */
  int64_t offset[CGEMM_MAX_NDIM];       /* the shard's first element in the global tensor */
  int64_t bytes;                        /* of this rank's buffer (row-major, contiguous) */
  const char* dtype;                    /* its dtype's name (static string) */
} cgemm_tensor_info;

CGEMM_API cgemm_status cgemm_plan_tensor_info(const cgemm_plan* plan, cgemm_operand operand,
                                              cgemm_tensor_info* out);

/* Collective. The GEMM on this rank's shards: row-major contiguous buffers of
 * cgemm_plan_tensor_info's local shapes and bytes; host memory on the CPU backend, device
 * memory on the CUDA backend (asynchronous there, on the backend's stream 0). bias may be
 * NULL only when the plan has none; out must not overlap the inputs. Synchronous on the CPU
 * backend: out holds the result on return. */
CGEMM_API cgemm_status cgemm_plan_execute(cgemm_plan* plan, const void* lhs, const void* rhs,
                                          const void* bias, void* out);
/* The same on the caller's stream (CUDA: a cudaStream_t of the context's GPU, passed as
 * void*; the legacy default stream is cudaStreamLegacy, not NULL). The plan's streams fork
 * from it and join back to it with events, never a host wait (except where the dp group's
 * collectives go through the host: GPUs shared and the dp group spanning nodes, which a
 * quantized plan with current scaling uses for its amax): the GEMM starts after the work
 * queued on `stream` before the call, and work queued on `stream` after the call starts after
 * the GEMM (its output complete), so a producer and a consumer on `stream` need no
 * synchronization of their own. The host does not wait: synchronize `stream` before reading
 * the output on the host. NULL: exactly cgemm_plan_execute (the backend's stream 0). The CPU
 * backend ignores `stream` (the call is synchronous there). The same argument checks and
 * statuses as cgemm_plan_execute; a stream of another device is CGEMM_ERROR_RUNTIME. */
CGEMM_API cgemm_status cgemm_plan_execute_on_stream(cgemm_plan* plan, const void* lhs,
                                                    const void* rhs, const void* bias, void* out,
                                                    void* stream);
/* cgemm_plan_execute_on_stream that also writes the lhs an all-gather plan gathers into
 * gathered_lhs (CGEMM_GATHERED_LHS's tensor info; must not overlap another operand), with no
 * second collective: the weight gradient reuses it, as Transformer Engine's layers do (a
 * column-parallel layer's wgrad from the forward's AG(x), a row-parallel one's from the dgrad's
 * AG(dy)). gathered_lhs NULL: exactly cgemm_plan_execute_on_stream. A plan that hands none out
 * (CGEMM_GATHERED_LHS's ndim 0) refuses a non-NULL one: CGEMM_ERROR_RUNTIME naming why, before
 * any work. */
CGEMM_API cgemm_status cgemm_plan_execute_gathered(cgemm_plan* plan, const void* lhs,
                                                   const void* rhs, const void* bias, void* out,
                                                   void* gathered_lhs, void* stream);

/* cgemm_plan_execute_gathered with the scale_inv of each pre-quantized operand
 * (cgemm_plan_options' lhs_quantized / rhs_quantized): one float32 each, in the memory the
 * operands are in, read on the plan's streams after the call's start (stream-ordered like the
 * operands). A pre-quantized operand's scale_inv NULL, or one given for an operand the plan
 * quantizes itself: CGEMM_ERROR_INVALID_ARGUMENT naming it. An all-gather plan with a
 * pre-quantized lhs hands out its gathered FP8 bytes (valid with the same scale_inv). */
CGEMM_API cgemm_status cgemm_plan_execute_scaled(cgemm_plan* plan, const void* lhs, const void* rhs,
                                                 const void* bias, void* out,
                                                 const float* lhs_scale_inv,
                                                 const float* rhs_scale_inv, void* gathered_lhs,
                                                 void* stream);

/* ---- CUDA graphs (docs/CUDA_GRAPHS.md) ----
 * A graph is one plan call captured once and replayed: cgemm_graph_replay is one
 * cudaGraphLaunch of the call's whole multi-stream work (GEMMs, copies, the copy-engine
 * transport's flag waits, NCCL), no per-op host work. It computes the captured call on the
 * pointers it was captured with (their contents as they are at the replay). Replays and
 * execute calls of the plan may alternate in any order and number: both give the same bytes.
 *
 * cgemm_plan_capture: the call cgemm_plan_execute_gathered(plan, lhs, rhs, bias, out,
 * gathered_lhs, stream) would make, captured from `stream` (a created cudaStream_t of the
 * context's GPU, not capturing yet; NULL: the backend's stream 0; nothing runs now) and
 * instantiated into *graph. The same
 * argument checks and statuses as the execute call, then, before anything is recorded,
 * CGEMM_ERROR_RUNTIME "GEMM 'NAME' cannot be captured into a CUDA graph: ..." naming the op or
 * transport that cannot be (the UCX staged transport, a dp group through the host, a trace
 * being taken). Every rank of the plan's groups must capture (and replay) the same calls, as
 * it must execute them. A GEMM whose algorithm was never chosen gets the heuristic's first
 * inside a capture (untimed): execute the call once before capturing it to keep the timed
 * choice. A replay is ordered with the context's other calls as an eager call is, whatever
 * stream it is launched on.
 * cgemm_plan_execute_on_stream (and _gathered) may also be called inside the caller's own
 * capture of `stream` (cudaStreamBeginCapture; torch.cuda.graph): the same checks, the same
 * refusal before anything is recorded.
 * The CPU backend emulates graphs: a capture records nothing and a replay runs the call again
 * (synchronously), so the checks and refusals are the same without a GPU.
 * A plan's graphs are destroyed with it (cgemm_plan_destroy); their handles are then refused. * A
 * plan with pre-quantized operands (cgemm_plan_options' lhs_quantized / rhs_quantized) is not
 * captured yet: CGEMM_ERROR_INVALID_ARGUMENT. */
typedef struct cgemm_graph cgemm_graph;
CGEMM_API cgemm_status cgemm_plan_capture(cgemm_plan* plan, const void* lhs, const void* rhs,
                                          const void* bias, void* out, void* gathered_lhs,
                                          void* stream, cgemm_graph** graph);
/* Launches the graph on `stream` (NULL: the stream it was captured from). Asynchronous on the
 * CUDA backend, ordered on `stream` like cgemm_plan_execute_on_stream. */
CGEMM_API cgemm_status cgemm_graph_replay(cgemm_graph* graph, void* stream);
/* NULL is a no-op; the plan's other graphs are unaffected. */
CGEMM_API void cgemm_graph_destroy(cgemm_graph* graph);

#ifdef __cplusplus
}
#endif

/* The grouped GEMM (G GEMMs in one call): its own header, part of this API. */
#include <cgemm/cgemm_grouped.h>
/* FP8 quantization a caller keeps (pre-quantized operands): its own header, part of this API. */
#include <cgemm/cgemm_quantized.h>

#endif /* CGEMM_CGEMM_H */
