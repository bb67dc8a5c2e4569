// The world's max of a few device floats through the host (see world_max.hpp).

#include "world_max.hpp"

#include <vector>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/cuda_check.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/watchdog.hpp"

namespace cgemm::cuda {

void all_reduce_max_world(MPI_Comm world, float* buf, int count, cudaStream_t stream,
                          const std::string& what, const std::string& where) {
  if (count < 0) throw Error(where + ": " + what + ": negative count " + std::to_string(count));
  int size = 1;
  check_mpi(MPI_Comm_size(world, &size), "MPI_Comm_size");
  if (size == 1 || count == 0) return;
  if (buf == nullptr) throw Error(where + ": " + what + ": null buffer");
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  std::vector<float> host(static_cast<size_t>(count));
  check_cuda(cudaMemcpyAsync(host.data(), buf, bytes, cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync(" + what + ", to the host)", where);
  {
    // The stream may hold exchanges that wait for peers: the watchdog watches this wait too.
    const watchdog::WaitScope wait(where + ": " + what + " (the amaxes of this rank)");
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize(" + what + ")", where);
  }
  {
    const watchdog::WaitScope wait(where + ": " + what + " (MPI_Allreduce MAX over the world)");
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, host.data(), count, MPI_FLOAT, MPI_MAX, world),
              "MPI_Allreduce(MAX)");
  }
  check_cuda(cudaMemcpyAsync(buf, host.data(), bytes, cudaMemcpyHostToDevice, stream),
             "cudaMemcpyAsync(" + what + ", to the device)", where);
  // Where the GPU reads pageable memory directly (HMM), the copy is truly asynchronous and would
  // read `host` after it is gone (seen on the H200: zeros arrived): wait for it.
  const watchdog::WaitScope wait(where + ": " + what + " (the maxes back to the device)");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize(" + what + ")", where);
}

}  // namespace cgemm::cuda
