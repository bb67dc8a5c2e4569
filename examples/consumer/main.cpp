// A training program's view of cgemm: initialise from our own communicator and mesh,
// describe a column-parallel (all-gather) layer, plan it once, run it on our own buffers.
// Run: mpirun -np 2 ./consumer (at -np 3 the sequence of 32 does not divide: a planning error)
#include <mpi.h>

#include <cgemm/runtime/plan.hpp>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

// Two kinds of error, two ways to end the job.
//
// Setting up (the Context, the plan) fails alike on every rank: its checks see only the
// arguments, which every rank passes the same (a sequence or hidden size the mesh does not
// divide is a cgemm::PlanError on every rank). So every rank stops there, one rank prints the
// message, and every rank leaves through MPI_Finalize with status 1: one message, no abort.
//
// Running (execute) may fail on one rank only (its device, its transport): the other ranks may
// be waiting for it inside a collective and would never return. Only MPI_Abort ends those, so
// that rank prints its rank and the message and aborts the job.

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);

  std::unique_ptr<cgemm::Context> ctx;
  std::unique_ptr<cgemm::GemmPlan> plan;
  std::string error;
  try {
    // Our own axis names; tp = world size.
    ctx = std::make_unique<cgemm::Context>(
        MPI_COMM_WORLD,
        cgemm::MeshConfig{.dp = 1, .tp = 0, .dp_axis = "data", .tpsp_axis = "model"},
        cgemm::BackendKind::kCpu, cgemm::OverlapOptions{});
    plan = std::make_unique<cgemm::GemmPlan>(
        *ctx, cgemm::tensor_sequence_parallel_gemm(
                  *ctx, "qkv", cgemm::CollectiveOp::kAllGather, /*batch=*/2,
                  /*seq_len=*/32, /*hidden_in=*/64, /*hidden_out=*/96, cgemm::DType::kFloat32,
                  /*bias=*/true, /*transpose_batch_sequence=*/false));
  } catch (const cgemm::Error& e) {
    error = e.what();
  } catch (const std::exception& e) {  // not one of cgemm's rules: perhaps this rank's alone
    std::fprintf(stderr, "consumer: rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  // Every rank learns whether any rank failed; the lowest failing one prints, so the message
  // appears once even if (against expectation) only some ranks failed.
  int first_failed = error.empty() ? world : rank;
  MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first_failed < world) {
    if (rank == first_failed) std::fprintf(stderr, "consumer: error: %s\n", error.c_str());
    plan.reset();
    ctx.reset();
    MPI_Finalize();
    return 1;
  }

  int rc = 0;
  try {
    const auto& d = plan->desc();
    // Host buffers on the CPU backend; our own values (here: the library's generator).
    auto& be = ctx->backend();
    std::vector<float> x(cgemm::num_elements(plan->lhs_local())),
        w(cgemm::num_elements(plan->rhs_local())), b(cgemm::num_elements(plan->bias_local())),
        y(cgemm::num_elements(plan->out_local())), y_seq(y.size());
    be.fill_normal(x.data(), d.dtype, d.lhs_shape, plan->lhs_local(), plan->lhs_offset(), 1, 1.0f);
    be.fill_normal(w.data(), d.dtype, d.rhs_shape, plan->rhs_local(), plan->rhs_offset(), 2, 1.0f);
    be.fill_normal(b.data(), d.dtype, *d.bias_shape, plan->bias_local(), plan->bias_offset(), 3,
                   1.0f);
    for (int step = 0; step < 3; ++step) plan->execute(x.data(), w.data(), b.data(), y.data());
    plan->execute_sequential(x.data(), w.data(), b.data(), y_seq.data());
    double worst = 0.0;
    for (size_t i = 0; i < y.size(); ++i) worst = std::fmax(worst, std::fabs(y[i] - y_seq[i]));
    MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
      std::printf(
          "consumer: %s, local out [%lld, %lld, %lld], max |overlapped - sequential| = %g\n",
          plan->schedule_summary().c_str(), static_cast<long long>(plan->out_local()[0]),
          static_cast<long long>(plan->out_local()[1]),
          static_cast<long long>(plan->out_local()[2]), worst);
    }
    rc = worst <= 1e-4 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  plan.reset();
  ctx.reset();
  MPI_Finalize();
  return rc;
}
