#include "cgemm/collective/mesh_comms.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include "cgemm/core/error.hpp"

namespace cgemm {

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int len = 0;
  MPI_Error_string(rc, text.data(), &len);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw Error(std::string(call) + " failed on rank " + std::to_string(rank) + ": " +
              std::string(text.data(), static_cast<size_t>(len)));
}

MeshComms::MeshComms(MPI_Comm world, int dp, int tp, int fsdp) : dp_(dp), tp_(tp), fsdp_(fsdp) {
  check_mpi(MPI_Comm_dup(world, &world_), "MPI_Comm_dup");
  check_mpi(MPI_Comm_rank(world_, &world_rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(world_, &world_size_), "MPI_Comm_size");
  if (dp < 1 || tp < 1 || fsdp < 1 ||
      static_cast<int64_t>(dp) * fsdp * tp != static_cast<int64_t>(world_size_)) {
    MPI_Comm_free(&world_);
    throw Error("mesh dp=" + std::to_string(dp) +
                (fsdp != 1 ? " x fsdp=" + std::to_string(fsdp) : std::string()) +
                " x tp=" + std::to_string(tp) + " does not match the MPI world size " +
                std::to_string(world_size_));
  }
  // Colour by the other two coordinates; the key keeps the group's own rank order.
  const int tp_colour = world_rank_ / tp_;  // dp_rank * fsdp + fsdp_rank
  const int dp_colour = fsdp_rank() * tp_ + tp_rank();
  const int fsdp_colour = dp_rank() * tp_ + tp_rank();
  check_mpi(MPI_Comm_split(world_, tp_colour, tp_rank(), &tp_comm_), "MPI_Comm_split(tp)");
  check_mpi(MPI_Comm_split(world_, dp_colour, dp_rank(), &dp_comm_), "MPI_Comm_split(dp)");
  check_mpi(MPI_Comm_split(world_, fsdp_colour, fsdp_rank(), &fsdp_comm_), "MPI_Comm_split(fsdp)");
  check_mpi(
      MPI_Comm_split_type(world_, MPI_COMM_TYPE_SHARED, world_rank_, MPI_INFO_NULL, &node_comm_),
      "MPI_Comm_split_type(shared)");
  check_mpi(MPI_Comm_rank(node_comm_, &local_rank_), "MPI_Comm_rank(node)");
  check_mpi(MPI_Comm_size(node_comm_, &local_size_), "MPI_Comm_size(node)");

  // The TP group is on one node when all its ranks agree on the node's lowest world rank.
  int node_leader = world_rank_;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &node_leader, 1, MPI_INT, MPI_MIN, node_comm_),
            "MPI_Allreduce(node leader)");
  int lo = node_leader, hi = node_leader;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, tp_comm_), "MPI_Allreduce");
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, tp_comm_), "MPI_Allreduce");
  tp_on_node_ = lo == hi;
  lo = hi = node_leader;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, dp_comm_), "MPI_Allreduce");
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, dp_comm_), "MPI_Allreduce");
  dp_on_node_ = lo == hi;
  lo = hi = node_leader;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, fsdp_comm_), "MPI_Allreduce");
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, fsdp_comm_), "MPI_Allreduce");
  fsdp_on_node_ = lo == hi;

  // Names for the watchdog's lines: a peer is told by world rank and host, not by its rank in
  // a group the reader would have to map back.
  hosts_ = gather_host_names(world_);
}

std::vector<std::string> gather_host_names(MPI_Comm comm) {
  std::array<char, MPI_MAX_PROCESSOR_NAME> mine{};
  int len = 0;
  check_mpi(MPI_Get_processor_name(mine.data(), &len), "MPI_Get_processor_name");
  int size = 1;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  std::vector<char> all(mine.size() * static_cast<size_t>(size));
  check_mpi(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(),
                          static_cast<int>(mine.size()), MPI_CHAR, comm),
            "MPI_Allgather(host names)");
  std::vector<std::string> hosts;
  for (int r = 0; r < size; ++r) {
    const char* name = all.data() + static_cast<size_t>(r) * mine.size();
    hosts.emplace_back(name, strnlen(name, mine.size()));
  }
  return hosts;
}

