// cgemm-run --dry_run's backend (launcher/common/dry_run.cpp's predict_backend): the backend rule
// of Context (cgemm/runtime/context.hpp) applied to the placement, without CUDA.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/dry_run.hpp"

namespace cgemm::launcher {
namespace {

// `ranks` ranks on each host of `hosts`, each seeing `gpus` GPUs (its GPU: local rank modulo).
std::vector<RankPlace> places(const std::vector<std::string>& hosts, int ranks, int gpus) {
  std::vector<RankPlace> out;
  for (const std::string& h : hosts) {
    for (int r = 0; r < ranks; ++r) out.push_back({h, r, gpus, gpus > 0 ? r % gpus : -1});
  }
  return out;
}

TEST(DryRunBackend, AutoWithoutAGpuPlansTheCpuBackend) {
  const PredictedBackend p = predict_backend(BackendKind::kAuto, false, true, places({"h"}, 2, 0));
  EXPECT_EQ(p.kind, BackendKind::kCpu);
  EXPECT_NE(p.why.find("rank 0 on host h sees no GPU"), std::string::npos) << p.why;
  EXPECT_NE(p.why.find("CPU backend"), std::string::npos) << p.why;
}

TEST(DryRunBackend, AutoInABuildWithoutCudaPlansTheCpuBackend) {
  const PredictedBackend p = predict_backend(BackendKind::kAuto, false, false, places({"h"}, 2, 2));
  EXPECT_EQ(p.kind, BackendKind::kCpu);
  EXPECT_NE(p.why.find("without CUDA"), std::string::npos) << p.why;
}

TEST(DryRunBackend, AutoWithAGpuPerRankPlansCuda) {
  const PredictedBackend p =
      predict_backend(BackendKind::kAuto, false, true, places({"a", "b"}, 4, 4));
  EXPECT_EQ(p.kind, BackendKind::kCuda);
  EXPECT_TRUE(p.refusal.empty());
}

TEST(DryRunBackend, AutoWithRanksSharingAGpu) {
  EXPECT_EQ(predict_backend(BackendKind::kAuto, false, true, places({"h"}, 4, 2)).kind,
            BackendKind::kCpu);
  EXPECT_EQ(predict_backend(BackendKind::kAuto, true, true, places({"h"}, 4, 2)).kind,
            BackendKind::kCuda);  // gpu_sharing
}

TEST(DryRunBackend, AutoOnUnevenHostsPlansTheCpuBackend) {
  std::vector<RankPlace> p = places({"a"}, 2, 2);
  p.push_back({"b", 0, 2, 0});
  const PredictedBackend b = predict_backend(BackendKind::kAuto, false, true, p);
  EXPECT_EQ(b.kind, BackendKind::kCpu);
  EXPECT_NE(b.why.find("uneven ranks per host (a 2, b 1)"), std::string::npos) << b.why;
}

TEST(DryRunBackend, AskedBackendsStay) {
  EXPECT_EQ(predict_backend(BackendKind::kCpu, false, true, places({"h"}, 2, 2)).kind,
            BackendKind::kCpu);
  const PredictedBackend c = predict_backend(BackendKind::kCuda, false, true, places({"h"}, 2, 0));
  EXPECT_EQ(c.kind, BackendKind::kCuda);
  EXPECT_NE(c.refusal.find("sees no GPU"), std::string::npos) << c.refusal;
  EXPECT_TRUE(c.why.empty());
}

}  // namespace
}  // namespace cgemm::launcher
