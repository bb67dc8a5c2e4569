// The collectives of a group that has no device transport (see sequential_collectives.hpp):
// through the host, over MPI. The one such group: the dp group of a job whose GPUs are shared
// (gpu_sharing: no NCCL communicator) when it spans nodes (no copy engines between them). Every
// call copies to the host (DeviceMemory's counted, synchronous copies), runs the MPI collective
// under the watchdog, and copies back; sums run in fp32 in rank order, as the CPU backend's.

#include <mpi.h>

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/convert.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/watchdog.hpp"
#include "device_memory.hpp"
#include "sequential_collectives.hpp"

namespace cgemm::cuda {
namespace {

class HostCollectives final : public SequentialCollectives {
 public:
  HostCollectives(DeviceMemory& memory, Streams& streams, MPI_Comm comm, std::string group,
                  std::string where)
      : memory_(memory),
        streams_(streams),
        comm_(comm),
        group_(std::move(group)),
        where_(std::move(where)) {
    check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size(host collectives)");
    check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank(host collectives)");
  }

  void all_gather(const void* src, void* dst, size_t bytes_per_rank, int s,
                  const char* label) override {
    static_cast<void>(streams_.at(s, "all_gather"));
    const int n = fits(bytes_per_rank, "all-gather");
    std::vector<char> mine(bytes_per_rank), all(bytes_per_rank * static_cast<size_t>(size_));
    memory_.copy_to_host(mine.data(), src, bytes_per_rank);
    mpi(label, "all-gather",
        [&] { return MPI_Allgather(mine.data(), n, MPI_BYTE, all.data(), n, MPI_BYTE, comm_); });
    memory_.copy_from_host(dst, all.data(), all.size());
  }

  void reduce_scatter(const void* src, void* dst, DType dtype, int64_t count_per_rank, int s,
                      const char* label) override {
    static_cast<void>(streams_.at(s, "reduce_scatter"));
    const size_t block = static_cast<size_t>(count_per_rank) * dtype_size(dtype);
    const int n = fits(block, "reduce-scatter block");
    std::vector<char> in(block * static_cast<size_t>(size_)), blocks(in.size());
    memory_.copy_to_host(in.data(), src, in.size());
    mpi(label, "reduce-scatter",
        [&] { return MPI_Alltoall(in.data(), n, MPI_BYTE, blocks.data(), n, MPI_BYTE, comm_); });
    std::vector<float> acc(static_cast<size_t>(count_per_rank), 0.0f), part(acc.size());
    for (int p = 0; p < size_; ++p) {
      convert_to_float(blocks.data() + static_cast<size_t>(p) * block, dtype, part.data(),
                       count_per_rank);
      for (size_t i = 0; i < acc.size(); ++i) acc[i] += part[i];
    }
    std::vector<char> out(block);
    convert_from_float(acc.data(), out.data(), dtype, count_per_rank);
    memory_.copy_from_host(dst, out.data(), out.size());
  }

  void all_reduce(void* buf, DType dtype, int64_t count, int s, const char* label) override {
    static_cast<void>(streams_.at(s, "all_reduce"));
    if (size_ == 1 || count == 0) return;
    const int n = fits(static_cast<size_t>(count), "all-reduce");
    std::vector<char> raw(static_cast<size_t>(count) * dtype_size(dtype));
    memory_.copy_to_host(raw.data(), buf, raw.size());
    std::vector<float> v(static_cast<size_t>(count));
    convert_to_float(raw.data(), dtype, v.data(), count);
    mpi(label, "all-reduce",
        [&] { return MPI_Allreduce(MPI_IN_PLACE, v.data(), n, MPI_FLOAT, MPI_SUM, comm_); });
    convert_from_float(v.data(), raw.data(), dtype, count);
    memory_.copy_from_host(buf, raw.data(), raw.size());
  }

  void all_reduce_max(float* buf, int count, int s, const char* label) override {
    static_cast<void>(streams_.at(s, "all_reduce_max"));
    if (size_ == 1 || count == 0) return;
    std::vector<float> v(static_cast<size_t>(count));
    memory_.copy_to_host(v.data(), buf, v.size() * sizeof(float));
    mpi(label, "all-reduce max",
        [&] { return MPI_Allreduce(MPI_IN_PLACE, v.data(), count, MPI_FLOAT, MPI_MAX, comm_); });
    memory_.copy_from_host(buf, v.data(), v.size() * sizeof(float));
  }

 private:
  int fits(size_t n, const char* what) const {
    if (n > static_cast<size_t>(std::numeric_limits<int>::max())) {
      throw Error(where_ + ": " + what + " of " + std::to_string(n) +
                  " elements exceeds MPI's int count");
    }
    return static_cast<int>(n);
  }
  template <class F>
  void mpi(const char* label, const char* what, F&& call) const {
    const watchdog::WaitScope wait(where_ + ": " + named(label, what) + " over the " + group_ +
                                   " through the host, some of whose ranks have not arrived");
    check_mpi(call(), what);
  }

  DeviceMemory& memory_;
  Streams& streams_;
  MPI_Comm comm_;
  std::string group_;
  std::string where_;
  int size_ = 1, rank_ = 0;
};

}  // namespace

std::unique_ptr<SequentialCollectives> make_host_collectives(DeviceMemory& memory, Streams& streams,
                                                             MPI_Comm comm, std::string group,
                                                             std::string where) {
  return std::make_unique<HostCollectives>(memory, streams, comm, std::move(group),
                                           std::move(where));
}

}  // namespace cgemm::cuda
