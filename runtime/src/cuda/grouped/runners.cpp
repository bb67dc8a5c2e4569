// GroupedRunners (runners.hpp).

#include "runners.hpp"

#include <span>
#include <utility>

#include "cgemm/core/error.hpp"

namespace cgemm::cuda {

GroupedGemmHandle GroupedRunners::prepare(const GroupedGemmShape& s, const std::string& name) {
  if (s.path == GroupedPath::kLoop) return 0;
  const std::string what = "grouped GEMM '" + name + "': path " + grouped_path_name(s.path);
  // GroupedGemmPlan refuses these at planning with its own words; a backend never runs them.
  if (s.path != GroupedPath::kCublasGrouped && s.path != GroupedPath::kCublasLtTiles &&
      s.path != GroupedPath::kCublasLtDeviceTiles) {
    throw Error(where_ + ": " + what + " is not a path the CUDA backend runs");
  }
  if (s.form != GroupedForm::kRaggedRows) {
    throw Error(where_ + ": " + what + " runs the ragged-rows form only");
  }
  // Each runner states its dtypes (grouped_rows.hpp's refusals) and throws for others.
  const grouped::RaggedRowsGeometry g = grouped::ragged_rows_geometry(s);
  std::unique_ptr<grouped::RaggedRowsRunner> r;
  switch (s.path) {
    case GroupedPath::kCublasGrouped:
      r = grouped::make_cublas_grouped(g, name);
      break;
    case GroupedPath::kCublasLtDeviceTiles:
      r = grouped::make_cublaslt_device_tiles(g, name);
      break;
    default:
      r = grouped::make_cublaslt_tiles(g, s.bias, name);
      break;
  }
  const GroupedGemmHandle h = next_++;
  runners_.emplace(h, std::move(r));
  return h;
}

void GroupedRunners::release(GroupedGemmHandle handle) noexcept { runners_.erase(handle); }

grouped::RaggedRowsRunner& GroupedRunners::at(GroupedGemmHandle handle, const char* label) {
  const auto it = runners_.find(handle);
  if (it == runners_.end()) {
    throw Error(where_ + ": grouped GEMM '" + std::string(label != nullptr ? label : "") +
                "': handle " + std::to_string(handle) + " names no prepared runner");
  }
  return *it->second;
}

bool GroupedRunners::run(const GroupedGemmTask& t, cudaStream_t stream) {
  const std::span<const int32_t> host =
      t.host_sizes != nullptr
          ? std::span<const int32_t>(t.host_sizes, static_cast<size_t>(t.shape.groups))
          : std::span<const int32_t>();
  const grouped::GroupScales scales{t.lhs_scale_inv, t.rhs_scale_inv, t.scale_stride};
  return at(t.handle, t.label).run(host, t.sizes, t.lhs, t.rhs, t.bias, t.out, scales, stream);
}

void GroupedRunners::check(GroupedGemmHandle handle) {
  if (handle == 0) return;
  const std::string e = at(handle, nullptr).take_error();
  if (!e.empty()) throw Error(e);
}

}  // namespace cgemm::cuda
