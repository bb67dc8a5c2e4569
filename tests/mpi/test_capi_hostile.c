/* The C API (cgemm/cgemm.h) against a hostile caller, from C under mpirun (np 1 and 2):
 * Fortran handles that name no communicator, handles used after destroy or destroyed twice,
 * ranks that pass different arguments, the context's timeout_s bounds, amax_history_len's
 * bound and the memory check of a plan's scale state, control bytes in messages, and a
 * bias_spec without a bias. Each case expects a status and a message; the process must live
 * through all of them (an abort or a crash fails the test).
 *
 * With --skip-plan RANK, rank RANK skips one cgemm_plan_create that the others make: the
 * others must end the job within the context's timeout_s (2 s here), naming the wait, never
 * hang (the ctest checks the exit status and the line). */
#include <cgemm/cgemm.h>
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static int failures = 0;
static int rank = -1;

#define CHECK(cond)                                                                             \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      fprintf(stderr, "test_capi_hostile: rank %d: %s:%d: FAILED: %s (last error: %s)\n", rank, \
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

static void plan_desc(cgemm_plan_desc* pd, int tp) {
  cgemm_plan_desc_init(pd);
  pd->lhs_ndim = 3;
  pd->lhs_shape[0] = 2, pd->lhs_shape[1] = 4 * tp, pd->lhs_shape[2] = 32;
  pd->rhs_ndim = 2;
  pd->rhs_shape[0] = 32, pd->rhs_shape[1] = 16 * tp;
  pd->dtype = "float32";
  pd->lhs_spec = "('dp', 'tpsp', None)";
  pd->rhs_spec = "(None, 'tpsp')";
  pd->collective = "all_gather";
}

/* The caller's handler on MPI_COMM_WORLD is put back after each call. */
static int world_errors_are_fatal(void) {
  MPI_Errhandler h;
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &h);
  const int fatal = h == MPI_ERRORS_ARE_FATAL;
  MPI_Errhandler_free(&h);
  return fatal;
}

static void fortran_handles(const cgemm_context_desc* cd) {
  cgemm_context* ctx = NULL;
  cgemm_context_options o;
  cgemm_context_options_init(&o, sizeof o);
  /* An index no communicator has: MPI_Comm_f2c gives no MPI_COMM_NULL; MPI_Comm_size on it
   * used to abort the process (MPI_ERRORS_ARE_FATAL). */
  CHECK_FAILS(cgemm_context_create_fortran(12345, cd, &ctx), CGEMM_ERROR_INVALID_ARGUMENT,
              "cgemm_context_create_fortran: comm (Fortran handle 12345): not a communicator");
  CHECK_FAILS(cgemm_context_create_ex_fortran(-7, cd, &o, &ctx), CGEMM_ERROR_INVALID_ARGUMENT,
              "comm (Fortran handle -7): not a communicator");
  CHECK_FAILS(cgemm_context_create_nccl_fortran(INT_MAX, NULL, cd, &ctx),
              CGEMM_ERROR_INVALID_ARGUMENT, "not a communicator");
  /* A communicator freed already: its index names nothing now. */
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  const MPI_Fint freed = MPI_Comm_c2f(dup);
  MPI_Comm_free(&dup);
  CHECK_FAILS(cgemm_context_create_fortran(freed, cd, &ctx), CGEMM_ERROR_INVALID_ARGUMENT,
              "not a communicator");
  CHECK(ctx == NULL);
  CHECK(world_errors_are_fatal());
  /* MPI still works, and the right handle still makes a context. */
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(cgemm_context_create_fortran(MPI_Comm_c2f(MPI_COMM_WORLD), cd, &ctx) == CGEMM_SUCCESS);
  CHECK(cgemm_context_destroy(ctx) == CGEMM_SUCCESS);
  CHECK(world_errors_are_fatal());
}

