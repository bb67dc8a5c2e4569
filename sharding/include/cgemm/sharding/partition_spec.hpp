#pragma once
// Mesh, MeshResource and PartitionSpec: the JAX sharding vocabulary that gemm.py's
// partition-spec inference works on.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cgemm/core/error.hpp"
#include "cgemm/core/shape.hpp"

namespace cgemm {

/// One entry of a PartitionSpec: unsharded (no axes), one mesh axis, or a tuple of axes.
/// A tuple of one axis is distinct from the axis itself (as in JAX, where "a" != ("a",)).
struct SpecEntry {
  std::vector<std::string> axes;  // empty: None
  bool is_tuple = false;          // true: ("a", "b", ...)

  static SpecEntry none() { return {}; }
  static SpecEntry axis(std::string name) { return {{std::move(name)}, false}; }
  static SpecEntry tuple(std::vector<std::string> names) { return {std::move(names), true}; }
  bool is_none() const { return axes.empty(); }
  bool is_axis(const std::string& name) const {
    return !is_tuple && axes.size() == 1 && axes[0] == name;
  }
  bool operator==(const SpecEntry&) const = default;
};

/// A PartitionSpec: one entry per dimension (after padding).
using PartitionSpec = std::vector<SpecEntry>;

std::string spec_str(const PartitionSpec& spec);  // "('dp', 'tpsp', None)"

/// The inverse of spec_str, for specs given as text (the C API, cgemm/cgemm.h): Python's
/// notation of a tuple whose items are None, an axis name in single or double quotes, or a
/// tuple of names: "('dp', 'tpsp', None)", "(('dp', 'tpsp'), None)", "('tpsp',)", "()".
/// As in Python, parentheses around one name without a comma are no tuple ("('a')" is 'a' as an
/// item, and as the whole spec one entry 'a'); JAX's repr "PartitionSpec(...)" and "P(...)" are
/// read too. Spaces are free between tokens. Throws cgemm::Error quoting the text and naming
/// the character offset of the first thing it cannot read (an empty tuple entry "()", an
/// empty name, a missing comma or bracket, anything after the closing one).
PartitionSpec parse_spec(std::string_view text);

/// An ordered device mesh: axis name -> size, in mesh order.
struct Mesh {
  std::vector<std::pair<std::string, int>> axes;
  /// Size of a named axis; throws cgemm::Error when the mesh has no such axis.
  int axis_size(const std::string& name) const;
  bool has_axis(const std::string& name) const;
  int size() const;  // product of all axis sizes
};

/// Transformer Engine's MeshResource: which mesh axis plays which role (or none).
struct MeshResource {
  std::optional<std::string> dp_resource;
  std::optional<std::string> tp_resource;
  std::optional<std::string> tpsp_resource;
  std::optional<std::string> fsdp_resource;
};

/// Pads `spec` to `ndim` entries with None at the end (a missing spec means all None), as
/// Transformer Engine's get_padded_spec (jax/cpp_extensions/misc.py).
/// Throws PlanError when the spec has more entries than `ndim` (`what` names the operand).
PartitionSpec pad_spec(const std::optional<PartitionSpec>& spec, size_t ndim,
                       const std::string& what);

/// The shard of a global shape held by one device: each dim divided by the product of the
/// sizes of the mesh axes it is sharded over; a spec shorter than the shape leaves the
/// trailing dims whole. Throws cgemm::Error naming the operand, the dim, the shape and the
/// axes when a dim is not divisible (or an axis is not in the mesh).
Shape local_shape(const Shape& global, const PartitionSpec& spec, const Mesh& mesh,
                  const std::string& what);

}  // namespace cgemm
