#include "cgemm/collective/nccl_transport.hpp"

#include <cstdlib>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/cuda_check.hpp"
#include "cgemm/core/env.hpp"
#include "cgemm/core/watchdog.hpp"

namespace cgemm {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kFloat16:
      return ncclFloat16;
    default:
      throw Error("NCCL sum of dtype " + std::string(dtype_name(t)) +
                  " is not supported (bfloat16, float16, float32 are)");
  }
}

// A positive int from the environment, or 0 when unset. Garbage is an error, not a silent
// default, so a typo in a cap is noticed.
int env_positive_int(const EnvKnob& knob) {
  const std::optional<long long> x = env_int(knob);
  if (!x) return 0;
  if (*x < 1 || *x > std::numeric_limits<int>::max()) {
    throw Error(std::string(knob.name) + "='" + *env_text(knob) + "' is not a positive integer");
  }
  return static_cast<int>(*x);
}

}  // namespace

void NcclTransport::read_group(MPI_Comm tp_comm) {
  check_mpi(MPI_Comm_rank(tp_comm, &rank_), "MPI_Comm_rank(tp)");
  check_mpi(MPI_Comm_size(tp_comm, &size_), "MPI_Comm_size(tp)");
  {
    MPI_Group tp_group = MPI_GROUP_NULL, world_group = MPI_GROUP_NULL;
    check_mpi(MPI_Comm_group(tp_comm, &tp_group), "MPI_Comm_group(tp)");
    check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &world_group), "MPI_Comm_group(world)");
    std::vector<int> tp_ranks(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) tp_ranks[static_cast<size_t>(r)] = r;
    world_ranks_.resize(tp_ranks.size());
    check_mpi(MPI_Group_translate_ranks(tp_group, size_, tp_ranks.data(), world_group,
                                        world_ranks_.data()),
              "MPI_Group_translate_ranks");
    MPI_Group_free(&tp_group);
    MPI_Group_free(&world_group);
  }
}

NcclTransport::NcclTransport(MPI_Comm tp_comm, std::string where) : where_(std::move(where)) {
  read_group(tp_comm);

  // Read the caps on every rank before any collective, so a bad value fails everywhere alike
  // instead of leaving the other ranks in MPI_Bcast.
  const int max_ctas = env_positive_int(env::kNcclMaxCtas);
  const int min_ctas = env_positive_int(env::kNcclMinCtas);
  if (max_ctas > 0 && min_ctas > max_ctas) {
    throw Error("CGEMM_NCCL_MIN_CTAS=" + std::to_string(min_ctas) +
                " exceeds CGEMM_NCCL_MAX_CTAS=" + std::to_string(max_ctas));
  }
  // overwrite = 0: an explicit user setting wins.
  setenv("NCCL_NVLS_ENABLE", "0", 0);

  ncclUniqueId id{};
  if (rank_ == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  check_mpi(MPI_Bcast(&id, static_cast<int>(sizeof(id)), MPI_BYTE, 0, tp_comm),
            "MPI_Bcast(NCCL unique id)");

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  settings_ = "NCCL defaults (not capped by num_sm_for_communication)";
  if (max_ctas > 0 || min_ctas > 0) {
    settings_.clear();
    if (min_ctas > 0) {
      config.minCTAs = min_ctas;
      settings_ += "minCTAs=" + std::to_string(min_ctas) + " ";
    }
    if (max_ctas > 0) {
      config.maxCTAs = max_ctas;
      settings_ += "maxCTAs=" + std::to_string(max_ctas) + " ";
    }
    settings_ += "(from CGEMM_NCCL_MIN_CTAS / CGEMM_NCCL_MAX_CTAS)";
  }
  int device = -1;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice", where_);
  check(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config),
        "ncclCommInitRankConfig(" + std::to_string(size_) + " ranks, rank " +
            std::to_string(rank_) + ", GPU " + std::to_string(device) + ")");
  // A wait that times out aborts the communicator first, so NCCL's kernels let go of the GPU.
  abort_hook_ = watchdog::add_abort_hook([comm = comm_] { ncclCommAbort(comm); });
}

NcclTransport::NcclTransport(MPI_Comm tp_comm, ncclComm_t borrowed, std::string where)
    : borrowed_(true), where_(std::move(where)) {
  read_group(tp_comm);
  // Checked locally, then agreed over the TP group, so every rank throws alike (a rank that
  // threw alone would leave the others in the next collective).
  std::string why;
  const std::string me = "on " + peer(rank_);
  int count = -1, user_rank = -1, comm_device = -1, device = -1;
  if (borrowed == nullptr) {
    why = "the borrowed NCCL communicator is null";
  } else if (ncclCommCount(borrowed, &count) != ncclSuccess ||
             ncclCommUserRank(borrowed, &user_rank) != ncclSuccess ||
             ncclCommCuDevice(borrowed, &comm_device) != ncclSuccess) {
    why =
        "the borrowed NCCL communicator cannot be queried (ncclCommCount / ncclCommUserRank / "
        "ncclCommCuDevice failed): not a live communicator";
  } else if (cudaGetDevice(&device) != cudaSuccess) {
    why = "cudaGetDevice failed";
  } else if (count != size_) {
    why = "the borrowed NCCL communicator has " + std::to_string(count) + " ranks, the TP group " +
          std::to_string(size_) + ", " + me + ": pass a communicator over this rank's TP group";
  } else if (user_rank != rank_) {
    why = "the borrowed NCCL communicator's rank is " + std::to_string(user_rank) +
          ", this rank's in the TP group " + std::to_string(rank_) + ", " + me +
          ": the NCCL ranks must be the TP ranks (world rank = dp rank * tp + tp rank)";
  } else if (comm_device != device) {
    why = "the borrowed NCCL communicator is on GPU " + std::to_string(comm_device) +
          ", the CUDA backend on GPU " + std::to_string(device) + ", " + me +
          " (a rank's GPU is its local rank modulo the GPUs it sees)";
  }
  int lowest = why.empty() ? size_ : rank_;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, tp_comm),
            "MPI_Allreduce(borrowed NCCL communicator check)");
  if (lowest < size_) {
    char text[1024] = {};
    if (lowest == rank_) why.copy(text, sizeof(text) - 1);
    check_mpi(MPI_Bcast(text, sizeof(text), MPI_CHAR, lowest, tp_comm),
              "MPI_Bcast(borrowed NCCL communicator check)");
    throw Error((where_.empty() ? std::string() : where_ + ": ") + text);
  }
  comm_ = borrowed;
  settings_ =
      "borrowed communicator (the caller's configuration; CGEMM_NCCL_MIN_CTAS / "
      "CGEMM_NCCL_MAX_CTAS do not apply)";
  // As for an own communicator: a timed-out wait ends the job, and NCCL's kernels must let go
  // of the GPU first.
  abort_hook_ = watchdog::add_abort_hook([comm = comm_] { ncclCommAbort(comm); });
}

