/* The C API's grouped plans (cgemm_grouped_plan_* in cgemm/cgemm.h) from C, linked to
 * libcgemm.so, on the CPU backend: both forms against a float64 reference computed here from
 * fresh random inputs (a new seed per run, printed), outputs poisoned with NaN before every call:
 * float32 ragged rows with a bias and an empty group, float32 ragged contracting with lhs [K, M],
 * and FP8 (e4m3) ragged rows with a scale_inv per group and operand. Each rank plans and calls on
 * its own sizes (the family is local: no collective). A plan of path "cublaslt_device_tiles"
 * captured and replayed with sizes changed in place between replays. Then the refusals, each with
 * its status and message: NULL and extra pointers, sizes that sum past the ragged dim or are
 * negative (after which the output is still poisoned), unknown words, a planner rule, a handle of
 * the wrong kind, a context destroyed before its grouped plan, a destroyed handle. A caller's
 * stream (ignored by the CPU backend) gives the same bits. Exit 0 when every check held on this
 * rank. */
#include <cgemm/cgemm.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures = 0;
static int rank = -1;

#define CHECK(cond)                                                                             \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      fprintf(stderr, "test_capi_grouped: rank %d: %s:%d: FAILED: %s (last error: %s)\n", rank, \
              __FILE__, __LINE__, #cond, cgemm_last_error());                                   \
      ++failures;                                                                               \
    }                                                                                           \
  } while (0)

#define CHECK_FAILS(call, want, fragment)                \
  do {                                                   \
    cgemm_status st_ = (call);                           \
    CHECK(st_ == (want));                                \
    CHECK(strstr(cgemm_last_error(), fragment) != NULL); \
  } while (0)

static unsigned seed_state;
/* A value in +-[0.25, 1), never 0. */
static float draw(void) {
  seed_state = seed_state * 1664525u + 1013904223u;
  const float mag = 0.25f + 0.75f * (float)((seed_state >> 8) & 0xffff) / 65536.0f;
  return (seed_state >> 30) & 1 ? mag : -mag;
}

/* The FP8 e4m3 values drawn: +-{0.5, 1, 1.5, 2} and their bytes (sign, 4 exponent bits with
 * bias 7, 3 mantissa bits). */
static const float kE4m3Values[4] = {0.5f, 1.0f, 1.5f, 2.0f};
static const uint8_t kE4m3Bytes[4] = {0x30, 0x38, 0x3C, 0x40};
static float draw_e4m3(uint8_t* byte) {
  seed_state = seed_state * 1664525u + 1013904223u;
  const int i = (int)((seed_state >> 12) & 3);
  const int neg = (int)((seed_state >> 29) & 1);
  *byte = (uint8_t)(kE4m3Bytes[i] | (neg ? 0x80 : 0));
  return neg ? -kE4m3Values[i] : kE4m3Values[i];
}

/* The plan of one case: float32 unless fp8, ragged rows [M, K] @ [G, N, K] (contracting
 * (1,), (2,)) or ragged contracting [K, M] @ [K, N] ((0,), (0,)). */
static void grouped_desc(cgemm_grouped_plan_desc* d, int contracting, int64_t g, int64_t ragged,
                         int64_t other, int64_t n, int bias, int fp8) {
  cgemm_grouped_plan_desc_init(d);
  d->name = "experts";
  d->num_groups = g;
  d->lhs_ndim = 2;
  d->dtype = fp8 ? "float8_e4m3fn" : "float32";
  d->out_dtype = "float32";
  if (fp8) d->scaling = "current";
  if (!contracting) {
    d->lhs_shape[0] = ragged, d->lhs_shape[1] = other;
    d->rhs_ndim = 3;
    d->rhs_shape[0] = g, d->rhs_shape[1] = n, d->rhs_shape[2] = other;
  } else {
    d->form = "ragged_contracting";
    d->lhs_shape[0] = ragged, d->lhs_shape[1] = other;
    d->lhs_contracting[0] = 0;
    d->rhs_ndim = 2;
    d->rhs_shape[0] = ragged, d->rhs_shape[1] = n;
    d->rhs_contracting[0] = 0;
  }
  if (bias) {
    d->bias_ndim = 2;
    d->bias_shape[0] = g, d->bias_shape[1] = n;
  }
}

/* One call of a fresh plan of the case on fresh inputs, checked element by element against
 * float64. `sizes`: G sizes summing to `ragged`. */
