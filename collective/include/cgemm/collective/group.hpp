#pragma once
// A group of the dp x tp mesh (mesh_comms.hpp) that an exchange, a symmetric buffer or a
// collective runs over. A small value, not a communicator: each backend maps it to the
// transport set it holds for that group. tp is the tensor-parallel group (consecutive world
// ranks), dp the data-parallel group (the ranks with this rank's tp rank); an expert-parallel
// group would be a third value.

#include <array>
#include <cstdint>

namespace cgemm {

enum class Group : uint8_t {
  kTp,  // tensor parallel: every collective GEMM's exchanges and collectives
  kDp,  // data parallel: the gradient sum, the second half of the world's amax
};

/// Every group, in enum order.
inline constexpr std::array<Group, 2> kGroups{Group::kTp, Group::kDp};

/// "tp" or "dp".
constexpr const char* group_name(Group g) { return g == Group::kTp ? "tp" : "dp"; }

/// The index of `g` in kGroups (for arrays held per group).
constexpr size_t group_index(Group g) { return static_cast<size_t>(g); }

}  // namespace cgemm
