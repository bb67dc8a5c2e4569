// Builds without CUDA have no CUDA backend, so no plan asks for these runners; kept so the plan
// links the same way in both builds.

#include "cgemm/core/error.hpp"
#include "ragged_rows_runner.hpp"

namespace cgemm::grouped {

std::unique_ptr<RaggedRowsRunner> make_cublas_grouped(Backend&, const RaggedRowsGeometry&,
                                                      const std::string& name) {
  throw Error("grouped GEMM '" + name + "': path cublas_grouped needs cgemm built with CUDA");
}

std::unique_ptr<RaggedRowsRunner> make_cublaslt_tiles(Backend&, const RaggedRowsGeometry&, bool,
                                                      const std::string& name) {
  throw Error("grouped GEMM '" + name + "': path cublaslt_tiles needs cgemm built with CUDA");
}

}  // namespace cgemm::grouped