static void check_case(cgemm_context* ctx, int contracting, const int32_t* sizes, int64_t g,
                       int64_t other, int64_t n, int bias, int fp8) {
  int64_t ragged = 0;
  for (int64_t i = 0; i < g; ++i) ragged += sizes[i];
  cgemm_grouped_plan_desc d;
  grouped_desc(&d, contracting, g, ragged, other, n, bias, fp8);
  cgemm_grouped_plan* plan = NULL;
  CHECK(cgemm_grouped_plan_create(ctx, &d, &plan) == CGEMM_SUCCESS);
  if (plan == NULL) return;
  cgemm_tensor_info li, ri, oi, bi;
  CHECK(cgemm_grouped_plan_tensor_info(plan, CGEMM_LHS, &li) == CGEMM_SUCCESS);
  CHECK(cgemm_grouped_plan_tensor_info(plan, CGEMM_RHS, &ri) == CGEMM_SUCCESS);
  CHECK(cgemm_grouped_plan_tensor_info(plan, CGEMM_OUT, &oi) == CGEMM_SUCCESS);
  CHECK(cgemm_grouped_plan_tensor_info(plan, CGEMM_BIAS, &bi) == CGEMM_SUCCESS);
  CHECK(bi.ndim == (bias ? 2 : 0));
  CHECK(strcmp(oi.dtype, "float32") == 0);
  cgemm_grouped_plan_info info;
  CHECK(cgemm_grouped_plan_get_info(plan, &info) == CGEMM_SUCCESS);
  CHECK(info.num_groups == g && info.ragged_extent == ragged && strcmp(info.path, "loop") == 0);
  if (!contracting) {
    CHECK(oi.ndim == 2 && oi.global_shape[0] == ragged && oi.global_shape[1] == n);
  } else {
    CHECK(oi.ndim == 3 && oi.global_shape[0] == g && oi.global_shape[1] == other &&
          oi.global_shape[2] == n);
  }
  const int64_t nl = li.bytes / (fp8 ? 1 : 4), nr = ri.bytes / (fp8 ? 1 : 4);
  const int64_t no = oi.bytes / 4;
  double* lv = malloc((size_t)nl * sizeof(double));
  double* rv = malloc((size_t)nr * sizeof(double));
  void* lb = malloc((size_t)li.bytes);
  void* rb = malloc((size_t)ri.bytes);
  float* out = malloc((size_t)no * sizeof(float));
  float* out2 = malloc((size_t)no * sizeof(float));
  float* bv = malloc((size_t)(g * n) * sizeof(float));
  float sl[8], sr[8];
  for (int64_t i = 0; i < nl; ++i) {
    if (fp8) {
      lv[i] = draw_e4m3((uint8_t*)lb + i);
    } else {
      ((float*)lb)[i] = draw();
      lv[i] = ((float*)lb)[i];
    }
  }
  for (int64_t i = 0; i < nr; ++i) {
    if (fp8) {
      rv[i] = draw_e4m3((uint8_t*)rb + i);
    } else {
      ((float*)rb)[i] = draw();
      rv[i] = ((float*)rb)[i];
    }
  }
  for (int64_t i = 0; i < g * n; ++i) bv[i] = draw();
  for (int64_t i = 0; i < g; ++i) sl[i] = 1.25f + draw(), sr[i] = 1.25f + draw();
  for (int64_t i = 0; i < no; ++i) out[i] = out2[i] = NAN;
  CHECK(cgemm_grouped_plan_execute(plan, sizes, lb, rb, bias ? bv : NULL, out, fp8 ? sl : NULL,
                                   fp8 ? sr : NULL, NULL) == CGEMM_SUCCESS);
  /* A caller's stream: ignored by the CPU backend, the same bits. */
  CHECK(cgemm_grouped_plan_execute(plan, sizes, lb, rb, bias ? bv : NULL, out2, fp8 ? sl : NULL,
                                   fp8 ? sr : NULL, (void*)0x1) == CGEMM_SUCCESS);
  CHECK(memcmp(out, out2, (size_t)no * sizeof(float)) == 0);
  int64_t bad = 0, off = 0;
  const int64_t m_all = contracting ? other : ragged, k_all = contracting ? ragged : other;
  for (int64_t gi = 0; gi < g; ++gi) {
    const int64_t i0 = contracting ? 0 : off, i1 = contracting ? other : off + sizes[gi];
    const int64_t p0 = contracting ? off : 0, p1 = contracting ? off + sizes[gi] : k_all;
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double r = 0.0, mag = 0.0;
        for (int64_t p = p0; p < p1; ++p) {
          /* rows: lhs [M, K], rhs[g] [N, K]; contracting: lhs [K, M], rhs [K, N]. */
          const double a = contracting ? lv[p * m_all + i] : lv[i * k_all + p];
          const double b = contracting ? rv[p * n + j] : rv[(gi * n + j) * k_all + p];
          r += a * b;
          mag += fabs(a * b);
        }
        if (fp8) r *= (double)sl[gi] * sr[gi], mag *= (double)sl[gi] * sr[gi];
        const double c = bias ? bv[gi * n + j] : 0.0;
        const int64_t at = contracting ? (gi * other + i) * n + j : i * n + j;
        /* The CPU backend accumulates in float64 and rounds to float32 once or twice. */
        if (!(fabs(out[at] - (r + c)) <= 1e-6 * (mag + fabs(c)) + 1e-30)) ++bad;
      }
    }
    off += sizes[gi];
  }
  CHECK(bad == 0);
  free(lv), free(rv), free(lb), free(rb), free(out), free(out2), free(bv);
  cgemm_grouped_plan_destroy(plan);
}

