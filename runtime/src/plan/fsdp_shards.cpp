// FSDP's part of planning (fsdp_gather.hpp): which rhs dim the plan gathers over the fsdp group,
// and whether the runtime runs that layout.

#include <algorithm>

#include "fsdp/fsdp_gather.hpp"
#include "gemm_layout.hpp"
#include "planning.hpp"

namespace cgemm {

// The rhs dim the caller gives sharded over the fsdp axis where the planner's answer is None
// (gemm.py gathers it: fsdp_gather.hpp), or -1 when the given spec has none. Any other
// difference is left to require_same_spec's message.
int fsdp_gathered_dim(const PartitionSpec& given, const PartitionSpec& planned,
                      const PlanningMesh& m, const std::string& where) {
  int dim = -1;
  if (m.fsdp == 1) return dim;  // no fsdp axis: the spec must be the planner's
  for (size_t d = 0; d < given.size() && d < planned.size(); ++d) {
    if (given[d] == planned[d] || !planned[d].is_none()) continue;
    if (given[d].is_tuple &&
        std::find(given[d].axes.begin(), given[d].axes.end(), m.fsdp_axis) != given[d].axes.end()) {
      throw PlanError(
          where + ": dim " + std::to_string(d) + " of " + spec_str(given) +
          " is sharded over a tuple holding the fsdp axis '" + m.fsdp_axis +
          "', which gemm.py gathers whole; cgemm gathers the fsdp axis alone: shard the " +
          "dim over '" + m.fsdp_axis + "' only, or pass the weight gathered");
    }
    if (!given[d].is_axis(m.fsdp_axis)) continue;
    if (dim >= 0) {
      throw PlanError(where + ": dims " + std::to_string(dim) + " and " + std::to_string(d) +
                      " of " + spec_str(given) + " are both sharded over the fsdp axis '" +
                      m.fsdp_axis + "' (a mesh axis can shard one dim only)");
    }
    dim = static_cast<int>(d);
  }
  return dim;
}

// The FSDP gather of the rhs's dim `dim` (fsdp_gather.hpp), refused where the runtime does not
// run it; fills r's shard shape and offsets' inputs. `gathered` is the planner's local rhs.
namespace {

// One spec entry as PartitionSpec text writes it: 'a', or ('a', 'b').
std::string entry_text(const SpecEntry& e) {
  const std::string spec = spec_str({e});  // "('a',)" or "(('a', 'b'),)"
  return spec.substr(1, spec.size() - 3);
}

}  // namespace

void require_fsdp_not_twice(const GemmSharding& s, const PlanningMesh& m,
                            const std::string& where) {
  if (m.fsdp == 1) return;  // no fsdp axis: require_axes_once names a repeated axis
  int named = 0;
  for (const SpecEntry& e : s.out) {
    named += static_cast<int>(std::count(e.axes.begin(), e.axes.end(), m.fsdp_axis));
  }
  if (named < 2 || !s.reduce_spec) return;
  throw PlanError(where + ": gemm.py keeps the rhs " + spec_str(s.rhs) + " sharded over the fsdp " +
                  "axis '" + m.fsdp_axis + "', so the output " + spec_str(s.out) + " would name " +
                  "it twice: with a reduce axis (" + entry_text(*s.reduce_spec) + ") it gathers " +
                  "a non-contracting rhs dim only where the lhs's non-contracting dims hold the " +
                  "same entry (lhs " + spec_str(s.lhs) + "); shard the lhs batch over '" +
                  m.fsdp_axis + "' alone (no dp replicas), or pass the weight gathered");
}

FsdpGather plan_fsdp_gather(const GemmDesc& desc, const GemmLayouts& layout, int dim,
                            const PlanningMesh& m, PlanDescription& r) {
  const std::string where = "GEMM '" + desc.name + "' rhs " + spec_str(desc.rhs_spec);
  const auto d = static_cast<size_t>(dim);
  const std::vector<int64_t>& contracting = layout.rhs.contracting;
  const bool contracted =
      std::find(contracting.begin(), contracting.end(), dim) != contracting.end();
  std::vector<int64_t> kept;  // the non-contracting dims, in storage order
  for (int64_t i = 0; i < static_cast<int64_t>(desc.rhs_shape.size()); ++i) {
    if (std::find(contracting.begin(), contracting.end(), i) == contracting.end()) {
      kept.push_back(i);
    }
  }
  if (desc.quantization.mode != ScalingMode::kNoScaling) {
    throw Error(where +
                ": an FSDP-sharded rhs is gathered in its own dtype; a quantized GEMM "
                "(scaling mode " +
                std::string(scaling_mode_name(desc.quantization.mode)) +
                ") with an fsdp-sharded rhs is not run yet: pass the rhs gathered");
  }
  FsdpGather f;
  f.size = m.fsdp;
  f.me = m.fsdp_rank;
  if (contracted) {
    // Rank-major [K/f, N] blocks are the gathered [K, N] only for the outermost K dim of an
    // rhs stored [K..., N...].
    if (layout.rhs.transposed || dim != *std::min_element(contracting.begin(), contracting.end())) {
      throw Error(where + ": dim " + std::to_string(dim) + " is a contracting dim sharded over " +
                  "the fsdp axis '" + m.fsdp_axis + "'; the runtime gathers a contracting " +
                  "dim only as the outermost dim of an rhs stored [K..., N...] (its shards are " +
                  "then whole rows)");
    }
    f.columns = false;
  } else if (kept.empty() || dim != kept.front()) {
    throw Error(where + ": dim " + std::to_string(dim) + " is sharded over the fsdp axis '" +
                m.fsdp_axis + "'; the runtime gathers the outermost of the rhs's " +
                "non-contracting dims only (its shards are then whole blocks of output columns)");
  }
  r.rhs_gathered = r.rhs_local;
  if (r.rhs_local[d] % m.fsdp != 0) {
    throw PlanError(where + ": dim " + std::to_string(dim) + " of size " +
                    std::to_string(r.rhs_local[d]) + " does not divide into fsdp=" +
                    std::to_string(m.fsdp) + " shards; cgemm does not pad FSDP shards: pad the " +
                    "weight to a multiple of " + std::to_string(m.fsdp) + " along that dim");
  }
  r.rhs_local[d] /= m.fsdp;
  r.fsdp_dim = dim;
  f.shard_bytes = static_cast<size_t>(
      checked_bytes(num_elements(r.rhs_local), dtype_size(desc.dtype), where + " shard"));
  return f;
}

FsdpScatter plan_fsdp_scatter(const GemmDesc& desc, const GemmLayouts& layout,
                              const PlanningMesh& m, PlanDescription& r) {
  const int dim = desc.fsdp_scatter_dim;
  const std::string where = "GEMM '" + desc.name + "': fsdp_scatter_dim " + std::to_string(dim);
  const GemmSharding& s = r.sharding;
  if (m.fsdp == 1) {
    throw PlanError(where + ": the mesh has no fsdp axis (fsdp 1), so there is nothing to " +
                    "reduce-scatter over; leave it at -1");
  }
  if (desc.collective != CollectiveOp::kNone) {
    throw Error(where + ": only a plain GEMM (collective none) reduce-scatters over fsdp; this " +
                "one is " + std::string(collective_name(desc.collective)));
  }
  if (desc.quantization.mode != ScalingMode::kNoScaling) {
    throw Error(where + ": a quantized GEMM's reduce-scatter over fsdp is not run yet");
  }
  if (r.fsdp_dim >= 0) {
    throw Error(where + ": its rhs is gathered over fsdp too; a GEMM does one or the other");
  }
  // Over fsdp alone, or over the replicas too (HSDP: then summed over dp after the scatter).
  const auto is_data = [&](const SpecEntry& e) {
    if (e.is_axis(m.fsdp_axis)) return true;
    if (!e.is_tuple || e.axes.size() != 2) return false;
    return std::count(e.axes.begin(), e.axes.end(), m.fsdp_axis) == 1 &&
           std::count(e.axes.begin(), e.axes.end(), m.dp_axis) == 1;
  };
  if (!s.reduce_spec || !is_data(*s.reduce_spec)) {
    throw PlanError(where + ": the planner " +
                    (s.reduce_spec ? "reduces the output over " + entry_text(*s.reduce_spec)
                                   : std::string("does not reduce the output")) +
                    "; a reduce-scatter over the fsdp axis '" + m.fsdp_axis + "' needs both " +
                    "contracting dims sharded over it, or over ('" + m.dp_axis + "', '" +
                    m.fsdp_axis + "') (lhs " + spec_str(s.lhs) + ", rhs " + spec_str(s.rhs) + ")");
  }
  const auto lhs_kept = static_cast<int>(layout.lhs.kept_shape(desc.lhs_shape).size());
  const int out_nd = static_cast<int>(r.out_global.size());
  FsdpScatter how = FsdpScatter::kNone;
  if (dim == 0 && lhs_kept > 0) how = FsdpScatter::kRows;
  if (dim == lhs_kept && dim < out_nd) how = FsdpScatter::kColumns;
  if (how == FsdpScatter::kNone) {
    throw Error(where + ": the output " + shape_str(r.out_global) + " is reduce-scattered by " +
                "its first dim (rows) or by dim " + std::to_string(lhs_kept) +
                ", the first of the rhs's (columns): whole blocks of the local GEMM's output");
  }
  const auto d = static_cast<size_t>(dim);
  if (!s.out[d].is_none()) {
    throw PlanError(where + ": the planner shards that output dim as " + spec_str({s.out[d]}) +
                    " already (output " + spec_str(s.out) + ")");
  }
  if (r.out_local[d] % m.fsdp != 0) {
    throw PlanError(where + ": output dim of size " + std::to_string(r.out_local[d]) +
                    " does not divide into fsdp=" + std::to_string(m.fsdp) +
                    " blocks; cgemm does not pad FSDP shards: pad the weight");
  }
  r.out_local[d] /= m.fsdp;
  r.out_spec[d] = SpecEntry::axis(m.fsdp_axis);
  return how;
}

}  // namespace cgemm
