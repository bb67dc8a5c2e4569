// The names of cgemm-run's experiments (moe_options.hpp).

#include "moe_options.hpp"

#include "cgemm/core/error.hpp"

namespace cgemm::launcher {

const char* experiment_name(Experiment e) {
  return e == Experiment::kMoe ? "moe" : "collective_gemm";
}

Experiment parse_experiment(const std::string& text) {
  if (text == "collective_gemm") return Experiment::kCollectiveGemm;
  if (text == "moe") return Experiment::kMoe;
  throw Error("unknown experiment '" + text + "' (collective_gemm or moe)");
}

}  // namespace cgemm::launcher