std::string MeshComms::describe_rank(int world_rank) const {
  const bool known = world_rank >= 0 && world_rank < static_cast<int>(hosts_.size());
  return "world rank " + std::to_string(world_rank) + " (host " +
         (known ? hosts_[static_cast<size_t>(world_rank)] : std::string("unknown")) + ")";
}

std::string MeshComms::describe_tp_group() const {
  const int first = world_rank_of_tp(0), last = world_rank_of_tp(tp_ - 1);
  std::vector<std::string> hosts;
  for (int r = first; r <= last; ++r) {
    const std::string& h = hosts_[static_cast<size_t>(r)];
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  }
  std::string text = "world ranks " + std::to_string(first) + "-" + std::to_string(last) +
                     (hosts.size() == 1 ? " (host " : " (hosts ");
  for (size_t i = 0; i < hosts.size(); ++i) text += (i ? ", " : "") + hosts[i];
  return text + ")";
}

std::string MeshComms::describe_group(Group g) const {
  if (g == Group::kTp) return describe_tp_group();
  std::vector<std::string> hosts;
  std::string ranks;
  const int members = size(g);
  for (int m = 0; m < members; ++m) {
    const int r = world_rank_of(g, m);
    ranks += (m ? ", " : "") + std::to_string(r);
    const std::string& h = hosts_[static_cast<size_t>(r)];
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  }
  std::string text = (members == 1 ? "world rank " : "world ranks ") + ranks +
                     (hosts.size() == 1 ? " (host " : " (hosts ");
  for (size_t i = 0; i < hosts.size(); ++i) text += (i ? ", " : "") + hosts[i];
  return text + ")";
}

MeshComms::~MeshComms() {
  // Communicators may outlive MPI_Finalize in a user's program; freeing then is illegal.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Comm* c : {&node_comm_, &fsdp_comm_, &dp_comm_, &tp_comm_, &world_}) {
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }
}

std::vector<std::vector<int>> MeshComms::tp_groups() const {
  std::vector<std::vector<int>> groups(static_cast<size_t>(dp_ * fsdp_));
  for (int r = 0; r < world_size_; ++r) groups[static_cast<size_t>(r / tp_)].push_back(r);
  return groups;
}

std::vector<std::vector<int>> MeshComms::dp_groups() const {
  // One per (fsdp rank, tp rank), ranks in dp order.
  std::vector<std::vector<int>> groups(static_cast<size_t>(fsdp_ * tp_));
  for (int r = 0; r < world_size_; ++r) groups[static_cast<size_t>(r % (fsdp_ * tp_))].push_back(r);
  return groups;
}

std::vector<std::vector<int>> MeshComms::fsdp_groups() const {
  // One per (dp rank, tp rank), ranks in fsdp order.
  std::vector<std::vector<int>> groups(static_cast<size_t>(dp_ * tp_));
  for (int r = 0; r < world_size_; ++r) {
    groups[static_cast<size_t>(r / (fsdp_ * tp_) * tp_ + r % tp_)].push_back(r);
  }
  return groups;
}

std::string MeshComms::host_name() const {
  std::array<char, MPI_MAX_PROCESSOR_NAME> name{};
  int len = 0;
  MPI_Get_processor_name(name.data(), &len);
  return std::string(name.data(), static_cast<size_t>(len));
}

void abort_world(int code) {
  int initialized = 0, finalized = 0, level = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized && MPI_Query_thread(&level) == MPI_SUCCESS &&
      level == MPI_THREAD_MULTIPLE) {
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  _exit(code);
}

}  // namespace cgemm
