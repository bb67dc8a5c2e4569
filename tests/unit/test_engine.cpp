// The engine's open points (runtime/src/program/program.hpp, engine.cpp): the caller's operand
// table, the check that every slot a program uses is bound, the kinds table, and a side-band tensor
// riding the all-gather ring beside each chunk. Recording backend; no MPI, no GPU.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "cgemm/core/error.hpp"
#include "cgemm/runtime/grouped_plan.hpp"
#include "kinds/collective_gemm.hpp"
#include "plan/planning.hpp"
#include "program/engine.hpp"
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
  EXPECT_THROW(x.set_output(Operand::kLhs, &out), Error);
  EXPECT_EQ(Operands::name(Operand::kBias), "bias");
  EXPECT_EQ(kOperandSlots.size(), Operands::index(Operand::kScaleInvOut) + 1);
  // QuantizedTensor::quantize_into's outputs are written.
  EXPECT_EQ(Operands::name(Operand::kColwiseOut), "colwise_out");
  EXPECT_EQ(Operands::name(Operand::kScaleInvOut), "scale_inv_out");
  EXPECT_NO_THROW(x.set_output(Operand::kColwiseOut, &out));
  EXPECT_THROW(x.set_input(Operand::kScaleInvOut, &lhs), Error);
  EXPECT_EQ(Operands::name(Operand::kGatheredLhs), "gathered_lhs");
  EXPECT_NO_THROW(x.set_output(Operand::kGatheredLhs, &out));
  // The grouped GEMM's slots (grouped_plan.hpp) are read only.
  const std::pair<Operand, const char*> grouped[] = {{Operand::kGroupSizes, "group_sizes"},
                                                     {Operand::kHostGroupSizes, "host_group_sizes"},
                                                     {Operand::kLhsScaleInv, "lhs_scale_inv"},
                                                     {Operand::kRhsScaleInv, "rhs_scale_inv"}};
  for (const auto& [slot, name] : grouped) {
    EXPECT_EQ(Operands::name(slot), name);
    EXPECT_THROW(x.set_output(slot, &out), Error) << name;
    EXPECT_EQ(x.set_input(slot, &lhs).input(slot), &lhs) << name;
  }
}

TEST(Program, OperandsUsedNameEverySlotAndNoOther) {
  const PlannedGemm with = plan(CollectiveOp::kReduceScatter, 2, 0, 1, true);
  EXPECT_EQ(with.kind.overlapped.operands_used(),
            (std::vector<Operand>{Operand::kLhs, Operand::kRhs, Operand::kBias, Operand::kOut}));
  const PlannedGemm without = plan(CollectiveOp::kReduceScatter, 2, 0);
  EXPECT_EQ(without.kind.overlapped.operands_used(),
            (std::vector<Operand>{Operand::kLhs, Operand::kRhs, Operand::kOut}));
  // The benchmark's collective alone reads the lhs into a workspace: no other slot.
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

TEST(Program, WritesToACallersInputAreRefusedAtPlanning) {
  Program p;
  p.ops.push_back(SumOp{{{Operand::kOut}},
                        DType::kBFloat16,
                        8,
                        std::nullopt,
                        0,
                        {Operand::kRhs},
                        DType::kBFloat16,
                        0});
  try {
    p.check_writes("g");
    FAIL() << "a write to rhs must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GEMM 'g'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rhs"), std::string::npos) << e.what();
  }
  // Every planned program of every kind writes only the output among the caller's slots.
  for (CollectiveOp op :
       {CollectiveOp::kNone, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
    const PlannedGemm planned = plan(op, 2, 1, 2, true);
    for (const Program* q : {&planned.kind.overlapped, &planned.kind.sequential,
                             &planned.kind.gemm_only, &planned.kind.collective_only}) {
      EXPECT_NO_THROW(q->check_writes("g"));
    }
  }
}

