/* The C API's contract (cgemm/cgemm.h) from C, linked to libcgemm.so: statuses and messages
 * (before MPI_Init, NULL arguments, bad names and specs, a planner rule, a bias that does not
 * match the plan, a context destroyed before its plans), the last error per thread, the
 * Fortran-handle constructor, the tensor queries, and one execute that writes every element;
 * execute on a caller's stream (the CPU backend ignores it: the same bits), and the borrowed
 * NCCL communicator's refusals that a CPU backend can see (its checks, never its pointer);
 * the context options (cgemm_context_options, cgemm_context_create_ex*): the struct_size
 * rule, gpu_sharing's values, and gpu_sharing accepted without effect on the CPU backend.
 * The plan options: FP8 current and delayed scaling on the CPU backend against a float64
 * reference of the unquantized GEMM, and their argument errors.
 * Compiled as C11, so the header is proved to be C. Exit 0 when every check held on this rank. */
#include <cgemm/cgemm.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures = 0;
static int rank = -1;

#define CHECK(cond)                                                                               \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      fprintf(stderr, "test_capi: rank %d: %s:%d: FAILED: %s (last error: %s)\n", rank, __FILE__, \
              __LINE__, #cond, cgemm_last_error());                                               \
      ++failures;                                                                                 \
    }                                                                                             \
  } while (0)

/* The status is `want` and the thread's message holds `fragment`. */
#define CHECK_FAILS(call, want, fragment)                \
  do {                                                   \
    cgemm_status st_ = (call);                           \
    CHECK(st_ == (want));                                \
    CHECK(strstr(cgemm_last_error(), fragment) != NULL); \
  } while (0)

static char thread_message[512];
static cgemm_status thread_status;

static void* fail_on_another_thread(void* arg) {
  (void)arg;
  cgemm_context* ctx = NULL;
  thread_status = cgemm_context_create(MPI_COMM_WORLD, NULL, &ctx);
  snprintf(thread_message, sizeof thread_message, "%s", cgemm_last_error());
  return NULL;
}

static void plan_desc(cgemm_plan_desc* pd, int tp) {
  cgemm_plan_desc_init(pd);
  pd->lhs_ndim = 3;
  pd->lhs_shape[0] = 2, pd->lhs_shape[1] = 4 * tp, pd->lhs_shape[2] = 8;
  pd->rhs_ndim = 2;
  pd->rhs_shape[0] = 8, pd->rhs_shape[1] = 4 * tp;
  pd->dtype = "float32";
  pd->lhs_spec = "('dp', 'tpsp', None)";
  pd->rhs_spec = "(None, 'tpsp')";
  pd->collective = "all_gather";
}

/* plan_desc's GEMM at sizes quantized GEMMs take (cuBLAS: contracting and output dims
 * multiples of 16): lhs [2, 4 tp, 32] @ rhs [32, 16 tp]. */
static void fp8_desc(cgemm_plan_desc* pd, int tp) {
  plan_desc(pd, tp);
  pd->lhs_shape[2] = 32;
  pd->rhs_shape[0] = 32, pd->rhs_shape[1] = 16 * tp;
}

/* One all-gather GEMM of plan options `po` (NULL: none) on fresh inputs drawn from `seed`
 * (global values by global index, so every rank's shards are of one tensor), into y; 0 when
 * every call succeeded. Fills *max_err with max |y - ref| / sum_k |x||w| over this rank's
 * shard, ref the float64 GEMM of the unquantized inputs. */
