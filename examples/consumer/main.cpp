// A training program's view of cgemm: initialise from our own communicator and mesh,
// describe a column-parallel (all-gather) layer, plan it once, run it on our own buffers.
// Run: mpirun -np 2 ./consumer
#include <mpi.h>

#include <cgemm/runtime/plan.hpp>
#include <cmath>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, rc = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    // Our own axis names; tp = world size.
    cgemm::Context ctx(MPI_COMM_WORLD, {.dp = 1, .tp = 0, .dp_axis = "data", .tpsp_axis = "model"},
                       cgemm::BackendKind::kCpu, cgemm::OverlapOptions{});
    cgemm::GemmPlan plan(ctx, cgemm::tensor_sequence_parallel_gemm(
                                  ctx, "qkv", cgemm::CollectiveOp::kAllGather, /*batch=*/2,
                                  /*seq_len=*/32, /*hidden_in=*/64, /*hidden_out=*/96,
                                  cgemm::DType::kFloat32, /*bias=*/true,
                                  /*transpose_batch_sequence=*/false));
    const auto& d = plan.desc();
    // Host buffers on the CPU backend; our own values (here: the library's generator).
    auto& be = ctx.backend();
    std::vector<float> x(cgemm::num_elements(plan.lhs_local())),
        w(cgemm::num_elements(plan.rhs_local())), b(cgemm::num_elements(plan.bias_local())),
        y(cgemm::num_elements(plan.out_local())), y_seq(y.size());
    be.fill_normal(x.data(), d.dtype, d.lhs_shape, plan.lhs_local(), plan.lhs_offset(), 1, 1.0f);
    be.fill_normal(w.data(), d.dtype, d.rhs_shape, plan.rhs_local(), plan.rhs_offset(), 2, 1.0f);
    be.fill_normal(b.data(), d.dtype, *d.bias_shape, plan.bias_local(), plan.bias_offset(), 3,
                   1.0f);
    for (int step = 0; step < 3; ++step) plan.execute(x.data(), w.data(), b.data(), y.data());
    plan.execute_sequential(x.data(), w.data(), b.data(), y_seq.data());
    double worst = 0.0;
    for (size_t i = 0; i < y.size(); ++i) worst = std::fmax(worst, std::fabs(y[i] - y_seq[i]));
    MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
      std::printf(
          "consumer: %s, local out [%lld, %lld, %lld], max |overlapped - sequential| = %g\n",
          plan.schedule_summary().c_str(), static_cast<long long>(plan.out_local()[0]),
          static_cast<long long>(plan.out_local()[1]), static_cast<long long>(plan.out_local()[2]),
          worst);
    }
    rc = worst <= 1e-4 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}
