// cgemm-train's model (launcher/train/train_model.hpp) on the CPU backend under mpirun, 1 rank:
// its gradients against central finite differences of its loss (in fp64, from the fp32
// block), and the first SGD and Adam updates. The mesh runs (tp 2, dp 2 x tp 2) are held to
// this one by the loss curves of tests/mpi/check_train.sh.

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cgemm/runtime/context.hpp"
#include "train/train_model.hpp"

namespace cgemm::launcher {
namespace {

std::unique_ptr<Context> g_ctx;
uint64_t g_seed = 0;  // fresh each run: the weights and inputs are new random draws

TrainConfig small_config(Optimizer opt, double lr) {
  TrainConfig c;
  c.dp = 1;
  c.tp = 1;
  c.batch = 2;
  c.seq_len = 4;
  c.hidden = 8;
  c.ffn = 16;
  c.steps = 1;
  c.lr = lr;
  c.optimizer = opt;
  c.dtype = DType::kFloat32;
  c.seed = g_seed;
  return c;
}

class MlpTrainerBias : public testing::TestWithParam<bool> {};

TEST_P(MlpTrainerBias, GradientsMatchFiniteDifferencesOfTheLoss) {
  TrainConfig cfg = small_config(Optimizer::kSgd, 0.1);
  cfg.bias = GetParam();
  MlpTrainer t(*g_ctx, cfg);
  const double loss = t.gradients(0).loss;
  ASSERT_TRUE(std::isfinite(loss) && loss > 0) << loss;
  const std::vector<float> g = t.gradients_host();
  const std::vector<float> w = t.weights();
  ASSERT_EQ(g.size(), w.size());
  // W1 [8, 16], b1 [16], W2 [16, 8], b2 [8] (no b1, b2 with --bias off): every 7th element
  // reaches each of them.
  ASSERT_EQ(w.size(), cfg.bias ? size_t{8 * 16 + 16 + 16 * 8 + 8} : size_t{8 * 16 + 16 * 8});
  double scale = 0;
  for (float v : g) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  ASSERT_GT(scale, 0);
  const double eps = 1e-2;
  int bad = 0, checked = 0;
  for (size_t i = 0; i < w.size(); i += 7) {
    std::vector<float> p = w;
    p[i] = static_cast<float>(w[i] + eps);
    t.set_weights(p);
    const double up = t.gradients(0).loss;
    p[i] = static_cast<float>(w[i] - eps);
    t.set_weights(p);
    const double down = t.gradients(0).loss;
    const double fd = (up - down) / (static_cast<double>(w[i] + eps) - (w[i] - eps));
    ++checked;
    // fp32 GEMMs: the loss carries about 1e-7 relative error, the difference quotient about
    // 1e-5 absolute; the quotient's own error is O(eps^2) times the third derivative.
    if (!(std::fabs(fd - g[i]) <= 2e-3 * scale + 1e-4) && bad++ < 5) {
      ADD_FAILURE() << "weight " << i << ": gradient " << g[i] << ", finite difference " << fd;
    }
  }
  EXPECT_EQ(bad, 0) << "of " << checked;
  t.set_weights(w);
  EXPECT_EQ(t.gradients(0).loss, loss);  // set_weights restores the model bit for bit
}
INSTANTIATE_TEST_SUITE_P(BiasOnOff, MlpTrainerBias, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& i) {
                           return i.param ? std::string("bias") : std::string("no_bias");
                         });

TEST(MlpTrainer, SgdStepsAgainstTheGradient) {
  const double lr = 0.25;
  MlpTrainer t(*g_ctx, small_config(Optimizer::kSgd, lr));
  const std::vector<float> w0 = t.weights();
  StepResult r = t.gradients(0);
  const std::vector<float> g = t.gradients_host();
  t.update(r);
  const std::vector<float> w1 = t.weights();
  for (size_t i = 0; i < w0.size(); ++i) {
    ASSERT_NEAR(w1[i], w0[i] - lr * g[i], 1e-6 * (1 + std::fabs(w0[i]))) << i;
  }
  // A small step against the gradient lowers the loss on the same inputs.
  EXPECT_LT(t.gradients(0).loss, r.loss);
}

TEST(MlpTrainer, AdamsFirstStepIsLrTimesTheGradientsSign) {
  const double lr = 1e-3;
  MlpTrainer t(*g_ctx, small_config(Optimizer::kAdam, lr));
  const std::vector<float> w0 = t.weights();
  StepResult r = t.gradients(0);
  const std::vector<float> g = t.gradients_host();
  t.update(r);
  const std::vector<float> w1 = t.weights();
  int checked = 0;
  for (size_t i = 0; i < w0.size(); ++i) {
    if (std::fabs(g[i]) < 1e-5) continue;  // eps 1e-8 shrinks only steps of tiny gradients
    ++checked;
    const double want = w0[i] - lr * (g[i] > 0 ? 1.0 : -1.0);
    ASSERT_NEAR(w1[i], want, 1e-6) << i << ": gradient " << g[i];
  }
  EXPECT_GT(checked, static_cast<int>(w0.size()) / 2);
}

}  // namespace
}  // namespace cgemm::launcher

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  uint64_t seed = std::random_device{}();
  MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  cgemm::launcher::g_seed = seed;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  cgemm::launcher::g_ctx =
      std::make_unique<cgemm::Context>(MPI_COMM_WORLD, cgemm::MeshConfig{.dp = 1, .tp = 0},
                                       cgemm::BackendKind::kCpu, cgemm::OverlapOptions{});
  const int rc = RUN_ALL_TESTS();
  cgemm::launcher::g_ctx.reset();
  MPI_Finalize();
  return rc;
}