static int run_plan(cgemm_context* ctx, int world, const cgemm_plan_options* po, unsigned seed,
                    int calls, float* y, double* max_err) {
  cgemm_plan_desc pd;
  fp8_desc(&pd, world);
  cgemm_plan* plan = NULL;
  if (cgemm_plan_create_ex(ctx, &pd, po, &plan) != CGEMM_SUCCESS) return 1;
  cgemm_tensor_info x, w, o;
  cgemm_plan_tensor_info(plan, CGEMM_LHS, &x);
  cgemm_plan_tensor_info(plan, CGEMM_RHS, &w);
  cgemm_plan_tensor_info(plan, CGEMM_OUT, &o);
  const int64_t S = x.global_shape[1], K = x.global_shape[2], N = w.global_shape[1];
  /* Global lhs [2, S, K] and rhs [K, N]: a hash of the index and the seed, a multiple of
   * 2^-10 in [-2, 2) (rarely 0). */
#define VAL(i, salt) \
  ((float)(((((uint32_t)(i) + (salt)) * 2654435761u) >> 8) % 4093u + 1u) / 1024.0f - 2.0f)
  float* xs = malloc((size_t)x.bytes);
  float* ws = malloc((size_t)w.bytes);
  for (int64_t b = 0; b < x.local_shape[0]; ++b)
    for (int64_t r = 0; r < x.local_shape[1]; ++r)
      for (int64_t k = 0; k < K; ++k)
        xs[(b * x.local_shape[1] + r) * K + k] =
            VAL(((b + x.offset[0]) * S + r + x.offset[1]) * K + k, seed);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < w.local_shape[1]; ++n)
      ws[k * w.local_shape[1] + n] = VAL(k * N + n + w.offset[1], seed * 7u + 1u);
  for (int64_t i = 0; i < o.bytes / 4; ++i) y[i] = NAN;
  int failed = 0;
  for (int c = 0; c < calls; ++c) failed |= cgemm_plan_execute(plan, xs, ws, NULL, y) != 0;
  /* A quantized plan's ring carries the quantized lhs: it hands no gathered lhs out. */
  cgemm_tensor_info g;
  CHECK(cgemm_plan_tensor_info(plan, CGEMM_GATHERED_LHS, &g) == CGEMM_SUCCESS);
  if (po != NULL && po->scaling != NULL && strcmp(po->scaling, "none") != 0) {
    CHECK(g.ndim == 0 && g.bytes == 0);
    CHECK_FAILS(cgemm_plan_execute_gathered(plan, xs, ws, NULL, y, xs, NULL), CGEMM_ERROR_RUNTIME,
                "gathered");
  } else {
    CHECK(g.ndim == 3);
  }
  *max_err = 0.0;
  /* out [2, S, N/tp] of columns o.offset[2]..: the reference from the global values. */
  for (int64_t b = 0; b < o.local_shape[0]; ++b)
    for (int64_t r = 0; r < o.local_shape[1]; ++r)
      for (int64_t n = 0; n < o.local_shape[2]; ++n) {
        double ref = 0.0, mag = 0.0;
        for (int64_t k = 0; k < K; ++k) {
          const double a = VAL((b * S + r) * K + k, seed);
          const double v = VAL(k * N + n + o.offset[2], seed * 7u + 1u);
          ref += a * v;
          mag += fabs(a * v);
        }
        const double got = y[(b * o.local_shape[1] + r) * o.local_shape[2] + n];
        const double err = fabs(got - ref) / mag;
        *max_err = isnan(err) || err > *max_err ? err : *max_err; /* NaN sticks */
        if (isnan(*max_err)) break;
      }
#undef VAL
  free(xs), free(ws);
  cgemm_plan_destroy(plan);
  return failed;
}