TEST(Program, RequireOperandsNamesTheMissingSlot) {
  int b = 0;
  const std::vector<Operand> used{Operand::kLhs, Operand::kRhs, Operand::kBias, Operand::kOut};
  const auto message = [&](const Operands& x) {
    try {
      require_operands("up", used, x);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message(Operands(&b, &b, &b, &b)), "");
  EXPECT_EQ(message(Operands(&b, &b, nullptr, &b)),
            "GEMM 'up' was planned with a bias but got none");
  EXPECT_EQ(message(Operands(&b, nullptr, &b, &b)),
            "GEMM 'up': operand 'rhs' is null; the plan reads or writes it");
  EXPECT_EQ(message(Operands(&b, &b, &b, nullptr)),
            "GEMM 'up': operand 'out' is null; the plan reads or writes it");
  // A slot the plan does not use may stay null.
  EXPECT_NO_THROW(require_operands("up", {Operand::kLhs}, Operands(&b, nullptr, nullptr, nullptr)));
}

// One engine running a plan's four programs twice allocates its workspaces in the first round
// only: plans keep their buffers between calls.
TEST(Engine, WorkspacesAreAllocatedByPrepareOnly) {
  const PlannedGemm planned = plan(CollectiveOp::kAllGather, 4, 2, 1, true);
  RecordingBackend be(4, 2, 3);
  const PlanBytes& b = planned.description.bytes;
  const Operands x(
      be.region("lhs", static_cast<size_t>(b.lhs)), be.region("rhs", static_cast<size_t>(b.rhs)),
      be.region("bias", static_cast<size_t>(b.bias)), be.region("out", static_cast<size_t>(b.out)));
  Engine engine(be, 2);
  const auto allocations = [&] {
    return std::count_if(be.calls().begin(), be.calls().end(),
                         [](const std::string& c) { return c.rfind("allocate", 0) == 0; });
  };
  const std::vector<const Program*> programs{&planned.kind.overlapped, &planned.kind.sequential,
                                             &planned.kind.gemm_only,
                                             &planned.kind.collective_only};
  // A program that was not prepared is refused, naming the workspace, before it issues a thing.
  const size_t before = be.calls().size();
  try {
    engine.run(planned.kind.overlapped, x);
    ADD_FAILURE() << "an unprepared program ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("workspace ring"), std::string::npos) << e.what();
  }
  EXPECT_EQ(be.calls().size(), before);
  engine.prepare(programs);
  const auto first = allocations();
  EXPECT_GE(first, 2);  // the ring and the gathered lhs at least
  for (const Program* p : programs) engine.run(*p, x);
  for (const Program* p : programs) engine.run(*p, x);
  EXPECT_EQ(allocations(), first);
  // Preparing again allocates nothing new: every workspace is already large enough.
  engine.prepare(programs);
  EXPECT_EQ(allocations(), first);
}

// GemmPlan prepares the programs execute() runs: the workspaces it then holds are what the
// memory check counts (PlanBytes::workspace), for every collective.
TEST(Engine, PreparedWorkspacesAreWhatPlanBytesCounts) {
  for (CollectiveOp op :
       {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, CollectiveOp::kNone}) {
    const PlannedGemm planned = plan(op, 4, 1, 2, true);
    RecordingBackend be(4, 1, 3);
    Engine engine(be, 1);
    engine.prepare(execute_programs(planned.kind));
    int64_t allocated = 0;
    for (const std::string& c : be.calls()) {
      size_t bytes = 0;
      if (std::sscanf(c.c_str(), "allocate_symmetric %zu", &bytes) == 1 ||
          std::sscanf(c.c_str(), "allocate %zu", &bytes) == 1) {
        allocated += static_cast<int64_t>(bytes);
      }
    }
    EXPECT_EQ(allocated, planned.description.bytes.workspace) << collective_name(op);
    if (op != CollectiveOp::kNone) {
      EXPECT_GT(allocated, 0) << collective_name(op);
    }
  }
}

TEST(CollectiveGemmKinds, FirstMatchingRowWinsAndNoneIsAnError) {
  // Two rows match an all-gather GEMM: the first wins, as a refining kind placed above.
  const std::vector<CollectiveGemmKind> kinds{
      {"refined", [](const GemmGeometry& g) { return g.in == DType::kFloat16; },
       make_all_gather_gemm},
      {"general", [](const GemmGeometry&) { return true; }, make_all_gather_gemm}};
  GemmGeometry h;
  h.in = DType::kFloat16;
  EXPECT_STREQ(choose_collective_gemm(h, kinds).name, "refined");
  h.in = DType::kBFloat16;
  EXPECT_STREQ(choose_collective_gemm(h, kinds).name, "general");

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
    g.lhs_side_band.push_back({"lhs scale_inv", Ref{Operand::kBias}, kSideBytes});
    const CollectiveGemm k = make_all_gather_gemm(g);
    EXPECT_EQ(k.overlapped.workspace.ring, static_cast<int64_t>(lhs_ring + kTp * kSideBytes));

    RecordingBackend be(kTp, rank, 3);
    const PlanBytes& b = planned.description.bytes;
    const Operands x(be.region("lhs", static_cast<size_t>(b.lhs)),
                     be.region("rhs", static_cast<size_t>(b.rhs)), be.region("side", kSideBytes),
                     be.region("out", static_cast<size_t>(b.out)));
    Engine engine(be, rank);
    const Program* overlapped = &k.overlapped;
    engine.prepare({&overlapped, 1});
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

// The data of an all-gather ring, moved as the transfers say (each exchange at once on every
// rank, in start order): at the end every rank holds every other rank's lhs chunk and side
// band in the slots its GEMMs read, for tp 2 to 8, one and two pieces, aggregate on and off.
TEST(AllGatherRing, EveryChunkAndSideBandLandsInItsSlot) {
  constexpr size_t kSide = 6;
  int cases = 0;
  for (int tp = 2; tp <= 8; ++tp) {
    for (int pieces : {1, 2}) {
      for (bool aggregate : {false, true}) {
        SCOPED_TRACE("tp " + std::to_string(tp) + " pieces " + std::to_string(pieces) +
                     (aggregate ? " aggregate" : ""));
        std::vector<std::unique_ptr<RecordingBackend>> be;
        std::vector<std::vector<unsigned char>> lhs(tp), side(tp);
        size_t chunk = 0, lhs_ring = 0;
        for (int r = 0; r < tp; ++r) {
          PlanningMesh m;
          m.tp = tp;
          m.tp_rank = r;
          PlanningOptions opt;
          opt.backend = BackendKind::kCpu;
          opt.overlap.chunks_per_rank = pieces;
          opt.overlap.aggregate_all_gather = aggregate;
          // batch 1, 4 rows per piece: 8 * tp rows of 8 columns.
          const PlannedGemm planned = plan_gemm_programs(
              tensor_sequence_parallel_gemm(m, "g", CollectiveOp::kAllGather, 1, 8 * tp, 8, 2 * tp,
                                            DType::kBFloat16, false, false),
              m, opt);
          GemmGeometry g = planned.geometry;
          g.lhs_side_band.push_back({"scale_inv", Ref{Operand::kBias}, kSide});
          const CollectiveGemm k = make_all_gather_gemm(g);
          chunk = g.chunk_lhs_bytes();
          lhs_ring = chunk * static_cast<size_t>(tp);
          be.push_back(std::make_unique<RecordingBackend>(tp, r, 3));
          auto* l = static_cast<unsigned char*>(be[r]->region("lhs", chunk));
          auto* s = static_cast<unsigned char*>(be[r]->region("side", kSide));
          for (size_t i = 0; i < chunk; ++i) l[i] = static_cast<unsigned char>(r * 37 + i * 7);
          for (size_t i = 0; i < kSide; ++i) s[i] = static_cast<unsigned char>(200 + r * 5 + i);
          lhs[r].assign(l, l + chunk);
          side[r].assign(s, s + kSide);
          const PlanBytes& b = planned.description.bytes;
          Engine engine(*be[r], r);
          const Program* overlapped = &k.overlapped;
          engine.prepare({&overlapped, 1});
          engine.run(k.overlapped, Operands(l, be[r]->region("rhs", static_cast<size_t>(b.rhs)), s,
                                            be[r]->region("out", static_cast<size_t>(b.out))));
        }
        // Move the bytes: exchange i on every rank together, sources read before any write.
        int last = -1;
        for (int r = 0; r < tp; ++r) {
          for (const auto& x : be[r]->posted()) last = std::max(last, x.exchange);
        }
        for (int i = 0; i <= last; ++i) {
          struct Write {
            int to;
            size_t at;
            std::vector<unsigned char> bytes;
          };
          std::vector<Write> writes;
          for (int r = 0; r < tp; ++r) {
            for (const auto& x : be[r]->posted()) {
              if (x.exchange != i) continue;
              const auto* src = static_cast<const unsigned char*>(x.src);
              writes.push_back({x.send_peer, x.send_offset, {src, src + x.bytes}});
            }
          }
          for (const Write& w : writes) {
            std::copy(w.bytes.begin(), w.bytes.end(), be[w.to]->ring() + w.at);
          }
        }
        for (int r = 0; r < tp; ++r) {
          const unsigned char* ring = reinterpret_cast<const unsigned char*>(be[r]->ring());
          ASSERT_NE(ring, nullptr);
          for (int c = 0; c < tp; ++c) {
            if (c == r) continue;
            const unsigned char* data = ring + static_cast<size_t>(c) * chunk;
            EXPECT_TRUE(std::equal(lhs[c].begin(), lhs[c].end(), data))
                << "rank " << r << " chunk " << c;
            const unsigned char* sb = ring + lhs_ring + static_cast<size_t>(c) * kSide;
            EXPECT_TRUE(std::equal(side[c].begin(), side[c].end(), sb))
                << "rank " << r << " side band " << c;
          }
        }
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 28);
}

// An all-gather GEMM's gathering paths are its plain paths plus the hand-out: one copy per
// piece behind that piece's GEMM on its stream (overlapped), the gather into the caller's slot
// (sequential). The plain paths never name the slot, so a call without it runs them unchanged.
// Other kinds have none, and say why.
TEST(GemmPlanOperands, OnlyAllGatherGemmsHandOutTheGatheredLhs) {
  const auto count = [](const Program& p, auto pred) {
    return std::count_if(p.ops.begin(), p.ops.end(), pred);
  };
  const auto is_copy = [](const Op& op) { return std::holds_alternative<CopyOp>(op); };
  for (int pieces : {1, 2}) {
    const PlannedGemm p = plan(CollectiveOp::kAllGather, 4, 1, pieces);
    ASSERT_TRUE(p.kind.overlapped_gathering && p.kind.sequential_gathering);
    EXPECT_EQ(p.kind.no_gathered_lhs, "");
    EXPECT_EQ(p.kind.gathered_lhs, (Shape{2, 64, 32}));  // batch 2, 16 rows per rank, k 32
    for (const Program* q : {&p.kind.overlapped, &p.kind.sequential}) {
      const auto used = q->operands_used();
      EXPECT_EQ(std::count(used.begin(), used.end(), Operand::kGatheredLhs), 0);
      EXPECT_EQ(count(*q, is_copy), 0);
    }
    const Program& o = *p.kind.overlapped_gathering;
    EXPECT_EQ(o.ops.size(), p.kind.overlapped.ops.size() + static_cast<size_t>(4 * pieces));
    EXPECT_EQ(count(o, is_copy), 4 * pieces);
    // Each copy follows a GEMM on the same stream, reading the same lhs.
    for (size_t i = 0; i < o.ops.size(); ++i) {
      if (const auto* c = std::get_if<CopyOp>(&o.ops[i])) {
        ASSERT_GT(i, 0u);
        const auto* gemm = std::get_if<GemmOp>(&o.ops[i - 1]);
        ASSERT_NE(gemm, nullptr);
        EXPECT_EQ(c->stream, gemm->stream);
        EXPECT_EQ(c->src.buf, gemm->lhs.buf);
        EXPECT_EQ(c->src.offset, gemm->lhs.offset);
        EXPECT_EQ(c->dst.buf, (Ref{Operand::kGatheredLhs}.buf));
      }
    }
    for (const Program* q : {&o, &*p.kind.sequential_gathering}) {
      const auto used = q->operands_used();
      EXPECT_EQ(std::count(used.begin(), used.end(), Operand::kGatheredLhs), 1);
    }
  }
  for (CollectiveOp op : {CollectiveOp::kReduceScatter, CollectiveOp::kNone}) {
    const PlannedGemm p = plan(op, 2, 0);
    EXPECT_FALSE(p.kind.overlapped_gathering || p.kind.sequential_gathering);
    EXPECT_TRUE(p.kind.gathered_lhs.empty());
    EXPECT_NE(p.kind.no_gathered_lhs.find("GEMM 'g': gathered_lhs is an output of all-gather"),
              std::string::npos)
        << p.kind.no_gathered_lhs;
  }
}

// The engine's copy: `count` blocks, each at its stride on both sides, on the op's stream.
TEST(Engine, CopyOpMovesEveryBlockAtItsStrides) {
  RecordingBackend be(1, 0, 2);
  Engine engine(be, 0);
  void* src = be.region("lhs", 32);
  void* dst = be.region("gathered", 64);
  Program p;
  p.ops.push_back(CopyOp{{Operand::kLhs, 4}, {Operand::kGatheredLhs, 2}, 3, 3, 8, 20, 1, "c"});
  Operands x(src, nullptr, nullptr, nullptr);
  x.set_output(Operand::kGatheredLhs, dst);
  engine.run(p, x);
  EXPECT_EQ(be.calls(), (std::vector<std::string>{"copy s1 lhs+4 -> gathered+2 3",
                                                  "copy s1 lhs+12 -> gathered+22 3",
                                                  "copy s1 lhs+20 -> gathered+42 3"}));
}

TEST(GemmPlanOperands, ProgramsNameOnlyTheSlotsThePlanHas) {
  // A plain GEMM without a bias never reads the bias slot: null is fine there.
  const PlannedGemm p = plan(CollectiveOp::kNone, 1, 0);
  const auto used = p.kind.overlapped.operands_used();
  EXPECT_EQ(std::count(used.begin(), used.end(), Operand::kBias), 0);
}

}  // namespace
}  // namespace cgemm

namespace cgemm {
namespace {

// The capture traits (program.hpp): a bf16 collective GEMM is capturable where its transport
// is, and names its first exchange where it is not; current scaling's amax reduction goes
// through the host and is refused on any transport.
TEST(Capture, ProgramsAnswerByOpKindAndTransport) {
  const PlannedGemm bf16 = plan(CollectiveOp::kAllGather, 2, 0);
  EXPECT_EQ(capture_refusal(bf16.kind.overlapped, ""), "");
  EXPECT_EQ(capture_refusal(bf16.kind.sequential, ""), "");
  const std::string refused = capture_refusal(bf16.kind.overlapped, "the transport says no");
  EXPECT_EQ(refused.rfind("exchange 'g step 0", 0), 0u) << refused;
  EXPECT_NE(refused.find("cannot be captured: the transport says no"), std::string::npos)
      << refused;
  EXPECT_NE(capture_refusal(bf16.kind.sequential, "no").find("all-gather 'g sequential"),
            std::string::npos);

  PlanningMesh m;
  m.tp = 2;
  GemmDesc d = tensor_sequence_parallel_gemm(m, "q", CollectiveOp::kAllGather, 2, 32, 32, 16,
                                             DType::kBFloat16, false, false);
  d.quantization.mode = ScalingMode::kCurrentTensorScaling;
  PlanningOptions opt;
  opt.backend = BackendKind::kCpu;
  const PlannedGemm current = plan_gemm_programs(d, m, opt);
  // The world's amax runs over the groups' collectives (on the device on the CUDA backend): it
  // is captured wherever the transports are, and refused by name where they are not.
  EXPECT_EQ(capture_refusal(current.kind.overlapped, ""), "");
  const std::string amax = capture_refusal(current.kind.overlapped, "the transport says no");
  EXPECT_EQ(amax.rfind("amax reduction", 0), 0u) << amax;
  EXPECT_NE(amax.find("the transport says no"), std::string::npos) << amax;
}

// A grouped GEMM plan (grouped_plan.hpp) on the recording backend: everything it allocates or
// prepares comes when it is made, a call on the caller's stream is bracketed by it, and a call
// it refuses issues nothing.
TEST(GroupedPlanEngine, PreparedOnceBracketedAndRefusedBeforeIssuing) {
  RecordingBackend be(1, 0, 3);
  GroupedGemmDesc d;
  d.name = "e";
  d.num_groups = 2;
  d.lhs_shape = {16, 8};
  d.rhs_shape = {2, 4, 8};
  GroupedGemmPlan plan(be, d);
  const size_t made = be.calls().size();
  const std::vector<int32_t> sizes = {10, 6};
  void* lhs = be.region("lhs", 16 * 8 * 2);
  void* rhs = be.region("rhs", 2 * 4 * 8 * 2);
  void* out = be.region("out", 16 * 4 * 2);
  auto* dev = static_cast<int32_t*>(be.region("group_sizes", 8));
  std::copy(sizes.begin(), sizes.end(), dev);
  const Operands x(lhs, rhs, nullptr, out);
  const auto refused = [&](Operands y, const std::string& message) {
    const size_t before = be.calls().size();
    try {
      plan.execute(y, reinterpret_cast<void*>(0x1));
      ADD_FAILURE() << "no error; expected: " << message;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
    EXPECT_EQ(be.calls().size(), before) << message;
  };
  refused(x, "grouped GEMM 'e': the group sizes pointer is null");
  refused(Operands(x)
              .set_input(Operand::kGroupSizes, dev)
              .set_input(Operand::kHostGroupSizes, sizes.data()),
          "grouped GEMM 'e': group sizes given twice (group_sizes in backend memory and "
          "host_group_sizes in host memory); give one");
  refused(Operands(x).set_input(Operand::kGroupSizes, dev).set_output(Operand::kGatheredLhs, out),
          "grouped GEMM 'e': a grouped GEMM gathers no lhs; gathered_lhs must be null");
  refused(Operands(x).set_input(Operand::kGroupSizes, dev).set_input(Operand::kLhsScaleInv, dev),
          "grouped GEMM 'e' has bfloat16 inputs: execute_scaled is for FP8 plans, call execute");
  plan.execute(Operands(x).set_input(Operand::kGroupSizes, dev), reinterpret_cast<void*>(0x1));
  plan.execute(sizes, lhs, rhs, nullptr, out);
  std::vector<std::string> calls(be.calls().begin() + static_cast<ptrdiff_t>(made),
                                 be.calls().end());
  ASSERT_GE(calls.size(), 4u);
  EXPECT_EQ(calls.front(), "after external");
  EXPECT_EQ(calls[1], "copy_to_host group_sizes+0 8 -> host");
  for (const std::string& c : calls) {
    EXPECT_NE(c.rfind("allocate", 0), 0u) << c;
    EXPECT_NE(c.rfind("prepare_grouped_gemm", 0), 0u) << c;
  }
  int gemms = 0, brackets = 0;
  for (const std::string& c : calls) {
    gemms += c.rfind("gemm s0", 0) == 0;
    brackets += c == "external after";
  }
  EXPECT_EQ(gemms, 4);     // two groups, two calls
  EXPECT_EQ(brackets, 1);  // the first call's stream only
  EXPECT_EQ(plan.loop_fallbacks(), 0);
}

}  // namespace
}  // namespace cgemm
