// The transport layer's shared pieces without MPI or CUDA: the one validation of an exchange
// group, the one choice of a transport per peer (can_connect, in order of preference), and
// the split of a group over the chosen transports.

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "cgemm/collective/transport.hpp"
#include "cgemm/core/error.hpp"

namespace cgemm {
namespace {

// A transport that reaches the peers it is told to and records what it was asked to start.
class FakeTransport final : public Transport {
 public:
  FakeTransport(std::string name, std::vector<int> reach) : name_(std::move(name)), reach_(reach) {}
  std::string name() const override { return name_; }
  std::string describe() const override { return name_; }
  std::string capture_refusal() const override { return ""; }
  bool can_connect(int peer) const override {
    for (int p : reach_) {
      if (p == peer) return true;
    }
    return false;
  }
  void attach(const SymmetricBuffer&) override {}
  void detach(const SymmetricBuffer&) noexcept override {}
  int64_t start(std::span<const Exchange> group, void*) override {
    started.emplace_back(group.begin(), group.end());
    return static_cast<int64_t>(started.size());
  }
  void wait(int64_t) override {}

  std::vector<std::vector<Exchange>> started;

 private:
  std::string name_;
  std::vector<int> reach_;
};

std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Transport, ValidateRefusesEachMalformedExchange) {
  char storage[64];
  const SymmetricBuffer buf{storage, sizeof(storage), 0};
  const char src[16] = {};
  const Exchange good{src, 16, 1, 0, 2, 16, &buf, "good"};
  EXPECT_NO_THROW(validate_exchange_group({&good, 1}, 0, 4, "test"));

  Exchange to_self = good;
  to_self.send_peer = 0;
  EXPECT_NE(what_of([&] {
              validate_exchange_group({&to_self, 1}, 0, 4, "test");
            }).find("peers must be other ranks"),
            std::string::npos);
  Exchange beyond = good;
  beyond.recv_peer = 4;
  EXPECT_NE(what_of([&] {
              validate_exchange_group({&beyond, 1}, 0, 4, "test");
            }).find("peers must be other ranks"),
            std::string::npos);
  Exchange outside = good;
  outside.recv_offset = 56;  // 56 + 16 > 64
  const std::string w = what_of([&] { validate_exchange_group({&outside, 1}, 0, 4, "test"); });
  EXPECT_NE(w.find("outside the destination's 64 bytes"), std::string::npos) << w;
  EXPECT_NE(w.find("test: exchange 'good'"), std::string::npos) << w;
  Exchange no_dst = good;
  no_dst.dst = nullptr;
  EXPECT_NE(what_of([&] {
              validate_exchange_group({&no_dst, 1}, 0, 4, "test");
            }).find("no destination"),
            std::string::npos);
  Exchange null_src = good;
  null_src.src = nullptr;
  EXPECT_NE(what_of([&] {
              validate_exchange_group({&null_src, 1}, 0, 4, "test");
            }).find("null source"),
            std::string::npos);
}

TEST(Transport, ChoosesTheFirstThatReachesEachPeer) {
  FakeTransport ce("ce", {1, 2}), nccl("nccl", {1, 2, 3});
  Transport* const offered[] = {&ce, &nccl};
  const std::vector<Transport*> chosen = choose_transports(offered, 0, 4, "test");
  ASSERT_EQ(chosen.size(), 4u);
  EXPECT_EQ(chosen[0], nullptr);
  EXPECT_EQ(chosen[1], &ce);
  EXPECT_EQ(chosen[2], &ce);
  EXPECT_EQ(chosen[3], &nccl);

  FakeTransport partial("partial", {1});
  Transport* const only[] = {&partial};
  const std::string w = what_of([&] { choose_transports(only, 0, 3, "test"); });
  EXPECT_NE(w.find("no transport reaches tp rank 2 (offered: partial)"), std::string::npos) << w;
}

TEST(Transport, StartGroupSplitsByTransport) {
  FakeTransport ce("ce", {1, 2}), nccl("nccl", {3});
  Transport* const offered[] = {&ce, &nccl};
  const std::vector<Transport*> chosen = choose_transports(offered, 0, 4, "test");
  char storage[64];
  const SymmetricBuffer buf{storage, sizeof(storage), 0};
  const Exchange group[] = {{storage, 8, 1, 0, 2, 8, &buf, "a"},
                            {storage, 8, 3, 16, 3, 24, &buf, "b"},
                            {storage, 8, 2, 32, 1, 40, &buf, "c"}};
  const StartedGroup g = start_group(chosen, group, nullptr, "test");
  ASSERT_EQ(g.parts.size(), 2u);
  EXPECT_EQ(g.parts[0].first, &ce);
  EXPECT_EQ(g.parts[1].first, &nccl);
  ASSERT_EQ(ce.started.size(), 1u);
  ASSERT_EQ(ce.started[0].size(), 2u);
  EXPECT_STREQ(ce.started[0][0].label, "a");
  EXPECT_STREQ(ce.started[0][1].label, "c");
  ASSERT_EQ(nccl.started.size(), 1u);
  EXPECT_STREQ(nccl.started[0][0].label, "b");

  const Exchange mixed{storage, 8, 1, 0, 3, 8, &buf, "mixed"};
  const std::string w = what_of([&] { start_group(chosen, {&mixed, 1}, nullptr, "test"); });
  EXPECT_NE(w.find("one exchange must use one transport"), std::string::npos) << w;
}

}  // namespace
}  // namespace cgemm
