#pragma once
// A group of the dp x fsdp x tp mesh (mesh_comms.hpp) that an exchange, a symmetric buffer or a
// collective runs over. A small value, not a communicator: each backend maps it to the
// transport set it holds for that group. tp is the tensor-parallel group (consecutive world
// ranks); fsdp the ranks that shard one replica's weights (this rank's tp rank and dp rank);
// dp the replicas (this rank's tp rank and fsdp rank). Without an fsdp axis (fsdp 1) dp is every
// rank with this rank's tp rank, as before the axis existed. An expert-parallel group would be
// a fourth value.

#include <array>
#include <cstdint>

namespace cgemm {

enum class Group : uint8_t {
  kTp,    // tensor parallel: every collective GEMM's exchanges and collectives
  kDp,    // data parallel (replicas): the gradient sum, the last step of the world's amax
  kFsdp,  // fully sharded data parallel: the weight shards gathered inside a GEMM (FSDP)
};

/// Every group, in enum order.
inline constexpr std::array<Group, 3> kGroups{Group::kTp, Group::kDp, Group::kFsdp};

/// "tp", "dp" or "fsdp".
constexpr const char* group_name(Group g) {
  return g == Group::kTp ? "tp" : g == Group::kDp ? "dp" : "fsdp";
}

/// The index of `g` in kGroups (for arrays held per group).
constexpr size_t group_index(Group g) { return static_cast<size_t>(g); }

}  // namespace cgemm
