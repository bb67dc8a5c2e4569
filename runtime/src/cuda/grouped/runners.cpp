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
  if (s.path != GroupedPath::kCublasGrouped && s.path != GroupedPath::kCublasLtTiles) {
    throw Error(where_ + ": " + what + " is not a path the CUDA backend runs");
  }
  if (s.form != GroupedForm::kRaggedRows || s.scaled || s.out_dtype != s.in_dtype) {
    throw Error(where_ + ": " + what +
                " runs the ragged-rows form with unscaled inputs and outputs of one dtype only");
  }
  const grouped::RaggedRowsGeometry g = grouped::ragged_rows_geometry(s);
  std::unique_ptr<grouped::RaggedRowsRunner> r =
      s.path == GroupedPath::kCublasGrouped ? grouped::make_cublas_grouped(g, name)
                                            : grouped::make_cublaslt_tiles(g, s.bias, name);
  const GroupedGemmHandle h = next_++;
  runners_.emplace(h, std::move(r));
  return h;
}

void GroupedRunners::release(GroupedGemmHandle handle) noexcept { runners_.erase(handle); }

bool GroupedRunners::run(const GroupedGemmTask& t, cudaStream_t stream) {
  const auto it = runners_.find(t.handle);
  if (it == runners_.end()) {
    throw Error(where_ + ": grouped GEMM '" + std::string(t.label != nullptr ? t.label : "") +
                "': handle " + std::to_string(t.handle) + " names no prepared runner");
  }
  return it->second->run({t.host_sizes, static_cast<size_t>(t.shape.groups)}, t.lhs, t.rhs, t.bias,
                         t.out, stream);
}

}  // namespace cgemm::cuda