/* Path "cublaslt_device_tiles" reads the sizes where they are, so its call can be captured: a
 * graph replayed with sizes changed in place between replays, each replay equal to an eager
 * call on the same sizes (the CPU backend emulates graphs: a replay runs the call). */
static void check_device_sizes_capture(cgemm_context* ctx) {
  int32_t sizes[3] = {64, 0, 0}; /* M = 64, K 16, N 8 */
  cgemm_grouped_plan_desc d;
  grouped_desc(&d, 0, 3, 64, 16, 8, 1, 0);
  d.path = "cublaslt_device_tiles";
  cgemm_grouped_plan* plan = NULL;
  CHECK(cgemm_grouped_plan_create(ctx, &d, &plan) == CGEMM_SUCCESS);
  if (plan == NULL) return;
  cgemm_grouped_plan_info info;
  CHECK(cgemm_grouped_plan_get_info(plan, &info) == CGEMM_SUCCESS);
  CHECK(strcmp(info.path, "loop") == 0); /* the CPU backend loops, reading the sizes in place */
  float* lhs = malloc(64 * 16 * sizeof(float));
  float* rhs = malloc(3 * 8 * 16 * sizeof(float));
  float* bias = malloc(3 * 8 * sizeof(float));
  float* out = malloc(64 * 8 * sizeof(float));
  float* eager = malloc(64 * 8 * sizeof(float));
  for (int i = 0; i < 64 * 16; ++i) lhs[i] = draw();
  for (int i = 0; i < 3 * 8 * 16; ++i) rhs[i] = draw();
  for (int i = 0; i < 3 * 8; ++i) bias[i] = draw();
  for (int i = 0; i < 64 * 8; ++i) out[i] = NAN;
  cgemm_graph* graph = NULL;
  CHECK(cgemm_grouped_plan_capture(plan, sizes, lhs, rhs, bias, out, NULL, NULL, NULL, &graph) ==
        CGEMM_SUCCESS);
  int untouched = 1;
  for (int i = 0; i < 64 * 8; ++i) untouched &= isnan(out[i]) != 0;
  CHECK(untouched); /* capturing runs nothing */
  const int32_t sets[3][3] = {{64, 0, 0}, {10, 0, 54}, {1, 62, 1}};
  for (int s = 0; s < 3; ++s) {
    memcpy(sizes, sets[s], sizeof(sizes));
    for (int i = 0; i < 64 * 8; ++i) out[i] = eager[i] = NAN;
    CHECK(cgemm_graph_replay(graph, NULL) == CGEMM_SUCCESS);
    CHECK(cgemm_grouped_plan_execute(plan, sizes, lhs, rhs, bias, eager, NULL, NULL, NULL) ==
          CGEMM_SUCCESS);
    CHECK(memcmp(out, eager, 64 * 8 * sizeof(float)) == 0);
    /* Every element against float64, each row with its group's weights and bias. */
    int64_t bad = 0;
    for (int row = 0, g = 0, end = sizes[0]; row < 64; ++row) {
      while (row >= end) end += sizes[++g];
      for (int j = 0; j < 8; ++j) {
        double r = bias[g * 8 + j], mag = fabs(r);
        for (int k = 0; k < 16; ++k) {
          r += (double)lhs[row * 16 + k] * rhs[(g * 8 + j) * 16 + k];
          mag += fabs((double)lhs[row * 16 + k] * rhs[(g * 8 + j) * 16 + k]);
        }
        if (!(fabs(out[row * 8 + j] - r) <= 1e-6 * mag + 1e-30)) ++bad;
      }
    }
    CHECK(bad == 0);
  }
  sizes[1] = 63; /* {1, 63, 1}: they sum to 65 */
  CHECK_FAILS(cgemm_graph_replay(graph, NULL), CGEMM_ERROR_RUNTIME,
              "the group sizes sum to 65, but the ragged dim M (lhs rows) = 64");
  /* The CPU backend refused those sizes before it ran: nothing left to report. */
  CHECK(cgemm_grouped_plan_check_device_sizes(plan) == CGEMM_SUCCESS);
  cgemm_graph_destroy(graph);
  cgemm_grouped_plan_destroy(plan);
  CHECK_FAILS(cgemm_grouped_plan_check_device_sizes(plan), CGEMM_ERROR_INVALID_ARGUMENT,
              "it was destroyed already");
  free(lhs), free(rhs), free(bias), free(out), free(eager);
}

