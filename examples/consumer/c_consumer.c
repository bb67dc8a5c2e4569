/* A C program's view of cgemm: libcgemm.so through its C API (cgemm/cgemm.h), linked as
 * cgemm::cgemm. A column-parallel (all-gather) layer on our own communicator and buffers,
 * checked against a double-precision reference of our own.
 * Run: mpirun -np 2 ./c_consumer (at -np 3 the sequence of 16 does not divide: one message). */
#include <cgemm/cgemm.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* Every rank can compute any global element: the reference needs the whole x. */
static float x_at(int64_t i) { return (float)sin(0.37 * (double)i); }
static float w_at(int64_t i) { return (float)cos(0.11 * (double)i); }
static float b_at(int64_t i) { return 0.5f + (float)i / 8.0f; }

/* Setting up fails alike on every rank (cgemm.h): each leaves through MPI_Finalize, rank 0
 * printing the one message. */
static int setup_failed(int rank, cgemm_status st) {
  if (rank == 0) {
    fprintf(stderr, "c_consumer: error: %s (%s)\n", cgemm_last_error(), cgemm_status_name(st));
  }
  MPI_Finalize();
  return 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  cgemm_context_desc cd;
  cgemm_context_desc_init(&cd);
  cd.backend = "cpu";
  cgemm_context* ctx = NULL;
  cgemm_status st = cgemm_context_create(MPI_COMM_WORLD, &cd, &ctx);
  if (st != CGEMM_SUCCESS) return setup_failed(rank, st);

  /* x [B, S, K] (dp, tpsp, None) @ w [K, N] (None, tpsp) + b [N] (tpsp) -> [B, S, N]. */
  const int64_t B = 2, S = 16, K = 16, N = 24;
  cgemm_plan_desc pd;
  cgemm_plan_desc_init(&pd);
  pd.name = "c_consumer";
  pd.lhs_ndim = 3;
  pd.lhs_shape[0] = B, pd.lhs_shape[1] = S, pd.lhs_shape[2] = K;
  pd.rhs_ndim = 2;
  pd.rhs_shape[0] = K, pd.rhs_shape[1] = N;
  pd.bias_ndim = 1;
  pd.bias_shape[0] = N;
  pd.dtype = "float32";
  pd.lhs_spec = "('dp', 'tpsp', None)";
  pd.rhs_spec = "(None, 'tpsp')";
  pd.bias_spec = "('tpsp',)";
  pd.collective = "all_gather";
  cgemm_plan* plan = NULL;
  st = cgemm_plan_create(ctx, &pd, &plan);
  if (st != CGEMM_SUCCESS) {
    cgemm_context_destroy(ctx);
    return setup_failed(rank, st);
  }

  cgemm_tensor_info xi, wi, bi, yi;
  cgemm_plan_tensor_info(plan, CGEMM_LHS, &xi);
  cgemm_plan_tensor_info(plan, CGEMM_RHS, &wi);
  cgemm_plan_tensor_info(plan, CGEMM_BIAS, &bi);
  cgemm_plan_tensor_info(plan, CGEMM_OUT, &yi);
  float* x = malloc((size_t)xi.bytes);
  float* w = malloc((size_t)wi.bytes);
  float* b = malloc((size_t)bi.bytes);
  float* y = malloc((size_t)yi.bytes);
  /* Our shards, by the plan's local shapes and offsets. */
  for (int64_t i = 0; i < xi.local_shape[0]; ++i)
    for (int64_t s = 0; s < xi.local_shape[1]; ++s)
      for (int64_t k = 0; k < K; ++k)
        x[(i * xi.local_shape[1] + s) * K + k] =
            x_at(((i + xi.offset[0]) * S + s + xi.offset[1]) * K + k);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < wi.local_shape[1]; ++n)
      w[k * wi.local_shape[1] + n] = w_at(k * N + n + wi.offset[1]);
  for (int64_t n = 0; n < bi.local_shape[0]; ++n) b[n] = b_at(n + bi.offset[0]);
  for (int64_t i = 0; i < yi.bytes / 4; ++i) y[i] = NAN; /* poisoned */

  st = cgemm_plan_execute(plan, x, w, b, y);
  if (st != CGEMM_SUCCESS) { /* may be this rank's alone: the others may wait forever */
    fprintf(stderr, "c_consumer: rank %d: %s\n", rank, cgemm_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  double worst = 0.0;
  const int64_t Bl = yi.local_shape[0], Sl = yi.local_shape[1], Nl = yi.local_shape[2];
  for (int64_t i = 0; i < Bl; ++i)
    for (int64_t s = 0; s < Sl; ++s)
      for (int64_t n = 0; n < Nl; ++n) {
        const int64_t gi = i + yi.offset[0], gs = s + yi.offset[1], gn = n + yi.offset[2];
        double ref = b_at(gn);
        for (int64_t k = 0; k < K; ++k)
          ref += (double)x_at((gi * S + gs) * K + k) * w_at(k * N + gn);
        const double d = fabs(ref - (double)y[(i * Sl + s) * Nl + n]);
        worst = d > worst || d != d ? d : worst; /* NaN stays */
      }
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("c_consumer: cgemm %s, local out [%lld, %lld, %lld], max |out - reference| = %g\n",
           cgemm_version_string(), (long long)Bl, (long long)Sl, (long long)Nl, worst);
  }
  free(x), free(w), free(b), free(y);
  cgemm_plan_destroy(plan);
  cgemm_context_destroy(ctx);
  MPI_Finalize();
  return worst <= 1e-4 ? 0 : 1;
}