static void check_fp8_plans(cgemm_context* ctx, int world) {
  cgemm_plan_options po;
  CHECK_FAILS(cgemm_plan_options_init(NULL, sizeof po), CGEMM_ERROR_INVALID_ARGUMENT,
              "cgemm_plan_options_init: options is NULL");
  /* The first version ends at amax_compute_algo: one byte less is refused; exactly it (a
   * caller built against that header) is taken, its later fields (lhs_quantized,
   * rhs_quantized) left at their zero defaults. */
  const size_t v1 = offsetof(cgemm_plan_options, amax_compute_algo) + sizeof(const char*);
  CHECK_FAILS(cgemm_plan_options_init(&po, v1 - 1), CGEMM_ERROR_INVALID_ARGUMENT,
              "options->struct_size");
  memset(&po, 0x5a, sizeof po);
  CHECK(cgemm_plan_options_init(&po, v1) == CGEMM_SUCCESS && po.struct_size == v1);
  {
    /* The bytes past v1 (lhs_quantized, rhs_quantized: 0x5a5a5a5a) are not read. */
    cgemm_plan_desc vd;
    fp8_desc(&vd, world);
    po.scaling = "current";
    cgemm_plan* vplan = NULL;
    CHECK(cgemm_plan_create_ex(ctx, &vd, &po, &vplan) == CGEMM_SUCCESS);
    cgemm_tensor_info vi;
    CHECK(vplan != NULL && cgemm_plan_tensor_info(vplan, CGEMM_LHS, &vi) == CGEMM_SUCCESS &&
          strcmp(vi.dtype, vd.dtype != NULL ? vd.dtype : "bfloat16") == 0);
    cgemm_plan_destroy(vplan);
  }
  CHECK(cgemm_plan_options_init(&po, sizeof po) == CGEMM_SUCCESS);
  CHECK(po.lhs_quantized == 0 && po.rhs_quantized == 0);
  CHECK(po.struct_size == sizeof po && po.scaling == NULL && po.margin == 0 &&
        po.amax_history_len == 0 && po.amax_compute_algo == NULL);
  cgemm_plan_desc pd;
  fp8_desc(&pd, world);
  cgemm_plan* plan = NULL;
  CHECK_FAILS(cgemm_plan_create_ex(ctx, NULL, &po, &plan), CGEMM_ERROR_INVALID_ARGUMENT,
              "cgemm_plan_create_ex: desc is NULL");
  CHECK_FAILS(cgemm_plan_create_ex(NULL, &pd, &po, &plan), CGEMM_ERROR_INVALID_ARGUMENT,
              "cgemm_plan_create_ex: ctx is NULL");
  CHECK_FAILS(cgemm_plan_create_ex(ctx, &pd, &po, NULL), CGEMM_ERROR_INVALID_ARGUMENT,
              "out is NULL");
  po.scaling = "fp8";
  CHECK_FAILS(cgemm_plan_create_ex(ctx, &pd, &po, &plan), CGEMM_ERROR_INVALID_ARGUMENT,
              "options->scaling: unknown scaling 'fp8' (expected none, delayed, current");
  po.scaling = "current";
  po.lhs_format = "e3m4";
  CHECK_FAILS(cgemm_plan_create_ex(ctx, &pd, &po, &plan), CGEMM_ERROR_INVALID_ARGUMENT,
              "options->lhs_format: unknown FP8 format 'e3m4'");
  po.lhs_format = "e5m2";
  po.rhs_format = "e5m2"; /* gemm.py's FP8 pairs refuse e5m2 x e5m2 */
  CHECK_FAILS(cgemm_plan_create_ex(ctx, &pd, &po, &plan), CGEMM_ERROR_PLAN,
              "incompatible data types: float8_e5m2 x float8_e5m2");
  po.lhs_format = po.rhs_format = NULL;
  po.margin = 128;
  CHECK_FAILS(cgemm_plan_create_ex(ctx, &pd, &po, &plan), CGEMM_ERROR_INVALID_ARGUMENT,
              "options->margin 128: must be 0..127");
  po.margin = 0;
  po.amax_history_len = -1;
  CHECK_FAILS(cgemm_plan_create_ex(ctx, &pd, &po, &plan), CGEMM_ERROR_INVALID_ARGUMENT,
              "options->amax_history_len -1");
  po.amax_history_len = 0;
  po.amax_compute_algo = "mean";
  CHECK_FAILS(cgemm_plan_create_ex(ctx, &pd, &po, &plan), CGEMM_ERROR_INVALID_ARGUMENT,
              "options->amax_compute_algo");
  po.amax_compute_algo = NULL;
  po.struct_size = 0;
  CHECK_FAILS(cgemm_plan_create_ex(ctx, &pd, &po, &plan), CGEMM_ERROR_INVALID_ARGUMENT,
              "options->struct_size 0");
  CHECK(plan == NULL);

  /* The GEMMs: float32 in and out (fp8_desc's shapes). */
  fp8_desc(&pd, world);
  cgemm_plan* probe = NULL;
  CHECK(cgemm_plan_create(ctx, &pd, &probe) == CGEMM_SUCCESS);
  if (probe == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  cgemm_tensor_info o;
  cgemm_plan_tensor_info(probe, CGEMM_OUT, &o);
  cgemm_plan_destroy(probe);
  const size_t n = (size_t)(o.bytes / 4);
  float* plain = malloc(n * sizeof(float));
  float* none = malloc(n * sizeof(float));
  float* current = malloc(n * sizeof(float));
  float* delayed = malloc(n * sizeof(float));
  const unsigned seed = 1234567u * (unsigned)time(NULL);
  unsigned shared_seed = seed;
  MPI_Bcast(&shared_seed, 1, MPI_UNSIGNED, 0, MPI_COMM_WORLD); /* one tensor on every rank */
  double e_plain = 0, e_none = 0, e_current = 0, e_delayed = 0;
  /* Without options, with "none": the same GEMM, the same bits. */
  CHECK(run_plan(ctx, world, NULL, shared_seed, 1, plain, &e_plain) == 0);
  cgemm_plan_options_init(&po, sizeof po);
  po.scaling = "none";
  CHECK(run_plan(ctx, world, &po, shared_seed, 1, none, &e_none) == 0);
  CHECK(memcmp(plain, none, n * sizeof(float)) == 0);
  CHECK(e_plain < 1e-6);
  /* Current scaling, e4m3 x e4m3: each operand quantized with a relative error of at most 2^-4
   * (3 mantissa bits; a nonzero |x| >= 2^-10 here, scaled by 448 / amax >= 224 it is above
   * e4m3's smallest normal 2^-6, so none is subnormal), so the
   * product's error is at most (2^-4 + 2^-4 + 2^-8) of sum |x||w|, plus fp32 accumulation. It
   * differs from the unquantized GEMM: the quantization ran. */
  cgemm_plan_options_init(&po, sizeof po);
  po.scaling = "current";
  CHECK(run_plan(ctx, world, &po, shared_seed, 1, current, &e_current) == 0);
  CHECK(e_current <= 0.0625 + 0.0625 + 0.00390625 + 1e-5);
  CHECK(memcmp(plain, current, n * sizeof(float)) != 0);
  /* Delayed scaling: the first call uses scale 1, the later ones the history's amax; after 3
   * calls on the same inputs the scale is current scaling's, so the same bits. */
  po.scaling = "delayed";
  po.amax_history_len = 4;
  po.amax_compute_algo = "most_recent";
  CHECK(run_plan(ctx, world, &po, shared_seed, 3, delayed, &e_delayed) == 0);
  CHECK(memcmp(current, delayed, n * sizeof(float)) == 0);
  if (rank == 0) {
    printf("fp8 plans: max error / sum|x||w|: none %.2e, current %.2e, delayed %.2e (seed %u)\n",
           e_none, e_current, e_delayed, shared_seed);
  }
  free(plain), free(none), free(current), free(delayed);
}

int main(int argc, char** argv) {
  cgemm_context_desc cd;
  cgemm_context_desc_init(&cd);
  CHECK(cd.dp == 1 && cd.tp == 0 && cd.num_max_streams == 3 && cd.chunks_per_rank == 1);
  cgemm_context* ctx = NULL;
  CHECK_FAILS(cgemm_context_create(MPI_COMM_WORLD, &cd, &ctx), CGEMM_ERROR_INVALID_ARGUMENT,
              "cgemm_context_create: MPI is not initialized");
  CHECK(ctx == NULL);
  CHECK_FAILS(cgemm_context_create_ex(MPI_COMM_WORLD, &cd, NULL, &ctx),
              CGEMM_ERROR_INVALID_ARGUMENT, "cgemm_context_create_ex: MPI is not initialized");
  CHECK(ctx == NULL);

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);

  int major = -1, minor = -1, patch = -1;
  cgemm_version(&major, &minor, &patch);
  char version[64];
  snprintf(version, sizeof version, "%d.%d.%d", major, minor, patch);
  CHECK(strcmp(version, cgemm_version_string()) == 0);
  CHECK(strcmp(cgemm_status_name(CGEMM_ERROR_PLAN), "CGEMM_ERROR_PLAN") == 0);
  CHECK(strcmp(cgemm_status_name((cgemm_status)99), "unknown status") == 0);

  CHECK_FAILS(cgemm_context_create(MPI_COMM_WORLD, NULL, &ctx), CGEMM_ERROR_INVALID_ARGUMENT,
              "cgemm_context_create: desc is NULL");
  cd.backend = "gpu";
  CHECK_FAILS(cgemm_context_create(MPI_COMM_WORLD, &cd, &ctx), CGEMM_ERROR_INVALID_ARGUMENT,
              "backend");
  CHECK(ctx == NULL);

  /* The last error is per thread: another thread's failure leaves this thread's message. */
  CHECK_FAILS(cgemm_context_create(MPI_COMM_WORLD, &cd, &ctx), CGEMM_ERROR_INVALID_ARGUMENT, "gpu");
  pthread_t thread;
  pthread_create(&thread, NULL, fail_on_another_thread, NULL);
  pthread_join(thread, NULL);
  CHECK(thread_status == CGEMM_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(thread_message, "desc is NULL") != NULL);
  CHECK(strstr(cgemm_last_error(), "gpu") != NULL);

  /* The Fortran handle of our communicator. */
  cd.backend = "cpu";
  CHECK(cgemm_context_create_fortran(MPI_Comm_c2f(MPI_COMM_WORLD), &cd, &ctx) == CGEMM_SUCCESS);
  if (ctx == NULL) {
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  cgemm_context_info info;
  CHECK(cgemm_context_get_info(ctx, &info) == CGEMM_SUCCESS);
  CHECK(info.world_rank == rank && info.world_size == world && info.dp == 1 && info.tp == world &&
        info.tp_rank == rank && strcmp(info.backend, "cpu") == 0);

  cgemm_plan_desc pd;
  cgemm_plan* plan = NULL;
  plan_desc(&pd, world);
  pd.lhs_spec = "('dp', 'tpsp' None)";
  CHECK_FAILS(cgemm_plan_create(ctx, &pd, &plan), CGEMM_ERROR_INVALID_ARGUMENT,
              "lhs_spec: partition spec \"('dp', 'tpsp' None)\": expected ',' or ')' at offset 14");
  plan_desc(&pd, world);
  pd.lhs_ndim = CGEMM_MAX_NDIM + 1;
  CHECK_FAILS(cgemm_plan_create(ctx, &pd, &plan), CGEMM_ERROR_INVALID_ARGUMENT, "lhs_ndim 9");
  plan_desc(&pd, world);
  pd.collective = "all_reduce";
  CHECK_FAILS(cgemm_plan_create(ctx, &pd, &plan), CGEMM_ERROR_INVALID_ARGUMENT, "all_reduce");
  if (world > 1) {
    plan_desc(&pd, world);
    pd.lhs_shape[1] = 4 * world + 1; /* the sequence does not divide over tp */
    CHECK_FAILS(cgemm_plan_create(ctx, &pd, &plan), CGEMM_ERROR_RUNTIME, "not divisible");
  }
  CHECK(plan == NULL);

  plan_desc(&pd, world);
  CHECK(cgemm_plan_create(ctx, &pd, &plan) == CGEMM_SUCCESS);
  if (plan == NULL) {
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  cgemm_tensor_info x, w, b, y;
  CHECK(cgemm_plan_tensor_info(plan, CGEMM_LHS, &x) == CGEMM_SUCCESS);
  CHECK(cgemm_plan_tensor_info(plan, CGEMM_RHS, &w) == CGEMM_SUCCESS);
  CHECK(cgemm_plan_tensor_info(plan, CGEMM_BIAS, &b) == CGEMM_SUCCESS);
  CHECK(cgemm_plan_tensor_info(plan, CGEMM_OUT, &y) == CGEMM_SUCCESS);
  CHECK_FAILS(cgemm_plan_tensor_info(plan, (cgemm_operand)7, &y), CGEMM_ERROR_INVALID_ARGUMENT,
              "operand 7");
  CHECK(x.ndim == 3 && x.local_shape[1] == 4 && x.offset[1] == 4 * rank &&
        x.bytes == 2 * 4 * 8 * 4);
  CHECK(strcmp(x.dtype, "float32") == 0);
  CHECK(w.ndim == 2 && w.local_shape[1] == 4 && w.offset[1] == 4 * rank);
  CHECK(b.ndim == 0 && b.bytes == 0);
  CHECK(y.ndim == 3 && y.global_shape[1] == 4 * world && y.local_shape[1] == 4 * world &&
        y.local_shape[2] == 4 && y.offset[2] == 4 * rank && y.bytes == 2 * 4 * world * 4 * 4);

  float* xs = malloc((size_t)x.bytes);
  float* ws = malloc((size_t)w.bytes);
  float* ys = malloc((size_t)y.bytes);
  for (int64_t i = 0; i < x.bytes / 4; ++i) xs[i] = (float)sin((double)(i + rank));
  for (int64_t i = 0; i < w.bytes / 4; ++i) ws[i] = (float)cos((double)i);
  for (int64_t i = 0; i < y.bytes / 4; ++i) ys[i] = NAN;
  CHECK_FAILS(cgemm_plan_execute(plan, xs, ws, xs, ys), CGEMM_ERROR_INVALID_ARGUMENT,
              "the plan has none");
  CHECK_FAILS(cgemm_plan_execute(plan, NULL, ws, NULL, ys), CGEMM_ERROR_INVALID_ARGUMENT,
              "lhs is NULL");
  CHECK(cgemm_plan_execute(plan, xs, ws, NULL, ys) == CGEMM_SUCCESS);
  int64_t unwritten = 0;
  for (int64_t i = 0; i < y.bytes / 4; ++i) unwritten += isfinite(ys[i]) ? 0 : 1;
  CHECK(unwritten == 0);

  /* On a caller's stream: the same checks first, then the CPU backend ignores the stream (a
   * value no CUDA call would accept: it is never looked at) and writes the same bits. */
  void* const not_a_stream = (void*)(uintptr_t)0x5173;
  float* ys2 = malloc((size_t)y.bytes);
  for (int64_t i = 0; i < y.bytes / 4; ++i) ys2[i] = NAN;
  CHECK_FAILS(cgemm_plan_execute_on_stream(NULL, xs, ws, NULL, ys2, not_a_stream),
              CGEMM_ERROR_INVALID_ARGUMENT, "cgemm_plan_execute_on_stream: plan is NULL");
  CHECK_FAILS(cgemm_plan_execute_on_stream(plan, xs, NULL, NULL, ys2, not_a_stream),
              CGEMM_ERROR_INVALID_ARGUMENT, "cgemm_plan_execute_on_stream: rhs is NULL");
  CHECK_FAILS(cgemm_plan_execute_on_stream(plan, xs, ws, NULL, NULL, not_a_stream),
              CGEMM_ERROR_INVALID_ARGUMENT, "out is NULL");
  CHECK_FAILS(cgemm_plan_execute_on_stream(plan, xs, ws, xs, ys2, not_a_stream),
              CGEMM_ERROR_INVALID_ARGUMENT, "the plan has none");
  CHECK(cgemm_plan_execute_on_stream(plan, xs, ws, NULL, ys2, not_a_stream) == CGEMM_SUCCESS);
  CHECK(memcmp(ys, ys2, (size_t)y.bytes) == 0);
  for (int64_t i = 0; i < y.bytes / 4; ++i) ys2[i] = NAN;
  CHECK(cgemm_plan_execute_on_stream(plan, xs, ws, NULL, ys2, NULL) == CGEMM_SUCCESS);
  CHECK(memcmp(ys, ys2, (size_t)y.bytes) == 0);

  /* The gathered lhs: this rank's [2, 4, 8] grown to [2, 4 * world, 8], every rank's shard in
   * sequence order, with the same output; refused by a plan that hands none out. */
  cgemm_tensor_info g;
  CHECK(cgemm_plan_tensor_info(plan, CGEMM_GATHERED_LHS, &g) == CGEMM_SUCCESS);
  CHECK(g.ndim == 3 && g.local_shape[0] == 2 && g.local_shape[1] == 4 * world &&
        g.local_shape[2] == 8 && g.global_shape[1] == 4 * world && g.offset[1] == 0 &&
        g.bytes == x.bytes * world && strcmp(g.dtype, "float32") == 0);
  float* gathered = malloc((size_t)g.bytes);
  float* every_x = malloc((size_t)g.bytes);
  for (int64_t i = 0; i < g.bytes / 4; ++i) gathered[i] = NAN;
  for (int64_t i = 0; i < y.bytes / 4; ++i) ys2[i] = NAN;
  CHECK(cgemm_plan_execute_gathered(plan, xs, ws, NULL, ys2, gathered, NULL) == CGEMM_SUCCESS);
  CHECK(memcmp(ys, ys2, (size_t)y.bytes) == 0);
  MPI_Allgather(xs, (int)(x.bytes / 4), MPI_FLOAT, every_x, (int)(x.bytes / 4), MPI_FLOAT,
                MPI_COMM_WORLD);
  int64_t misplaced = 0;
  for (int r = 0; r < world; ++r)
    for (int bi = 0; bi < 2; ++bi)
      for (int si = 0; si < 4; ++si)
        for (int k = 0; k < 8; ++k) {
          const float want = every_x[((r * 2 + bi) * 4 + si) * 8 + k];
          misplaced += gathered[(bi * 4 * world + r * 4 + si) * 8 + k] != want;
        }
  CHECK(misplaced == 0);
  /* A captured call (emulated on the CPU backend): nothing runs at the capture, each replay
   * writes the eager bytes (the output poisoned before), graphs go with their plan. */
  cgemm_graph* graph = NULL;
  CHECK_FAILS(cgemm_plan_capture(plan, xs, ws, NULL, ys2, NULL, NULL, NULL),
              CGEMM_ERROR_INVALID_ARGUMENT, "graph is NULL");
  CHECK_FAILS(cgemm_plan_capture(plan, NULL, ws, NULL, ys2, NULL, NULL, &graph),
              CGEMM_ERROR_INVALID_ARGUMENT, "lhs");
  CHECK(graph == NULL);
  for (int64_t i = 0; i < y.bytes / 4; ++i) ys2[i] = NAN;
  CHECK(cgemm_plan_capture(plan, xs, ws, NULL, ys2, gathered, NULL, &graph) == CGEMM_SUCCESS);
  CHECK(graph != NULL && isnan(ys2[0]));
  for (int replay = 0; replay < 3; ++replay) {
    for (int64_t i = 0; i < y.bytes / 4; ++i) ys2[i] = NAN;
    CHECK(cgemm_graph_replay(graph, NULL) == CGEMM_SUCCESS);
    CHECK(memcmp(ys, ys2, (size_t)y.bytes) == 0);
  }
  cgemm_graph_destroy(graph);
  CHECK_FAILS(cgemm_graph_replay(graph, NULL), CGEMM_ERROR_INVALID_ARGUMENT,
              "not a live cgemm_graph: it was destroyed already");
  CHECK(cgemm_plan_capture(plan, xs, ws, NULL, ys2, NULL, NULL, &graph) == CGEMM_SUCCESS);
  free(gathered), free(every_x);

  /* A context outlives its plans. */
  CHECK_FAILS(cgemm_context_destroy(ctx), CGEMM_ERROR_STATE, "1 plan(s) or quantized tensor(s) of this context remain");
  cgemm_plan_destroy(plan);
  /* The plan took its graph along. */
  CHECK_FAILS(cgemm_graph_replay(graph, NULL), CGEMM_ERROR_INVALID_ARGUMENT,
              "not a live cgemm_graph: it was destroyed already");
  cgemm_graph_destroy(graph); /* a stale handle: refused quietly */
  free(xs), free(ws), free(ys), free(ys2);
  CHECK(cgemm_context_destroy(ctx) == CGEMM_SUCCESS);
  cgemm_plan_destroy(NULL);
  CHECK(cgemm_context_destroy(NULL) == CGEMM_SUCCESS);
  /* A borrowed NCCL communicator: refused, alike on every rank, before its pointer is used
   * (these are not communicators). The CPU backend cannot use one: this build has no CUDA, or
   * the backend is "cpu" (on a CUDA build the message says that instead). */
  void* const not_a_comm = (void*)(uintptr_t)0x4e43;
  cgemm_context* nctx = NULL;
  CHECK_FAILS(cgemm_context_create_nccl(MPI_COMM_WORLD, not_a_comm, NULL, &nctx),
              CGEMM_ERROR_INVALID_ARGUMENT, "cgemm_context_create_nccl: desc is NULL");
  CHECK_FAILS(cgemm_context_create_nccl(MPI_COMM_NULL, not_a_comm, &cd, &nctx),
              CGEMM_ERROR_INVALID_ARGUMENT, "comm is MPI_COMM_NULL");
  CHECK_FAILS(cgemm_context_create_nccl(MPI_COMM_WORLD, not_a_comm, &cd, &nctx),
              CGEMM_ERROR_BACKEND,
              "cgemm_context_create_nccl: nccl_comm: a borrowed NCCL communicator needs the CUDA "
              "backend");
  CHECK_FAILS(
      cgemm_context_create_nccl_fortran(MPI_Comm_c2f(MPI_COMM_WORLD), not_a_comm, &cd, &nctx),
      CGEMM_ERROR_BACKEND, "needs the CUDA backend");
  if (world > 1) {
    /* One rank lends none: every rank refuses, naming it. */
    CHECK_FAILS(
        cgemm_context_create_nccl(MPI_COMM_WORLD, rank == 1 ? NULL : not_a_comm, &cd, &nctx),
        CGEMM_ERROR_BACKEND, "world rank 1 passes no NCCL communicator while others do");
  }
  CHECK(nctx == NULL);
  /* NULL everywhere: as cgemm_context_create. */
  CHECK(cgemm_context_create_nccl(MPI_COMM_WORLD, NULL, &cd, &nctx) == CGEMM_SUCCESS);
  CHECK(cgemm_context_destroy(nctx) == CGEMM_SUCCESS);

  /* Context options (cgemm_context_options, the _ex creators): the size rule, the values. */
  cgemm_context_options opts;
  CHECK_FAILS(cgemm_context_options_init(NULL, sizeof opts), CGEMM_ERROR_INVALID_ARGUMENT,
              "cgemm_context_options_init: options is NULL");
  memset(&opts, 0x5a, sizeof opts);
  CHECK_FAILS(cgemm_context_options_init(&opts, 3), CGEMM_ERROR_INVALID_ARGUMENT,
              "options->struct_size 3: must be 24..4096 bytes");
  CHECK(opts.struct_size != 3); /* refused: nothing written */
  CHECK(cgemm_context_options_init(&opts, sizeof opts) == CGEMM_SUCCESS);
  CHECK(opts.struct_size == sizeof opts && opts.gpu_sharing == 0 && opts.nccl_comm == NULL);
  cgemm_context* xctx = NULL;
  CHECK_FAILS(cgemm_context_create_ex(MPI_COMM_WORLD, NULL, &opts, &xctx),
              CGEMM_ERROR_INVALID_ARGUMENT, "cgemm_context_create_ex: desc is NULL");
  CHECK_FAILS(cgemm_context_create_ex(MPI_COMM_WORLD, &cd, &opts, NULL),
              CGEMM_ERROR_INVALID_ARGUMENT, "cgemm_context_create_ex: out is NULL");
  CHECK_FAILS(cgemm_context_create_ex(MPI_COMM_NULL, &cd, &opts, &xctx),
              CGEMM_ERROR_INVALID_ARGUMENT, "comm is MPI_COMM_NULL");
  opts.struct_size = 0; /* a struct never initialized */
  CHECK_FAILS(cgemm_context_create_ex(MPI_COMM_WORLD, &cd, &opts, &xctx),
              CGEMM_ERROR_INVALID_ARGUMENT, "options->struct_size 0: must be 24..4096 bytes");
  opts.struct_size = (size_t)1 << 40;
  CHECK_FAILS(cgemm_context_create_ex_fortran(MPI_Comm_c2f(MPI_COMM_WORLD), &cd, &opts, &xctx),
              CGEMM_ERROR_INVALID_ARGUMENT,
              "cgemm_context_create_ex_fortran: options->struct_size");
  opts.struct_size = sizeof opts;
  opts.gpu_sharing = 2;
  CHECK_FAILS(cgemm_context_create_ex(MPI_COMM_WORLD, &cd, &opts, &xctx),
              CGEMM_ERROR_INVALID_ARGUMENT, "options->gpu_sharing 2: must be 0 or 1");
  opts.gpu_sharing = -1;
  CHECK_FAILS(cgemm_context_create_world_ex(&cd, &opts, &xctx), CGEMM_ERROR_INVALID_ARGUMENT,
              "cgemm_context_create_world_ex: options->gpu_sharing -1");
  /* The stream and transport knobs (appended after fsdp_axis): their values. */
  cgemm_context_options_init(&opts, sizeof opts);
  CHECK(opts.compute_stream_priority == 0 && opts.communication_stream_priority == 0 &&
        opts.no_ce == 0 && opts.num_sm_for_communication == 0);
  opts.communication_stream_priority = -1;
  CHECK_FAILS(cgemm_context_create_ex(MPI_COMM_WORLD, &cd, &opts, &xctx),
              CGEMM_ERROR_INVALID_ARGUMENT,
              "options->communication_stream_priority -1: must be 0 or more");
  opts.communication_stream_priority = 0;
  opts.no_ce = 2;
  CHECK_FAILS(cgemm_context_create_ex(MPI_COMM_WORLD, &cd, &opts, &xctx),
              CGEMM_ERROR_INVALID_ARGUMENT, "options->no_ce 2: must be 0 or 1");
  opts.no_ce = 0;
  opts.num_sm_for_communication = -3;
  CHECK_FAILS(cgemm_context_create_ex(MPI_COMM_WORLD, &cd, &opts, &xctx),
              CGEMM_ERROR_INVALID_ARGUMENT, "options->num_sm_for_communication -3");
  CHECK(xctx == NULL);
  /* A caller of a newer header: a larger struct whose unknown bytes are zero is accepted (its
   * new fields at their defaults); a set unknown byte is refused, not dropped. */
  struct {
    cgemm_context_options known;
    int64_t newer_field;
  } newer;
  CHECK(cgemm_context_options_init(&newer.known, sizeof newer) == CGEMM_SUCCESS);
  CHECK(newer.known.struct_size == sizeof newer && newer.newer_field == 0);
  newer.newer_field = 7;
  CHECK_FAILS(cgemm_context_create_ex(MPI_COMM_WORLD, &cd, &newer.known, &xctx),
              CGEMM_ERROR_INVALID_ARGUMENT, "is set, but this library's options struct has");
  newer.newer_field = 0;
  CHECK(cgemm_context_create_ex(MPI_COMM_WORLD, &cd, &newer.known, &xctx) == CGEMM_SUCCESS);
  CHECK(cgemm_context_destroy(xctx) == CGEMM_SUCCESS);
  xctx = NULL;
  /* gpu_sharing on the CPU backend: accepted and without effect, as in the C++ runtime (the
   * backend rule looks at it only for the CUDA backend); the GEMM gives the same bits as a
   * context without it. Through each form: MPI_Comm, Fortran handle, MPI_COMM_WORLD. So do the
   * CUDA-only stream priorities and no_ce, and num_sm_for_communication (no effect anywhere). */
  cgemm_context_options_init(&opts, sizeof opts);
  opts.gpu_sharing = 1;
  opts.compute_stream_priority = 2;
  opts.communication_stream_priority = 3;
  opts.no_ce = 1;
  opts.num_sm_for_communication = 4;
  for (int form = 0; form < 3; ++form) {
    cgemm_status st = form == 0   ? cgemm_context_create_ex(MPI_COMM_WORLD, &cd, &opts, &xctx)
                      : form == 1 ? cgemm_context_create_ex_fortran(MPI_Comm_c2f(MPI_COMM_WORLD),
                                                                    &cd, &opts, &xctx)
                                  : cgemm_context_create_world_ex(&cd, &opts, &xctx);
    CHECK(st == CGEMM_SUCCESS);
    if (xctx == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
    CHECK(cgemm_context_get_info(xctx, &info) == CGEMM_SUCCESS);
    CHECK(strcmp(info.backend, "cpu") == 0 && info.tp == world);
    cgemm_plan* xplan = NULL;
    plan_desc(&pd, world);
    CHECK(cgemm_plan_create(xctx, &pd, &xplan) == CGEMM_SUCCESS);
    if (xplan == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
    float* a = malloc((size_t)x.bytes);
    float* v = malloc((size_t)w.bytes);
    float* r1 = malloc((size_t)y.bytes);
    float* r2 = malloc((size_t)y.bytes);
    for (int64_t i = 0; i < x.bytes / 4; ++i) a[i] = (float)sin((double)(3 * i + form + rank));
    for (int64_t i = 0; i < w.bytes / 4; ++i) v[i] = (float)cos((double)(5 * i + form));
    for (int64_t i = 0; i < y.bytes / 4; ++i) r1[i] = r2[i] = NAN;
    CHECK(cgemm_plan_execute(xplan, a, v, NULL, r1) == CGEMM_SUCCESS);
    cgemm_plan_destroy(xplan);
    CHECK(cgemm_context_destroy(xctx) == CGEMM_SUCCESS);
    xctx = NULL;
    /* The reference: the same GEMM on a context made without options. */
    CHECK(cgemm_context_create(MPI_COMM_WORLD, &cd, &xctx) == CGEMM_SUCCESS);
    CHECK(cgemm_plan_create(xctx, &pd, &xplan) == CGEMM_SUCCESS);
    CHECK(cgemm_plan_execute(xplan, a, v, NULL, r2) == CGEMM_SUCCESS);
    int64_t unwritten = 0;
    for (int64_t i = 0; i < y.bytes / 4; ++i) unwritten += isfinite(r1[i]) ? 0 : 1;
    CHECK(unwritten == 0 && memcmp(r1, r2, (size_t)y.bytes) == 0);
    cgemm_plan_destroy(xplan);
    CHECK(cgemm_context_destroy(xctx) == CGEMM_SUCCESS);
    xctx = NULL;
    free(a), free(v), free(r1), free(r2);
  }
  /* options NULL: the defaults; the borrowed communicator through the options is
   * cgemm_context_create_nccl's, refused on the CPU backend alike. */
  CHECK(cgemm_context_create_ex(MPI_COMM_WORLD, &cd, NULL, &xctx) == CGEMM_SUCCESS);
  CHECK(cgemm_context_destroy(xctx) == CGEMM_SUCCESS);
  xctx = NULL;
  cgemm_context_options_init(&opts, sizeof opts);
  opts.nccl_comm = not_a_comm;
  CHECK_FAILS(cgemm_context_create_ex(MPI_COMM_WORLD, &cd, &opts, &xctx), CGEMM_ERROR_BACKEND,
              "cgemm_context_create_ex: nccl_comm: a borrowed NCCL communicator needs the CUDA "
              "backend");
  CHECK(xctx == NULL);

  /* Plan options (cgemm_plan_options, cgemm_plan_create_ex): FP8 quantization. */
  CHECK(cgemm_context_create(MPI_COMM_WORLD, &cd, &xctx) == CGEMM_SUCCESS);
  if (xctx == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  check_fp8_plans(xctx, world);
  CHECK(cgemm_context_destroy(xctx) == CGEMM_SUCCESS);

  /* MPI is ours, not the library's: cgemm_mpi_finalize leaves it. */
  CHECK(cgemm_mpi_finalize() == CGEMM_SUCCESS);
  int finalized = 1;
  MPI_Finalized(&finalized);
  CHECK(finalized == 0);

  int total = failures;
  MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf(total == 0 ? "PASS\n" : "FAIL: %d failed checks\n", total);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
