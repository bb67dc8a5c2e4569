// The engine's open points (runtime/src/program.hpp, engine.cpp): the caller's operand table,
// the check that every slot a program uses is bound, the kinds table, and a side-band tensor
// riding the all-gather ring beside each chunk. Recording backend; no MPI, no GPU.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "cgemm/core/error.hpp"
#include "collective_gemm.hpp"
#include "engine.hpp"
#include "planning.hpp"
#include "recording_backend.hpp"

namespace cgemm {
namespace {

using testing::RecordingBackend;

PlannedGemm plan(CollectiveOp op, int tp, int rank, int pieces = 1, bool bias = false) {
  PlanningMesh m;
  m.tp = tp;
  m.tp_rank = rank;
  PlanningOptions opt;
  opt.backend = BackendKind::kCpu;
  opt.overlap.chunks_per_rank = pieces;
  return plan_gemm_programs(tensor_sequence_parallel_gemm(m, "g", op, 2, 16 * tp, 32, 8 * tp,
                                                          DType::kBFloat16, bias, false),
                            m, opt);
}

TEST(Operands, SlotsKnowWhetherTheCallWritesThem) {
  int lhs = 0, rhs = 0, out = 0;
  Operands x(&lhs, &rhs, nullptr, &out);
  EXPECT_EQ(x.input(Operand::kLhs), &lhs);
  EXPECT_EQ(x.output(Operand::kOut), &out);
  EXPECT_FALSE(x.has(Operand::kBias));
  EXPECT_THROW(x.output(Operand::kRhs), Error);
  EXPECT_THROW(x.set_input(Operand::kOut, &lhs), Error);
  EXPECT_EQ(Operands::name(Operand::kBias), "bias");
  EXPECT_EQ(kOperandSlots.size(), Operands::index(Operand::kOut) + 1);
}

TEST(Program, OperandsUsedNameEverySlotAndNoOther) {
  const PlannedGemm with = plan(CollectiveOp::kReduceScatter, 2, 0, 1, true);
  EXPECT_EQ(with.kind.overlapped.operands_used(),
            (std::vector<Operand>{Operand::kLhs, Operand::kRhs, Operand::kBias, Operand::kOut}));
  const PlannedGemm without = plan(CollectiveOp::kReduceScatter, 2, 0);
  EXPECT_EQ(without.kind.overlapped.operands_used(),
            (std::vector<Operand>{Operand::kLhs, Operand::kRhs, Operand::kOut}));
  // The benchmark's collective alone reads lhs and writes out only.
  EXPECT_EQ(plan(CollectiveOp::kAllGather, 2, 0).kind.collective_only.operands_used(),
            (std::vector<Operand>{Operand::kLhs}));
}

TEST(Engine, AWriteToACallersInputIsRefused) {
  RecordingBackend be(2, 0, 1);
  Engine engine(be, 0);
  Program p;
  p.ops.push_back(ReorderOp{ReorderKind::kTpspLeading,
                            {2, 4, 8},
                            1,
                            {Operand::kOut},
                            {Operand::kLhs},
                            DType::kBFloat16,
                            0});
  char buf[64];
  EXPECT_THROW(engine.run(p, Operands(buf, buf, nullptr, buf)), Error);
}

TEST(CollectiveGemmKinds, FirstMatchingRowWinsAndNoneIsAnError) {
  GemmGeometry g;
  g.name = "x";
  g.collective = CollectiveOp::kAllGather;
  EXPECT_STREQ(choose_collective_gemm(g).name, "all-gather GEMM");
  g.collective = CollectiveOp::kReduceScatter;
  EXPECT_STREQ(choose_collective_gemm(g).name, "reduce-scatter GEMM");
  g.collective = CollectiveOp::kNone;
  EXPECT_STREQ(choose_collective_gemm(g).name, "plain GEMM");
  g.collective = static_cast<CollectiveOp>(77);
  try {
    choose_collective_gemm(g);
    FAIL() << "no row should match";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GEMM 'x'"), std::string::npos) << e.what();
  }
}

// A side-band tensor (FP8's scale_inv tomorrow; the bias slot stands in for it here) travels
// whole with the first piece of every chunk, into its own tp slots after the lhs chunks', and
// every rank's halves pair up with its peers'.
TEST(AllGatherRing, SideBandTravelsWithEveryChunk) {
  constexpr int kTp = 4, kPieces = 2;
  constexpr size_t kSideBytes = 4;
  std::map<std::pair<int, int>, std::vector<std::tuple<size_t, size_t>>> sent, received;
  for (int rank = 0; rank < kTp; ++rank) {
    const PlannedGemm planned = plan(CollectiveOp::kAllGather, kTp, rank, kPieces);
    GemmGeometry g = planned.geometry;
    const size_t lhs_ring = g.chunk_lhs_bytes() * kTp;
    g.lhs_side_band.push_back({"lhs scale_inv", Operand::kBias, kSideBytes});
    const CollectiveGemm k = make_all_gather_gemm(g);
    EXPECT_EQ(k.overlapped.workspace.ring, static_cast<int64_t>(lhs_ring + kTp * kSideBytes));

    RecordingBackend be(kTp, rank, 3);
    const PlanBytes& b = planned.description.bytes;
    const Operands x(be.region("lhs", static_cast<size_t>(b.lhs)),
                     be.region("rhs", static_cast<size_t>(b.rhs)), be.region("side", kSideBytes),
                     be.region("out", static_cast<size_t>(b.out)));
    Engine engine(be, rank);
    engine.run(k.overlapped, x);
    int side_transfers = 0;
    for (const auto& x : be.posted()) {
      sent[{rank, x.send_peer}].emplace_back(x.bytes, x.send_offset);
      received[{x.recv_peer, rank}].emplace_back(x.bytes, x.recv_offset);
      if (x.bytes == kSideBytes) {
        ++side_transfers;
        EXPECT_GE(x.recv_offset, lhs_ring);
        EXPECT_EQ((x.recv_offset - lhs_ring) % kSideBytes, 0u);
      }
    }
    // One side band per chunk that arrives, once (not per piece).
    EXPECT_EQ(side_transfers, kTp - 1) << "rank " << rank;
    const auto& calls = be.calls();
    const bool named = std::any_of(calls.begin(), calls.end(), [](const std::string& c) {
      return c.find("lhs scale_inv -> rank") != std::string::npos;
    });
    EXPECT_TRUE(named);
  }
  EXPECT_EQ(sent, received);
}

TEST(GemmPlanOperands, ProgramsNameOnlyTheSlotsThePlanHas) {
  // A plain GEMM without a bias never reads the bias slot: null is fine there.
  const PlannedGemm p = plan(CollectiveOp::kNone, 1, 0);
  const auto used = p.kind.overlapped.operands_used();
  EXPECT_EQ(std::count(used.begin(), used.end(), Operand::kBias), 0);
}

}  // namespace
}  // namespace cgemm