NcclTransport::~NcclTransport() {
  if (comm_ == nullptr) return;
  watchdog::remove_abort_hook(abort_hook_);
  // The caller's: it decides whether to destroy or abort it.
  if (borrowed_) return;
  // Destroying a healthy communicator lets NCCL flush cleanly; after an error, or while an
  // exception unwinds (a peer may be gone), abort so this rank cannot block here.
  if (healthy_ && std::uncaught_exceptions() == 0) {
    ncclCommDestroy(comm_);
  } else {
    ncclCommAbort(comm_);
  }
}

std::string NcclTransport::peer(int tp_rank) const {
  std::string text = "tp rank " + std::to_string(tp_rank);
  if (tp_rank >= 0 && tp_rank < static_cast<int>(world_ranks_.size())) {
    text += " (world rank " + std::to_string(world_ranks_[static_cast<size_t>(tp_rank)]) + ")";
  }
  return text;
}

void NcclTransport::check(ncclResult_t rc, const std::string& call) {
  if (rc == ncclSuccess || rc == ncclInProgress) return;
  healthy_ = false;
  std::string msg;
  if (!where_.empty()) msg.append(where_).append(": ");
  msg.append(call).append(" failed: ").append(ncclGetErrorString(rc));
  if (comm_ != nullptr) {
    const char* last = ncclGetLastError(comm_);
    if (last != nullptr && *last != '\0') msg.append(" (").append(last).append(")");
  }
  throw Error(msg);
}

int64_t NcclTransport::start(std::span<const Exchange> group, void* stream_handle) {
  auto stream = static_cast<cudaStream_t>(stream_handle);
  check(ncclGroupStart(), "ncclGroupStart");
  try {
    for (const Exchange& x : group) {
      if (x.bytes == 0) continue;
      check(ncclSend(x.src, x.bytes, ncclUint8, x.send_peer, comm_, stream),
            "ncclSend(" + std::to_string(x.bytes) + " bytes to " + peer(x.send_peer) + ")");
      check(ncclRecv(static_cast<char*>(x.dst->local) + x.recv_offset, x.bytes, ncclUint8,
                     x.recv_peer, comm_, stream),
            "ncclRecv(" + std::to_string(x.bytes) + " bytes from " + peer(x.recv_peer) + ")");
    }
  } catch (...) {
    ncclGroupEnd();
    throw;
  }
  check(ncclGroupEnd(), "ncclGroupEnd(send/recv)");
  return -1;
}

void NcclTransport::all_gather(const void* src, void* dst, size_t bytes_per_rank,
                               cudaStream_t stream) {
  check(ncclAllGather(src, dst, bytes_per_rank, ncclUint8, comm_, stream),
        "ncclAllGather(" + std::to_string(bytes_per_rank) + " bytes per rank)");
}

void NcclTransport::reduce_scatter(const void* src, void* dst, DType dtype, int64_t count_per_rank,
                                   cudaStream_t stream) {
  check(ncclReduceScatter(src, dst, static_cast<size_t>(count_per_rank), nccl_type(dtype), ncclSum,
                          comm_, stream),
        "ncclReduceScatter(" + std::to_string(count_per_rank) + " " +
            std::string(dtype_name(dtype)) + " per rank)");
}

void NcclTransport::all_reduce(void* buf, DType dtype, int64_t count, cudaStream_t stream) {
  check(
      ncclAllReduce(buf, buf, static_cast<size_t>(count), nccl_type(dtype), ncclSum, comm_, stream),
      "ncclAllReduce(" + std::to_string(count) + " " + std::string(dtype_name(dtype)) + ")");
}

void NcclTransport::all_reduce_max(float* buf, int64_t count, cudaStream_t stream) {
  check(ncclAllReduce(buf, buf, static_cast<size_t>(count), ncclFloat32, ncclMax, comm_, stream),
        "ncclAllReduce(max of " + std::to_string(count) + " float32)");
}

void NcclTransport::check_async_error() {
  ncclResult_t async = ncclSuccess;
  check(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
  check(async, "NCCL (asynchronous error)");
}

std::string NcclTransport::version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "NCCL (version unknown)";
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

}  // namespace cgemm
