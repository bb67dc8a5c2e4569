#include "cgemm/sharding/partition_spec.hpp"

#include <limits>
#include <string>

namespace cgemm {

namespace {

// Python's repr of a tuple: a one-element tuple keeps its trailing comma ("('a',)"), so
// messages read exactly like the gemm.py ones they mirror.
std::string py_tuple(const std::vector<std::string>& items) {
  std::string out = "(";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += items[i];
  }
  if (items.size() == 1) out += ",";
  return out + ")";
}

std::string entry_str(const SpecEntry& e) {
  if (!e.is_tuple) return e.axes.empty() ? "None" : "'" + e.axes[0] + "'";
  std::vector<std::string> names;
  for (const auto& a : e.axes) names.push_back("'" + a + "'");
  return py_tuple(names);
}

}  // namespace

std::string spec_str(const PartitionSpec& spec) {
  std::vector<std::string> items;
  for (const auto& e : spec) items.push_back(entry_str(e));
  return py_tuple(items);
}

int Mesh::axis_size(const std::string& name) const {
  for (const auto& [axis, size] : axes) {
    if (axis == name) return size;
  }
  std::string known;
  for (const auto& [axis, size] : axes) {
    if (!known.empty()) known += ", ";
    known += "'" + axis + "'=" + std::to_string(size);
  }
  throw Error("mesh has no axis '" + name + "' (mesh axes: " + known + ")");
}

bool Mesh::has_axis(const std::string& name) const {
  for (const auto& [axis, size] : axes) {
    if (axis == name) return true;
  }
  return false;
}

int Mesh::size() const {
  int64_t n = 1;
  for (const auto& [axis, size] : axes) n = checked_mul(n, size, "mesh size");
  if (n > std::numeric_limits<int>::max()) {
    throw Error("mesh size " + std::to_string(n) + " exceeds the largest int");
  }
  return static_cast<int>(n);
}

PartitionSpec pad_spec(const std::optional<PartitionSpec>& spec, size_t ndim,
                       const std::string& what) {
  if (!spec) return PartitionSpec(ndim, SpecEntry::none());
  // misc.py's get_padded_spec asserts len(spec) <= ndim.
  if (spec->size() > ndim) {
    throw PlanError(what + " partition spec " + spec_str(*spec) + " has " +
                    std::to_string(spec->size()) + " entries but the operand has only " +
                    std::to_string(ndim) + " dimensions");
  }
  PartitionSpec padded = *spec;
  padded.resize(ndim, SpecEntry::none());
  return padded;
}

Shape local_shape(const Shape& global, const PartitionSpec& spec, const Mesh& mesh,
                  const std::string& what) {
  if (spec.size() > global.size()) {
    throw Error(what + " partition spec " + spec_str(spec) + " has more entries than " + what +
                " shape " + shape_str(global) + " has dimensions");
  }
  Shape local = global;
  for (size_t d = 0; d < spec.size(); ++d) {
    int64_t shards = 1;
    for (const auto& axis : spec[d].axes) {
      if (!mesh.has_axis(axis)) {
        throw Error(what + " dim " + std::to_string(d) + " of shape " + shape_str(global) +
                    " is sharded over '" + axis + "', which is not a mesh axis");
      }
      shards = checked_mul(shards, mesh.axis_size(axis), what + " shards");
    }
    if (shards <= 0 || global[d] % shards != 0) {
      throw Error(what + " dim " + std::to_string(d) + " of shape " + shape_str(global) +
                  " (size " + std::to_string(global[d]) + ") is not divisible by " +
                  std::to_string(shards) + ", the number of shards over mesh axes " +
                  entry_str(spec[d]));
    }
    local[d] = global[d] / shards;
  }
  return local;
}

}  // namespace cgemm
