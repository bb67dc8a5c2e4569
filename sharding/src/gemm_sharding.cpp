#include "cgemm/sharding/gemm_sharding.hpp"

#include <algorithm>
#include <string>

#include "cgemm/sharding/dims.hpp"
#include "py_index.hpp"

namespace cgemm {

namespace {

using detail::py_at;

// Python None. An empty tuple entry is not None (it is a tuple), hence the is_tuple test.
bool is_py_none(const SpecEntry& e) { return !e.is_tuple && e.axes.empty(); }

// A MeshResource field as the spec entry it is compared against ("axis" or None).
SpecEntry resource_entry(const std::optional<std::string>& r) {
  return r ? SpecEntry::axis(*r) : SpecEntry::none();
}

std::string resource_str(const std::optional<std::string>& r) { return r ? *r : "None"; }

std::string entry_repr(const SpecEntry& e) {
  // spec_str of a one-entry spec is "(x,)": strip the tuple around the entry.
  const std::string s = spec_str(PartitionSpec{e});
  return s.substr(1, s.size() - 3);
}

bool contains(const PartitionSpec& specs, const SpecEntry& e) {
  return std::find(specs.begin(), specs.end(), e) != specs.end();
}

PartitionSpec concat(const PartitionSpec& a, const PartitionSpec& b) {
  PartitionSpec out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// out[:d] + (x,) + out[d+1:] with Python slice semantics: d == len(out) appends.
PartitionSpec splice(const PartitionSpec& out, size_t d, const SpecEntry& x) {
  PartitionSpec r(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(std::min(d, out.size())));
  r.push_back(x);
  if (d + 1 < out.size())
    r.insert(r.end(), out.begin() + static_cast<std::ptrdiff_t>(d + 1), out.end());
  return r;
}

PartitionSpec gather(const PartitionSpec& specs, const std::vector<int64_t>& dims,
                     const std::string& what) {
  PartitionSpec out;
  out.reserve(dims.size());
  for (int64_t d : dims) out.push_back(py_at(specs, d, what));
  return out;
}

}  // namespace

GemmSharding infer_gemm_sharding(const GemmShardingInput& in) {
  // get_padded_spec runs over every operand, the bias included, before anything else.
  PartitionSpec lhs_specs = pad_spec(in.lhs.spec, in.lhs.ndim, "lhs");
  PartitionSpec rhs_specs = pad_spec(in.rhs.spec, in.rhs.ndim, "rhs");
  if (in.bias) pad_spec(in.bias->spec, in.bias->ndim, "bias");

  const MeshResource& gsr = in.mesh_resource;
  GemmSharding result;

  // gemm.py only warns: tensor sequence parallelism set up through tp_resource.
  if (gsr.tp_resource && contains(lhs_specs, SpecEntry::axis(*gsr.tp_resource))) {
    result.warnings = 1;
  }

  const auto lhs_ndim = static_cast<int64_t>(lhs_specs.size());
  const auto rhs_ndim = static_cast<int64_t>(rhs_specs.size());
  const auto lhs_cdims = sanitize_dims(lhs_ndim, in.contracting_dims.first);
  const auto rhs_cdims = sanitize_dims(rhs_ndim, in.contracting_dims.second);
  const auto lhs_non_cdims = non_contracting_dims(lhs_ndim, in.contracting_dims.first);
  const auto rhs_non_cdims = non_contracting_dims(rhs_ndim, in.contracting_dims.second);

  PartitionSpec lhs_non_cspecs = gather(lhs_specs, lhs_non_cdims, "lhs");
  PartitionSpec lhs_cspecs = gather(lhs_specs, lhs_cdims, "lhs contracting dims");
  PartitionSpec rhs_non_cspecs = gather(rhs_specs, rhs_non_cdims, "rhs");
  PartitionSpec rhs_cspecs = gather(rhs_specs, rhs_cdims, "rhs contracting dims");

  SpecEntry reduce_spec = SpecEntry::none();
  bool have_reduce = false;
  for (const auto& l : lhs_cspecs) {
    for (const auto& r : rhs_cspecs) {
      if (!is_py_none(l) && l == r) {
        if (have_reduce) {
          throw PlanError("Multiple reduce dimension is detected! lhs contracting specs " +
                          spec_str(lhs_cspecs) + " and rhs contracting specs " +
                          spec_str(rhs_cspecs) + " share both " + entry_repr(reduce_spec) +
                          " and " + entry_repr(l));
        }
        reduce_spec = l;
        have_reduce = true;
      }
    }
  }

  const SpecEntry tpsp = resource_entry(gsr.tpsp_resource);
  const bool all_gather = in.collective_op == CollectiveOp::kAllGather;
  const bool reduce_scatter = in.collective_op == CollectiveOp::kReduceScatter;
  int64_t sequence_dim = -1;

  if (all_gather) {
    // lhs_specs.index(tpsp_resource): a None tpsp_resource finds the first unsharded dim,
    // and an axis inside a tuple entry is not found.
    const auto it = std::find(lhs_specs.begin(), lhs_specs.end(), tpsp);
    if (it == lhs_specs.end()) {
      throw PlanError("tpsp_resource '" + resource_str(gsr.tpsp_resource) +
                      "' is not found in lhs_specs: " + spec_str(lhs_specs) +
                      ". Please check your sharding configuration.");
    }
    sequence_dim = it - lhs_specs.begin();
    // not (sequence_dim == 1) ^ transpose_batch_sequence
    if ((sequence_dim == 1) == in.transpose_batch_sequence) {
      throw PlanError(
          "CollectiveGEMM supports only (sequence_dim=1 and transpose_batch_sequence=False) or "
          "(sequence_dim=0 and transpose_batch_sequence=True). Received: sequence_dim=" +
          std::to_string(sequence_dim) +
          ", transpose_batch_sequence=" + (in.transpose_batch_sequence ? "True" : "False") + ".");
    }
  } else if (reduce_scatter) {
    // Holds when both are None.
    if (reduce_spec != tpsp) {
      throw PlanError(
          "Only CollectiveGemm RS with the Reduction over the TPSP axis is supported! Got "
          "reduce_spec=" +
          entry_repr(reduce_spec) + ", tpsp_resource=" + resource_str(gsr.tpsp_resource));
    }
    sequence_dim = in.transpose_batch_sequence ? 0 : 1;
  }

  if (have_reduce) {
    for (auto& s : lhs_cspecs) {
      if (s != reduce_spec) s = SpecEntry::none();
    }
    for (auto& s : rhs_cspecs) {
      if (s != reduce_spec && !(all_gather && s == tpsp)) s = SpecEntry::none();
    }
    for (auto& s : rhs_non_cspecs) {
      if (contains(lhs_non_cspecs, s)) s = SpecEntry::none();
    }
  } else {
    std::fill(lhs_cspecs.begin(), lhs_cspecs.end(), SpecEntry::none());
    std::fill(rhs_cspecs.begin(), rhs_cspecs.end(), SpecEntry::none());
    // Gather rhs non-contracting dims over the FSDP axis, also when it is part of a tuple.
    if (gsr.fsdp_resource) {
      const std::string& fsdp = *gsr.fsdp_resource;
      for (auto& s : rhs_non_cspecs) {
        const bool in_tuple =
            s.is_tuple && std::find(s.axes.begin(), s.axes.end(), fsdp) != s.axes.end();
        if (s.is_axis(fsdp) || in_tuple) s = SpecEntry::none();
      }
    }
  }

  if (!all_gather) {
    for (auto& s : lhs_non_cspecs) {
      if (contains(rhs_non_cspecs, s)) s = SpecEntry::none();
    }
  }

  PartitionSpec out_specs = concat(lhs_non_cspecs, rhs_non_cspecs);

  if (all_gather || reduce_scatter) {
    // `>` rather than `>=`: a sequence dim equal to len(lhs_non_cspecs) passes and the
    // splice then overwrites an rhs entry or appends one.
    if (sequence_dim > static_cast<int64_t>(lhs_non_cspecs.size())) {
      throw PlanError("Sequence dim " + std::to_string(sequence_dim) +
                      " is out of bounds for lhs_non_cspecs: " + spec_str(lhs_non_cspecs));
    }
    out_specs =
        splice(out_specs, static_cast<size_t>(sequence_dim), all_gather ? SpecEntry::none() : tpsp);
  }

  // cspecs + non_cspecs when the first listed contracting dim is 0, else the other way
  // round: a spec can come back permuted. cdims[0] of an empty list is an IndexError.
  if (lhs_cdims.empty()) {
    throw PlanError("lhs contracting dims are empty: gemm.py indexes lhs_cdims[0]");
  }
  if (rhs_cdims.empty()) {
    throw PlanError("rhs contracting dims are empty: gemm.py indexes rhs_cdims[0]");
  }
  result.lhs =
      lhs_cdims[0] == 0 ? concat(lhs_cspecs, lhs_non_cspecs) : concat(lhs_non_cspecs, lhs_cspecs);
  result.rhs =
      rhs_cdims[0] == 0 ? concat(rhs_cspecs, rhs_non_cspecs) : concat(rhs_non_cspecs, rhs_cspecs);

  result.bias = in.bias ? rhs_non_cspecs : PartitionSpec{SpecEntry::none()};

  result.lhs_scale = result.rhs_scale = PartitionSpec{SpecEntry::none()};
  if (is_1d_block_scaling(in.scaling_mode)) {
    result.rhs_scale = result.rhs;
    result.lhs_scale = result.lhs;
    // The scales of an all-gather GEMM are gathered by JAX, not by the collective GEMM.
    if (all_gather && sequence_dim < static_cast<int64_t>(result.lhs_scale.size())) {
      result.lhs_scale[static_cast<size_t>(sequence_dim)] = SpecEntry::none();
    }
  }

  result.out = std::move(out_specs);
  if (have_reduce) result.reduce_spec = reduce_spec;
  if (all_gather || reduce_scatter) result.sequence_dim = static_cast<int>(sequence_dim);
  return result;
}

}  // namespace cgemm