static void stale_handles(const cgemm_context_desc* cd, int world) {
  cgemm_context* ctx = NULL;
  CHECK(cgemm_context_create(MPI_COMM_WORLD, cd, &ctx) == CGEMM_SUCCESS);
  if (ctx == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  cgemm_plan_desc pd;
  plan_desc(&pd, world);
  cgemm_plan* plan = NULL;
  CHECK(cgemm_plan_create(ctx, &pd, &plan) == CGEMM_SUCCESS);
  if (plan == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  cgemm_tensor_info x, w, y;
  CHECK(cgemm_plan_tensor_info(plan, CGEMM_LHS, &x) == CGEMM_SUCCESS);
  CHECK(cgemm_plan_tensor_info(plan, CGEMM_RHS, &w) == CGEMM_SUCCESS);
  CHECK(cgemm_plan_tensor_info(plan, CGEMM_OUT, &y) == CGEMM_SUCCESS);
  float* xs = calloc((size_t)x.bytes, 1);
  float* ws = calloc((size_t)w.bytes, 1);
  float* ys = calloc((size_t)y.bytes, 1);
  /* A plan handle is no context, a context handle no plan, and a made-up value neither. */
  cgemm_context_info info;
  CHECK_FAILS(cgemm_context_get_info((const cgemm_context*)plan, &info),
              CGEMM_ERROR_INVALID_ARGUMENT,
              "cgemm_context_get_info: ctx is not a live cgemm_context: not a handle cgemm "
              "returned");
  CHECK_FAILS(cgemm_plan_tensor_info((const cgemm_plan*)ctx, CGEMM_OUT, &y),
              CGEMM_ERROR_INVALID_ARGUMENT, "plan is not a live cgemm_plan");
  CHECK_FAILS(cgemm_plan_execute((cgemm_plan*)(uintptr_t)0x7fff1234, xs, ws, NULL, ys),
              CGEMM_ERROR_INVALID_ARGUMENT, "plan is not a live cgemm_plan");

  cgemm_plan_destroy(plan);
  /* Use after destroy: refused, never read from freed memory. */
  CHECK_FAILS(cgemm_plan_tensor_info(plan, CGEMM_OUT, &y), CGEMM_ERROR_INVALID_ARGUMENT,
              "cgemm_plan_tensor_info: plan is not a live cgemm_plan: it was destroyed already");
  CHECK_FAILS(cgemm_plan_execute(plan, xs, ws, NULL, ys), CGEMM_ERROR_INVALID_ARGUMENT,
              "cgemm_plan_execute: plan is not a live cgemm_plan: it was destroyed already");
  CHECK_FAILS(cgemm_plan_execute_on_stream(plan, xs, ws, NULL, ys, NULL),
              CGEMM_ERROR_INVALID_ARGUMENT, "it was destroyed already");
  /* Double destroy: nothing, and the last error says why. */
  cgemm_plan_destroy(plan);
  CHECK(strstr(cgemm_last_error(),
               "cgemm_plan_destroy: plan is not a live cgemm_plan: it was "
               "destroyed already") != NULL);
  /* The context counted the plan once: it can go now. */
  CHECK(cgemm_context_destroy(ctx) == CGEMM_SUCCESS);
  CHECK_FAILS(cgemm_context_get_info(ctx, &info), CGEMM_ERROR_INVALID_ARGUMENT,
              "cgemm_context_get_info: ctx is not a live cgemm_context: it was destroyed already");
  CHECK_FAILS(cgemm_context_destroy(ctx), CGEMM_ERROR_INVALID_ARGUMENT,
              "cgemm_context_destroy: ctx is not a live cgemm_context: it was destroyed already");
  CHECK_FAILS(cgemm_plan_create(ctx, &pd, &plan), CGEMM_ERROR_INVALID_ARGUMENT,
              "cgemm_plan_create: ctx is not a live cgemm_context");
  /* New objects never revive an old handle (a freed address would be reused at once). */
  cgemm_context* again = NULL;
  CHECK(cgemm_context_create(MPI_COMM_WORLD, cd, &again) == CGEMM_SUCCESS);
  CHECK(again != ctx);
  CHECK_FAILS(cgemm_context_get_info(ctx, &info), CGEMM_ERROR_INVALID_ARGUMENT,
              "it was destroyed already");
  CHECK(cgemm_context_get_info(again, &info) == CGEMM_SUCCESS && info.world_size == world);
  CHECK(cgemm_context_destroy(again) == CGEMM_SUCCESS);
  free(xs), free(ws), free(ys);
}

/* Ranks that pass different arguments: one message on every rank, naming the field. */
static void differing_ranks(const cgemm_context_desc* cd, int world) {
  if (world < 2) return;
  cgemm_context* ctx = NULL;
  cgemm_context_desc other = *cd;
  if (rank == 1) other.num_max_streams = 2;
  CHECK_FAILS(cgemm_context_create(MPI_COMM_WORLD, &other, &ctx), CGEMM_ERROR_INVALID_ARGUMENT,
              "cgemm_context_create: the ranks' arguments differ: rank 1 of the communicator "
              "passes num_max_streams 2, rank 0 passes 3");
  CHECK(ctx == NULL);
  other = *cd;
  if (rank == 1) other.dp = 2; /* a different mesh */
  CHECK_FAILS(cgemm_context_create(MPI_COMM_WORLD, &other, &ctx), CGEMM_ERROR_INVALID_ARGUMENT,
              "passes dp 2, rank 0 passes 1");
  cgemm_context_options o;
  cgemm_context_options_init(&o, sizeof o);
  o.timeout_s = rank == 1 ? 30.0 : 0.0;
  CHECK_FAILS(cgemm_context_create_ex(MPI_COMM_WORLD, cd, &o, &ctx), CGEMM_ERROR_INVALID_ARGUMENT,
              "passes options->timeout_s 30");
  CHECK(ctx == NULL);

  CHECK(cgemm_context_create(MPI_COMM_WORLD, cd, &ctx) == CGEMM_SUCCESS);
  if (ctx == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  cgemm_plan_desc pd;
  plan_desc(&pd, world);
  if (rank == world - 1) pd.lhs_shape[2] = pd.rhs_shape[0] = 16; /* a different K */
  cgemm_plan* plan = NULL;
  char want[160];
  snprintf(want, sizeof want,
           "cgemm_plan_create: the ranks' arguments differ: rank %d of the communicator passes "
           "lhs_shape [2, %d, 16], rank 0 passes [2, %d, 32]",
           world - 1, 4 * world, 4 * world);
  CHECK_FAILS(cgemm_plan_create(ctx, &pd, &plan), CGEMM_ERROR_INVALID_ARGUMENT, want);
  plan_desc(&pd, world);
  cgemm_plan_options po;
  cgemm_plan_options_init(&po, sizeof po);
  po.scaling = "delayed";
  po.amax_history_len = rank == 0 ? 16 : 32;
  CHECK_FAILS(cgemm_plan_create_ex(ctx, &pd, &po, &plan), CGEMM_ERROR_INVALID_ARGUMENT,
              "passes options->amax_history_len 32, rank 0 passes 16");
  /* One rank's bad argument is a difference too: every rank fails, none waits. */
  pd.collective = rank == 1 ? "all_reduce" : "all_gather";
  CHECK_FAILS(cgemm_plan_create(ctx, &pd, &plan), CGEMM_ERROR_INVALID_ARGUMENT,
              "passes collective \"all_reduce\", rank 0 passes \"all_gather\"");
  CHECK(plan == NULL);
  /* The plan's name labels only: it may differ. */
  plan_desc(&pd, world);
  char name[32];
  snprintf(name, sizeof name, "gemm_of_rank_%d", rank);
  pd.name = name;
  CHECK(cgemm_plan_create(ctx, &pd, &plan) == CGEMM_SUCCESS);
  cgemm_plan_destroy(plan);
  CHECK(cgemm_context_destroy(ctx) == CGEMM_SUCCESS);
}

static void timeout_option(const cgemm_context_desc* cd) {
  cgemm_context_options o;
  cgemm_context_options_init(&o, sizeof o);
  CHECK(o.timeout_s == 0.0);
  cgemm_context* ctx = NULL;
  const double bad[] = {-1.0, 1e7 + 1, 0.0 / 0.0, 1.0 / 0.0};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    o.timeout_s = bad[i];
    CHECK_FAILS(cgemm_context_create_ex(MPI_COMM_WORLD, cd, &o, &ctx), CGEMM_ERROR_INVALID_ARGUMENT,
                "options->timeout_s");
    CHECK(strstr(cgemm_last_error(), "must be 0 (the default) or more than 0 up to 10000000") !=
          NULL);
  }
  o.timeout_s = 120.0;
  CHECK(cgemm_context_create_ex(MPI_COMM_WORLD, cd, &o, &ctx) == CGEMM_SUCCESS);
  CHECK(cgemm_context_destroy(ctx) == CGEMM_SUCCESS);
  /* A caller of the first header's struct (no timeout_s): the default. */
  o.struct_size = 24;
  o.timeout_s = -1.0; /* beyond its struct_size: never read */
  CHECK(cgemm_context_create_ex(MPI_COMM_WORLD, cd, &o, &ctx) == CGEMM_SUCCESS);
  CHECK(cgemm_context_destroy(ctx) == CGEMM_SUCCESS);
}

/* amax_history_len: 2^23 at most, a documented bound; INT_MAX used to overflow an int in the
 * scale state's size (CGEMM_ERROR_INTERNAL), 1e8 took 4.9 GB. */
static void amax_history(const cgemm_context_desc* cd, int world) {
  cgemm_context* ctx = NULL;
  CHECK(cgemm_context_create(MPI_COMM_WORLD, cd, &ctx) == CGEMM_SUCCESS);
  if (ctx == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  cgemm_plan_desc pd;
  plan_desc(&pd, world);
  cgemm_plan_options po;
  cgemm_plan_options_init(&po, sizeof po);
  po.scaling = "delayed";
  cgemm_plan* plan = NULL;
  const int too_long[] = {8388609, 100000000, INT_MAX};
  for (size_t i = 0; i < sizeof too_long / sizeof too_long[0]; ++i) {
    po.amax_history_len = too_long[i];
    char want[96];
    snprintf(want, sizeof want, "options->amax_history_len %d: must be 1..8388608", too_long[i]);
    CHECK_FAILS(cgemm_plan_create_ex(ctx, &pd, &po, &plan), CGEMM_ERROR_INVALID_ARGUMENT, want);
  }
  CHECK(plan == NULL);
  /* FP8 output rows that are not 16-byte aligned (n = 17 float32 = 68 bytes): refused when
   * planned on every backend, as the GPU would only find out when it runs. */
  po.amax_history_len = 16;
  pd.rhs_shape[1] = 17 * world;
  CHECK_FAILS(cgemm_plan_create_ex(ctx, &pd, &po, &plan), CGEMM_ERROR_RUNTIME,
              "the output rows of each GEMM hold n=17 float32 elements, 68 bytes, not a multiple "
              "of 16: FP8 GEMMs need 16-byte aligned rows");
  CHECK(plan == NULL);
  plan_desc(&pd, world);
  /* The bound itself is a plan (its state: 2 x 32 MiB). */
  po.amax_history_len = 8388608;
  CHECK(cgemm_plan_create_ex(ctx, &pd, &po, &plan) == CGEMM_SUCCESS);
  cgemm_plan_destroy(plan);
  CHECK(cgemm_context_destroy(ctx) == CGEMM_SUCCESS);
}

static long vm_size_bytes(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (sscanf(line, "VmSize: %ld kB", &kb) == 1) break;
  }
  fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}

/* A plan's own buffers (workspaces, scale state) go through cgemm-run's memory check before
 * anything is allocated: under an address-space limit with 16 MiB of room, a GEMM whose
 * workspaces need more is CGEMM_ERROR_OUT_OF_MEMORY naming the limit, not a failed malloc or
 * an OOM kill. */
static void memory_check(const cgemm_context_desc* cd, int world) {
  cgemm_context* ctx = NULL;
  CHECK(cgemm_context_create(MPI_COMM_WORLD, cd, &ctx) == CGEMM_SUCCESS);
  if (ctx == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  cgemm_plan_desc pd;
  plan_desc(&pd, world);
  pd.lhs_shape[1] = 1024 * world, pd.lhs_shape[2] = pd.rhs_shape[0] = 1024;
  pd.rhs_shape[1] = 1024 * world;
  cgemm_plan* plan = NULL;
  struct rlimit old;
  getrlimit(RLIMIT_AS, &old);
  const long vm = vm_size_bytes();
  CHECK(vm > 0);
  if (vm > 0 && (old.rlim_max == RLIM_INFINITY || (rlim_t)vm + (16 << 20) < old.rlim_max)) {
    struct rlimit tight = old;
    tight.rlim_cur = (rlim_t)vm + (16 << 20);
    setrlimit(RLIMIT_AS, &tight);
    const cgemm_status st = cgemm_plan_create(ctx, &pd, &plan);
    setrlimit(RLIMIT_AS, &old);
    CHECK(st == CGEMM_ERROR_OUT_OF_MEMORY);
    CHECK(strstr(cgemm_last_error(),
                 "cgemm_plan_create: world rank 0: not enough memory: "
                 "this rank's address space (RLIMIT_AS") != NULL);
    CHECK(strstr(cgemm_last_error(), "its workspaces and scale state need") != NULL);
    CHECK(plan == NULL);
  }
  CHECK(cgemm_context_destroy(ctx) == CGEMM_SUCCESS);
}

static void messages_and_bias_spec(const cgemm_context_desc* cd, int world) {
  cgemm_context* ctx = NULL;
  CHECK(cgemm_context_create(MPI_COMM_WORLD, cd, &ctx) == CGEMM_SUCCESS);
  if (ctx == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  cgemm_plan_desc pd;
  plan_desc(&pd, world);
  cgemm_plan* plan = NULL;
  /* A spec with ESC and a newline: echoed as \x1b and \x0a, as cgemm-run shows them. */
  pd.lhs_spec = "('dp',\x1b[31m 'tpsp'\n)";
  CHECK_FAILS(cgemm_plan_create(ctx, &pd, &plan), CGEMM_ERROR_INVALID_ARGUMENT,
              "lhs_spec: partition spec \"('dp',\\x1b[31m 'tpsp'\\x0a)\"");
  CHECK(strchr(cgemm_last_error(), '\x1b') == NULL && strchr(cgemm_last_error(), '\n') == NULL);
  /* A bias_spec and no bias: refused, not dropped. */
  plan_desc(&pd, world);
  pd.bias_spec = "('tpsp',)";
  CHECK_FAILS(cgemm_plan_create(ctx, &pd, &plan), CGEMM_ERROR_INVALID_ARGUMENT,
              "bias_spec \"('tpsp',)\" is given but the plan has no bias (bias_ndim 0)");
  CHECK(plan == NULL);
  /* With the bias: the spec is the planner's. */
  pd.bias_ndim = 1;
  pd.bias_shape[0] = pd.rhs_shape[1];
  CHECK(cgemm_plan_create(ctx, &pd, &plan) == CGEMM_SUCCESS);
  cgemm_plan_destroy(plan);
  CHECK(cgemm_context_destroy(ctx) == CGEMM_SUCCESS);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  cgemm_context_desc cd;
  cgemm_context_desc_init(&cd);
  cd.backend = "cpu";

  if (argc == 3 && strcmp(argv[1], "--skip-plan") == 0) {
    cgemm_context_options o;
    cgemm_context_options_init(&o, sizeof o);
    o.timeout_s = 2.0;
    cgemm_context* ctx = NULL;
    if (cgemm_context_create_ex(MPI_COMM_WORLD, &cd, &o, &ctx) != CGEMM_SUCCESS) return 1;
    cgemm_plan_desc pd;
    plan_desc(&pd, world);
    cgemm_plan* plan = NULL;
    if (rank != atoi(argv[2])) cgemm_plan_create(ctx, &pd, &plan);
    /* Not reached on the waiting ranks: their deadline ends the job. */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
  }

  fortran_handles(&cd);
  stale_handles(&cd, world);
  differing_ranks(&cd, world);
  timeout_option(&cd);
  amax_history(&cd, world);
  memory_check(&cd, world);
  messages_and_bias_spec(&cd, world);

  int total = failures;
  MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf(total == 0 ? "PASS\n" : "FAIL: %d failed checks\n", total);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
