// The members of a borrowed NCCL communicator against the TP group
// (check_borrowed_nccl_members, cgemm/runtime/backends.hpp): its size, rank and GPU
// (nccl_transport.cpp) cannot tell communicators over world ranks {0, 3} and {2, 1} at tp 2 x
// dp 2 from the right ones; an all-gather of world ranks over the communicator itself can.

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <climits>
#include <string>
#include <vector>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/watchdog.hpp"
#include "cgemm/runtime/backends.hpp"

namespace cgemm {
namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string text = "{";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text + "}";
}

// The world ranks of `comm`'s members in NCCL rank order, gathered over `comm` itself; "" and
// the list, or the reason it could not be gathered. Never throws a CUDA or NCCL error alone:
// the caller agrees on the outcome with every rank first.
std::string gather_members(ncclComm_t comm, int world_rank, int count, std::vector<int>& members,
                           const std::string& where) {
  int* send = nullptr;
  int* recv = nullptr;
  cudaStream_t stream = nullptr;
  std::string why;
  const auto cuda_failed = [&why](cudaError_t rc, const char* call) {
    if (rc == cudaSuccess || !why.empty()) return rc != cudaSuccess;
    why = std::string(call) + " failed: " + cudaGetErrorString(rc);
    return true;
  };
  if (!cuda_failed(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                   "cudaStreamCreateWithFlags") &&
      !cuda_failed(cudaMalloc(&send, sizeof(int)), "cudaMalloc") &&
      !cuda_failed(cudaMalloc(&recv, sizeof(int) * static_cast<size_t>(count)), "cudaMalloc") &&
      !cuda_failed(cudaMemcpyAsync(send, &world_rank, sizeof(int), cudaMemcpyHostToDevice, stream),
                   "cudaMemcpyAsync(world rank)")) {
    const ncclResult_t rc = ncclAllGather(send, recv, 1, ncclInt32, comm, stream);
    if (rc != ncclSuccess) {
      why = std::string("ncclAllGather(world ranks) on the borrowed communicator failed: ") +
            ncclGetErrorString(rc);
    } else {
      members.assign(static_cast<size_t>(count), -1);
      const watchdog::WaitScope wait(
          where + ": the all-gather of world ranks over the borrowed NCCL communicator");
      cuda_failed(cudaMemcpyAsync(members.data(), recv, sizeof(int) * members.size(),
                                  cudaMemcpyDeviceToHost, stream),
                  "cudaMemcpyAsync(members)");
      cuda_failed(cudaStreamSynchronize(stream), "cudaStreamSynchronize(the all-gather)");
    }
  }
  // Freed on every path; their errors matter less than the first one.
  if (recv != nullptr) cudaFree(recv);
  if (send != nullptr) cudaFree(send);
  if (stream != nullptr) cudaStreamDestroy(stream);
  return why;
}

// The lowest world rank whose `why` is not empty, or -1; collective over `world`.
int lowest_failing(MPI_Comm world, int world_rank, const std::string& why) {
  int lowest = why.empty() ? INT_MAX : world_rank;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, world),
            "MPI_Allreduce(borrowed NCCL communicator members)");
  return lowest == INT_MAX ? -1 : lowest;
}

}  // namespace

void check_borrowed_nccl_members(const MeshComms& comms, void* nccl_comm) {
  const int me = comms.world_rank();
  const std::string where = "rank " + std::to_string(me);
  const auto comm = static_cast<ncclComm_t>(nccl_comm);
  const int tp = comms.tp();
  std::vector<int> expected(static_cast<size_t>(tp));
  for (int t = 0; t < tp; ++t) expected[static_cast<size_t>(t)] = comms.world_rank_of_tp(t);
  std::vector<int> members;
  // Its size is the TP group's here (nccl_transport.cpp checked it).
  std::string why = gather_members(comm, me, tp, members, where);
  if (why.empty() && members != expected) {
    why = "the borrowed NCCL communicator's members are world ranks " + rank_list(members) +
          " in NCCL rank order, this rank's TP group is world ranks " + rank_list(expected) +
          ", on world rank " + std::to_string(me) +
          ": pass a communicator over this rank's TP group, NCCL rank = tp rank (world rank = "
          "dp rank * tp + tp rank)";
  }
  const int r = lowest_failing(comms.world(), me, why);
  if (r < 0) return;
  // One message everywhere: the lowest failing world rank's.
  char text[1024] = {};
  if (r == me) why.copy(text, sizeof(text) - 1);
  check_mpi(MPI_Bcast(text, sizeof(text), MPI_CHAR, r, comms.world()),
            "MPI_Bcast(borrowed NCCL communicator members)");
  throw Error(std::string("nccl_comm: ") + text);
}

}  // namespace cgemm