static void check_refusals(cgemm_context* ctx) {
  const int32_t sizes[4] = {24, 0, 40, 32}; /* M = 96 */
  cgemm_grouped_plan_desc d;
  grouped_desc(&d, 0, 4, 96, 16, 8, 1, 0);
  cgemm_grouped_plan* plan = NULL;
  CHECK(cgemm_grouped_plan_create(ctx, &d, &plan) == CGEMM_SUCCESS);
  float* x = calloc(96 * 16 * 4, sizeof(float));
  float* out = malloc(96 * 8 * sizeof(float));
  for (int i = 0; i < 96 * 8; ++i) out[i] = NAN;
  CHECK_FAILS(cgemm_grouped_plan_execute(plan, NULL, x, x, x, out, NULL, NULL, NULL),
              CGEMM_ERROR_INVALID_ARGUMENT, "group_sizes is NULL");
  CHECK_FAILS(cgemm_grouped_plan_execute(plan, sizes, x, x, NULL, out, NULL, NULL, NULL),
              CGEMM_ERROR_INVALID_ARGUMENT, "bias is NULL but the plan has a bias");
  CHECK_FAILS(cgemm_grouped_plan_execute(plan, sizes, x, x, x, out, x, x, NULL),
              CGEMM_ERROR_INVALID_ARGUMENT, "lhs_scale_inv is given but the plan's inputs are");
  /* A grouped call needs the host mid-call: its capture is refused, naming that op, after the
   * argument checks and with no graph made. */
  cgemm_graph* graph = (cgemm_graph*)x;
  CHECK_FAILS(cgemm_grouped_plan_capture(plan, sizes, x, x, NULL, out, NULL, NULL, NULL, &graph),
              CGEMM_ERROR_INVALID_ARGUMENT, "bias is NULL but the plan has a bias");
  graph = (cgemm_graph*)x; /* set again: the call before already nulled it */
  CHECK_FAILS(cgemm_grouped_plan_capture(plan, sizes, x, x, x, out, NULL, NULL, NULL, &graph),
              CGEMM_ERROR_RUNTIME,
              "grouped GEMM 'experts' cannot be captured into a CUDA graph: group sizes to host");
  CHECK(graph == NULL);
  const int32_t over[4] = {24, 0, 40, 33}, negative[4] = {30, -6, 40, 32};
  CHECK_FAILS(cgemm_grouped_plan_execute(plan, over, x, x, x, out, NULL, NULL, NULL),
              CGEMM_ERROR_RUNTIME,
              "grouped GEMM 'experts': the group sizes sum to 97, but the ragged dim M (lhs rows) "
              "= 96 (they may sum to less, the rest being padding, not to more)");
  CHECK_FAILS(cgemm_grouped_plan_execute(plan, negative, x, x, x, out, NULL, NULL, NULL),
              CGEMM_ERROR_RUNTIME, "grouped GEMM 'experts': group 1 has a negative size -6");
  int poisoned = 1;
  for (int i = 0; i < 96 * 8; ++i) poisoned &= isnan(out[i]) != 0;
  CHECK(poisoned);
  /* A grouped plan holds its context. */
  CHECK_FAILS(cgemm_context_destroy(ctx), CGEMM_ERROR_STATE, "");
  /* A context handle is no grouped plan; a destroyed plan is refused, not reused. */
  CHECK_FAILS(cgemm_grouped_plan_get_info((const cgemm_grouped_plan*)ctx, NULL),
              CGEMM_ERROR_INVALID_ARGUMENT, "plan is not a live cgemm_grouped_plan");
  cgemm_grouped_plan_destroy(plan);
  cgemm_grouped_plan_info info;
  CHECK_FAILS(cgemm_grouped_plan_get_info(plan, &info), CGEMM_ERROR_INVALID_ARGUMENT,
              "it was destroyed already");
  free(x), free(out);

  cgemm_grouped_plan* p2 = NULL;
  grouped_desc(&d, 0, 4, 96, 16, 8, 0, 0);
  d.form = "ragged";
  CHECK_FAILS(cgemm_grouped_plan_create(ctx, &d, &p2), CGEMM_ERROR_INVALID_ARGUMENT,
              "form \"ragged\": not one of \"ragged_rows\", \"ragged_contracting\"");
  grouped_desc(&d, 0, 4, 96, 16, 8, 0, 0);
  d.path = "fast";
  CHECK_FAILS(cgemm_grouped_plan_create(ctx, &d, &p2), CGEMM_ERROR_INVALID_ARGUMENT,
              "path \"fast\": not one of");
  grouped_desc(&d, 0, 4, 96, 16, 8, 1, 0);
  d.bias_shape[1] = 16; /* [G, K]: gemm.py's bias rule */
  CHECK_FAILS(cgemm_grouped_plan_create(ctx, &d, &p2), CGEMM_ERROR_PLAN,
              "bias shape [4, 16] does not match expected shape (4, prod [8])");
  grouped_desc(&d, 0, 4, 96, 16, 8, 0, 0);
  d.num_groups = 0;
  CHECK_FAILS(cgemm_grouped_plan_create(ctx, &d, &p2), CGEMM_ERROR_INVALID_ARGUMENT,
              "num_groups 0: must be at least 1");
  grouped_desc(&d, 0, 4, 96, 16, 8, 0, 1);
  d.scaling = NULL; /* FP8 without tensor scaling */
  CHECK_FAILS(cgemm_grouped_plan_create(ctx, &d, &p2), CGEMM_ERROR_RUNTIME,
              "FP8 inputs with scaling no_scaling are not run");
  CHECK(p2 == NULL);
  /* An FP8 plan needs both scale_invs. */
  grouped_desc(&d, 0, 4, 96, 16, 8, 0, 1);
  CHECK(cgemm_grouped_plan_create(ctx, &d, &p2) == CGEMM_SUCCESS);
  uint8_t bytes[96 * 16 * 4] = {0};
  float s[4] = {1, 1, 1, 1}, o[96 * 8];
  CHECK_FAILS(cgemm_grouped_plan_execute(p2, sizes, bytes, bytes, NULL, o, s, NULL, NULL),
              CGEMM_ERROR_INVALID_ARGUMENT,
              "rhs_scale_inv is NULL but the plan has FP8 inputs (G float32)");
  cgemm_grouped_plan_destroy(p2);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  seed_state = (unsigned)time(NULL) ^ (unsigned)clock() ^ (97u * (unsigned)rank);
  printf("test_capi_grouped: rank %d seed %u\n", rank, seed_state);
  cgemm_context_desc cd;
  cgemm_context_desc_init(&cd);
  cd.backend = "cpu";
  cgemm_context* ctx = NULL;
  CHECK(cgemm_context_create(MPI_COMM_WORLD, &cd, &ctx) == CGEMM_SUCCESS);
  if (ctx != NULL) {
    /* Each rank its own sizes: the grouped family is local. */
    const int32_t rows[4] = {17 + rank, 0, 3, 40 - rank};
    check_case(ctx, 0, rows, 4, 24, 8, 1, 0);
    const int32_t wgrad[3] = {0, 31, 9 + rank};
    check_case(ctx, 1, wgrad, 3, 12, 8, 1, 0);
    const int32_t fp8[3] = {32, 16 * rank, 48};
    check_case(ctx, 0, fp8, 3, 32, 16, 0, 1);
    check_device_sizes_capture(ctx);
    check_refusals(ctx);
    CHECK(cgemm_context_destroy(ctx) == CGEMM_SUCCESS);
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("test_capi_grouped: %s (%d failed checks)\n", all ? "FAIL" : "PASS", all);
  MPI_Finalize();
  return all != 0;
}
