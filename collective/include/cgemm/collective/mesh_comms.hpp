#pragma once
// The data-parallel x fully-sharded x tensor-parallel mesh of an MPI job and its communicators.
//
// World size = dp x fsdp x tp. Rank r has tp_rank = r mod tp, fsdp_rank = (r div tp) mod fsdp
// and dp_rank = r div (tp fsdp), so a tensor-parallel group is tp consecutive ranks and stays
// inside a node when tp <= ranks per node (as Megatron/TE lay groups out), and an FSDP group is
// the next closest (ZeRO-3 gathers weights every step; replicas only sum gradients). With fsdp 1
// the layout is the dp x tp mesh's.

#include <mpi.h>

#include <string>
#include <vector>

#include "cgemm/collective/group.hpp"

namespace cgemm {

class MeshComms {
 public:
  /// Collective over `world`: splits it into TP groups (consecutive ranks), FSDP groups (ranks
  /// with the same tp_rank and dp_rank), DP groups (ranks with the same tp_rank and fsdp_rank),
  /// and a node-local communicator (MPI_COMM_TYPE_SHARED). `world` is duplicated, never freed.
  /// Throws cgemm::Error naming the sizes when the world size is not dp x fsdp x tp.
  MeshComms(MPI_Comm world, int dp, int tp, int fsdp = 1);
  ~MeshComms();
  MeshComms(const MeshComms&) = delete;
  MeshComms& operator=(const MeshComms&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  int dp() const { return dp_; }
  int tp() const { return tp_; }
  int fsdp() const { return fsdp_; }
  int dp_rank() const { return world_rank_ / (tp_ * fsdp_); }
  int tp_rank() const { return world_rank_ % tp_; }
  int fsdp_rank() const { return world_rank_ / tp_ % fsdp_; }
  int local_rank() const { return local_rank_; }  // rank within this node
  int local_size() const { return local_size_; }  // ranks on this node
  MPI_Comm world() const { return world_; }
  MPI_Comm tp_comm() const { return tp_comm_; }
  MPI_Comm dp_comm() const { return dp_comm_; }
  MPI_Comm fsdp_comm() const { return fsdp_comm_; }
  MPI_Comm node_comm() const { return node_comm_; }
  /// True when every rank of this rank's TP group runs on this node.
  bool tp_group_on_one_node() const { return tp_on_node_; }

  // --- one group of the mesh (group.hpp): its communicator, this rank's place in it ---
  MPI_Comm comm(Group g) const {
    return g == Group::kTp ? tp_comm_ : g == Group::kDp ? dp_comm_ : fsdp_comm_;
  }
  int size(Group g) const { return g == Group::kTp ? tp_ : g == Group::kDp ? dp_ : fsdp_; }
  int rank(Group g) const {
    return g == Group::kTp ? tp_rank() : g == Group::kDp ? dp_rank() : fsdp_rank();
  }
  /// The world rank of member `member` (its rank in group g) of this rank's group g.
  int world_rank_of(Group g, int member) const {
    switch (g) {
      case Group::kTp:
        return world_rank_of_tp(member);
      case Group::kDp:
        return (member * fsdp_ + fsdp_rank()) * tp_ + tp_rank();
      case Group::kFsdp:
        return (dp_rank() * fsdp_ + member) * tp_ + tp_rank();
    }
    return -1;
  }
  /// True when every rank of this rank's group g runs on this node.
  bool on_one_node(Group g) const {
    return g == Group::kTp ? tp_on_node_ : g == Group::kDp ? dp_on_node_ : fsdp_on_node_;
  }
  /// "world ranks 1, 3 (hosts H...)" of this rank's group g, for waits on a collective of it
  /// (the tp group as describe_tp_group()).
  std::string describe_group(Group g) const;
  /// World ranks of each TP group, each DP group and each FSDP group (for reports).
  std::vector<std::vector<int>> tp_groups() const;
  std::vector<std::vector<int>> dp_groups() const;
  std::vector<std::vector<int>> fsdp_groups() const;
  std::string host_name() const;
  /// The world rank of this rank's TP-group peer `tp_rank`.
  int world_rank_of_tp(int tp_rank) const { return world_rank_ / tp_ * tp_ + tp_rank; }
  /// "world rank R (host H)": how messages name a rank (the hosts are gathered once, here).
  std::string describe_rank(int world_rank) const;
  /// "world ranks A-B (hosts H...)" of this rank's TP group, for waits on a collective of it.
  std::string describe_tp_group() const;

 private:
  int dp_ = 1, tp_ = 1, fsdp_ = 1;
  int world_rank_ = 0, world_size_ = 1;
  int local_rank_ = 0, local_size_ = 1;
  bool tp_on_node_ = true, dp_on_node_ = true, fsdp_on_node_ = true;
  std::vector<std::string> hosts_;  // by world rank
  MPI_Comm world_ = MPI_COMM_NULL, tp_comm_ = MPI_COMM_NULL, dp_comm_ = MPI_COMM_NULL,
           fsdp_comm_ = MPI_COMM_NULL, node_comm_ = MPI_COMM_NULL;
};

/// Every rank's host name (MPI_Get_processor_name), by rank of `comm`, on every rank
/// (collective over `comm`).
std::vector<std::string> gather_host_names(MPI_Comm comm);

/// Ends the whole job from any thread (the watchdog's ender): MPI_Abort on MPI_COMM_WORLD
/// when MPI runs with MPI_THREAD_MULTIPLE, else _exit(code), after which mpirun ends the
/// other ranks. Never returns; runs no destructor.
[[noreturn]] void abort_world(int code);

/// Throws cgemm::Error("<call> failed on rank r: <MPI error string>") when rc != MPI_SUCCESS.
void check_mpi(int rc, const char* call);

}  // namespace cgemm
