// Golden programs: every collective GEMM kind's programs, planned without MPI (plan_gemm) for
// tp 2 to 8 (ranks 0, 1 and tp - 1) and run by the engine on a backend that only records its calls,
// compared with the op lists in tests/unit/golden/. A change of a schedule shows here as a diff of
// readable lines; CGEMM_UPDATE_GOLDEN=1 rewrites the files after a deliberate change (review the
// diff). Independently of the files, the transfers every rank posts must pair up with its peers'.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cgemm/core/env.hpp"
#include "cgemm/runtime/grouped_plan.hpp"
#include "plan/planning.hpp"
#include "program/engine.hpp"
#include "recording_backend.hpp"

namespace cgemm {
namespace {

using testing::RecordingBackend;

struct Case {
  CollectiveOp op = CollectiveOp::kAllGather;
  int tp = 2;
  int64_t batch = 1;
  bool bias = false;
  bool aggregate = false;
  int pieces = 1;
  int streams = 3;

  std::string title(int rank) const {
    return std::string(collective_name(op)) + " tp=" + std::to_string(tp) +
           " rank=" + std::to_string(rank) + " batch=" + std::to_string(batch) +
           " bias=" + std::to_string(bias ? 1 : 0) +
           " aggregate=" + std::to_string(aggregate ? 1 : 0) +
           " chunks_per_rank=" + std::to_string(pieces) + " streams=" + std::to_string(streams);
  }
};

PlannedGemm plan(const Case& c, int rank) {
  PlanningMesh m;
  m.tp = c.tp;
  m.tp_rank = rank;
  // Shapes that every tp from 2 to 8 with chunks_per_rank 2 splits (840 = lcm(2..8)).
  GemmDesc d = tensor_sequence_parallel_gemm(m, "g", c.op, c.batch, 1680, 840, 840,
                                             DType::kBFloat16, c.bias, false);
  PlanningOptions opt;
  opt.backend = BackendKind::kCpu;
  opt.overlap.num_max_streams = c.streams;
  opt.overlap.aggregate_all_gather = c.aggregate;
  opt.overlap.chunks_per_rank = c.pieces;
  return plan_gemm_programs(d, m, opt);
}

struct Recorded {
  std::string text;
  std::vector<RecordingBackend::Posted> posted;  // the overlapped program's transfers
};

// Runs the four programs of rank `rank` on a recording backend.
Recorded record(const Case& c, int rank) {
  const PlannedGemm p = plan(c, rank);
  RecordingBackend be(c.tp, rank, c.streams);
  const PlanBytes& b = p.description.bytes;
  const Operands x(be.region("lhs", static_cast<size_t>(b.lhs)),
                   be.region("rhs", static_cast<size_t>(b.rhs)),
                   c.bias ? be.region("bias", static_cast<size_t>(b.bias)) : nullptr,
                   be.region("out", static_cast<size_t>(b.out)));
  Recorded r;
  std::ostringstream os;
  os << "== " << c.title(rank) << "\n";
  const std::vector<std::pair<const char*, const Program*>> programs = {
      {"overlapped", &p.kind.overlapped},
      {"sequential", &p.kind.sequential},
      {"gemm_only", &p.kind.gemm_only},
      {"collective_only", &p.kind.collective_only}};
  for (const auto& [name, program] : programs) {
    Engine engine(be, rank);
    const size_t from = be.calls().size();
    engine.prepare({&program, 1});  // its allocations lead the program's lines
    engine.run(*program, x);
    if (program == &p.kind.overlapped) r.posted = be.posted();
    os << "-- " << name << "\n";
    for (size_t i = from; i < be.calls().size(); ++i) os << be.calls()[i] << "\n";
  }
  r.text = os.str();
  return r;
}

std::vector<Case> cases(CollectiveOp op) {
  std::vector<Case> out;
  const std::vector<int> tps =
      op == CollectiveOp::kNone ? std::vector<int>{1, 2, 4} : std::vector<int>{2, 3, 4, 5, 6, 7, 8};
  for (int tp : tps) {
    out.push_back({.op = op, .tp = tp});
    if (op == CollectiveOp::kNone) {
      out.push_back({.op = op, .tp = tp, .batch = 2, .bias = true});
      continue;
    }
    out.push_back({.op = op, .tp = tp, .batch = 2, .bias = true});
    out.push_back({.op = op, .tp = tp, .pieces = 2, .streams = 2});
    out.push_back({.op = op, .tp = tp, .batch = 2, .pieces = 2});
    if (op == CollectiveOp::kAllGather) out.push_back({.op = op, .tp = tp, .aggregate = true});
  }
  return out;
}

std::string golden_path(CollectiveOp op) {
  return std::string(CGEMM_GOLDEN_DIR) + "/" + std::string(collective_name(op)) + ".txt";
}

// Compares `got` with the file at `path` (or rewrites it under CGEMM_UPDATE_GOLDEN=1).
void compare_golden(const std::string& got, const std::string& path) {
  if (env_flag(env::kUpdateGolden).value_or(false)) {
    std::ofstream(path) << got;
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "missing " << path << " (CGEMM_UPDATE_GOLDEN=1 writes it)";
  std::stringstream want;
  want << in.rdbuf();
  // Line by line, so a failure names the first line that differs.
  std::istringstream a(got), b(want.str());
  std::string la, lb;
  int line = 0;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(a, la));
    const bool more_b = static_cast<bool>(std::getline(b, lb));
    ++line;
    if (!more_a && !more_b) break;
    ASSERT_EQ(more_a, more_b) << path << ": lengths differ at line " << line;
    ASSERT_EQ(la, lb) << path << ":" << line;
  }
}

void check_golden(CollectiveOp op) {
  std::string got;
  for (const Case& c : cases(op)) {
    // The first, second and last rank of the group: the ring's edges and a middle rank.
    for (int rank : std::set<int>{0, 1 % c.tp, c.tp - 1}) got += record(c, rank).text;
  }
  compare_golden(got, golden_path(op));
}

TEST(GoldenPrograms, AllGather) { check_golden(CollectiveOp::kAllGather); }
TEST(GoldenPrograms, ReduceScatter) { check_golden(CollectiveOp::kReduceScatter); }
TEST(GoldenPrograms, PlainGemm) { check_golden(CollectiveOp::kNone); }

// The overlapped and sequential programs of `d` on rank `rank` of tp 2, as a recording backend
// sees them run, under the header line `title`. Pre-quantized operands get their scale_inv
// slots.
std::string record_tp2(const GemmDesc& d, int rank, const std::string& title) {
  const int tp = 2;
  PlanningMesh m;
  m.tp = tp;
  m.tp_rank = rank;
  PlanningOptions opt;
  opt.backend = BackendKind::kCpu;
  const PlannedGemm p = plan_gemm_programs(d, m, opt);
  RecordingBackend be(tp, rank, opt.overlap.num_max_streams);
  const PlanBytes& b = p.description.bytes;
  Operands x(
      be.region("lhs", static_cast<size_t>(b.lhs)), be.region("rhs", static_cast<size_t>(b.rhs)),
      be.region("bias", static_cast<size_t>(b.bias)), be.region("out", static_cast<size_t>(b.out)));
  if (d.quantization.lhs_quantized) {
    x.set_input(Operand::kLhsScaleInv, be.region("lhs_scale_inv", sizeof(float)));
  }
  if (d.quantization.rhs_quantized) {
    x.set_input(Operand::kRhsScaleInv, be.region("rhs_scale_inv", sizeof(float)));
  }
  std::string got = "== " + title + " tp=2 rank=" + std::to_string(rank) + "\n";
  for (const auto& [name, program] : std::vector<std::pair<const char*, const Program*>>{
           {"overlapped", &p.kind.overlapped}, {"sequential", &p.kind.sequential}}) {
    Engine engine(be, rank);
    const size_t from = be.calls().size();
    engine.prepare({&program, 1});
    engine.run(*program, x);
    got += std::string("-- ") + name + "\n";
    for (size_t i = from; i < be.calls().size(); ++i) got += be.calls()[i] + "\n";
  }
  return got;
}

// Quantization wraps any kind's programs (quantization.cpp): one delayed-scaling case per kind
// at tp 2, and MXFP8 (block scales, emulated on the CPU backend) on the all-gather GEMM.
TEST(GoldenPrograms, Quantized) {
  std::string got;
  const std::pair<CollectiveOp, ScalingMode> cases[] = {
      {CollectiveOp::kAllGather, ScalingMode::kDelayedTensorScaling},
      {CollectiveOp::kReduceScatter, ScalingMode::kDelayedTensorScaling},
      {CollectiveOp::kNone, ScalingMode::kDelayedTensorScaling},
      {CollectiveOp::kAllGather, ScalingMode::kMxfp8_1d}};
  for (const auto& [op, mode] : cases) {
    for (int rank = 0; rank < 2; ++rank) {
      GemmDesc d = tensor_sequence_parallel_gemm(PlanningMesh{.tp = 2, .tp_rank = rank}, "q", op, 1,
                                                 256, 256, 256, DType::kBFloat16, true, false);
      d.quantization.mode = mode;
      got += record_tp2(
          d, rank, std::string(collective_name(op)) + " " + std::string(scaling_mode_name(mode)));
    }
  }
  compare_golden(got, std::string(CGEMM_GOLDEN_DIR) + "/quantized.txt");
}

// Pre-quantized operands (issue 42): the all-gather's ring moves the caller's FP8 lhs, only the
// rhs is quantized (the GEMM's scale_inv pointers are not in the recording: test_prequantized
// checks them by value); the reduce-scatter reads the caller's FP8 rhs
// [N, K] and quantizes only the lhs (current scaling: one amax reduced); delayed scaling with both
// given runs no quantization op at all.
TEST(GoldenPrograms, Prequantized) {
  std::string got;
  struct Case {
    CollectiveOp op;
    ScalingMode mode;
    bool lhs, rhs;
  };
  for (const Case& c :
       {Case{CollectiveOp::kAllGather, ScalingMode::kCurrentTensorScaling, true, false},
        Case{CollectiveOp::kReduceScatter, ScalingMode::kCurrentTensorScaling, false, true},
        Case{CollectiveOp::kNone, ScalingMode::kDelayedTensorScaling, true, true}}) {
    for (int rank = 0; rank < 2; ++rank) {
      GemmDesc d = tensor_sequence_parallel_gemm(PlanningMesh{.tp = 2, .tp_rank = rank}, "p", c.op,
                                                 1, 256, 256, 256, DType::kBFloat16, true, false);
      d.quantization.mode = c.mode;
      d.quantization.lhs_quantized = c.lhs;
      d.quantization.rhs_quantized = c.rhs;
      if (c.rhs) {  // the weight's colwise copy [N, K]
        std::swap(d.rhs_shape[0], d.rhs_shape[1]);
        std::swap(d.rhs_spec[0], d.rhs_spec[1]);
        d.contracting_dims.second = {1};
      }
      got += record_tp2(d, rank,
                        std::string(collective_name(c.op)) + " " +
                            std::string(scaling_mode_name(c.mode)) + " pre-quantized" +
                            (c.lhs ? " lhs" : "") + (c.rhs ? " rhs" : ""));
    }
  }
  compare_golden(got, std::string(CGEMM_GOLDEN_DIR) + "/prequantized.txt");
}

// The grouped GEMM's programs (grouped_plan.hpp) as GroupedGemmPlan prepares and runs them on a
// recording backend: ragged rows with a bias, ragged contracting (a weight gradient), and FP8
// ragged rows with a scale_inv per group. Each case: what the plan makes when it is made, a
// call with the sizes in backend memory, one with them in host memory, and the first op a
// CUDA-graph capture would refuse. The recording backend runs the loop, so every group's GEMM
// shows with its offsets.
TEST(GoldenPrograms, Grouped) {
  struct GroupedCase {
    std::string title;
    GroupedGemmDesc desc;
    std::vector<int32_t> sizes;
  };
  std::vector<GroupedCase> cases;
  {
    GroupedGemmDesc d;  // lhs [92, 40] @ rhs [4, 24, 40]^T + bias [4, 24]
    d.name = "moe_up";
    d.num_groups = 4;
    d.lhs_shape = {92, 40};
    d.rhs_shape = {4, 24, 40};
    d.bias_shape = Shape{4, 24};
    cases.push_back({"ragged_rows bfloat16 bias", d, {61, 3, 0, 28}});
  }
  {
    GroupedGemmDesc d;  // x^T [92, 20] (contracting dim 0) @ dy [92, 24] -> [4, 20, 24]
    d.name = "moe_wgrad";
    d.form = GroupedForm::kRaggedContracting;
    d.num_groups = 4;
    d.lhs_shape = {92, 20};
    d.lhs_contracting_dims = {0};
    d.rhs_shape = {92, 24};
    d.rhs_contracting_dims = {0};
    cases.push_back({"ragged_contracting bfloat16", d, {0, 61, 3, 28}});
  }
  {
    GroupedGemmDesc d;  // e4m3 [96, 64] @ e4m3 [3, 32, 64]^T, a scale_inv per group
    d.name = "moe_fp8";
    d.num_groups = 3;
    d.lhs_shape = {96, 64};
    d.rhs_shape = {3, 32, 64};
    d.dtype = DType::kFloat8E4M3;
    d.preferred_element_type = DType::kBFloat16;
    d.scaling = ScalingMode::kCurrentTensorScaling;
    cases.push_back({"ragged_rows float8_e4m3fn current scaling", d, {64, 16, 16}});
  }
  std::string got;
  for (const GroupedCase& c : cases) {
    RecordingBackend be(1, 0, 3);
    got += "== grouped " + c.title + "\n";
    GroupedGemmPlan plan(be, c.desc);
    const auto bytes = [](const Shape& s, DType t) {
      return static_cast<size_t>(num_elements(s)) * dtype_size(t);
    };
    const GroupedGemmDesc& d = plan.desc();
    const size_t g = c.sizes.size();
    Operands x(be.region("lhs", bytes(d.lhs_shape, d.dtype)),
               be.region("rhs", bytes(d.rhs_shape, d.rhs_dtype.value_or(d.dtype))),
               d.bias_shape ? be.region("bias", bytes(*d.bias_shape, plan.out_dtype())) : nullptr,
               be.region("out", bytes(plan.out_shape(), plan.out_dtype())));
    if (plan.shape().scaled) {
      x.set_input(Operand::kLhsScaleInv, be.region("lhs_scale_inv", g * sizeof(float)));
      x.set_input(Operand::kRhsScaleInv, be.region("rhs_scale_inv", g * sizeof(float)));
    }
    auto* sizes = static_cast<int32_t*>(be.region("group_sizes", g * sizeof(int32_t)));
    auto* host = static_cast<int32_t*>(be.region("host_group_sizes", g * sizeof(int32_t)));
    std::copy(c.sizes.begin(), c.sizes.end(), sizes);
    std::copy(c.sizes.begin(), c.sizes.end(), host);
    size_t from = 0;
    const auto take = [&](const std::string& title) {
      got += "-- " + title + "\n";
      for (; from < be.calls().size(); ++from) got += be.calls()[from] + "\n";
    };
    take("prepare");
    plan.execute(Operands(x).set_input(Operand::kGroupSizes, sizes));
    take("sizes in backend memory");
    plan.execute(Operands(x).set_input(Operand::kHostGroupSizes, host));
    take("sizes in host memory");
    got += "-- capture: " + plan.capture_refusal(true) + "\n";
  }
  compare_golden(got, std::string(CGEMM_GOLDEN_DIR) + "/grouped.txt");
}

// Every transfer one rank posts to a peer is the one that peer posts as arriving from it, in
// the same order, with the same bytes and landing offset: otherwise a real ring would hang or
// mix up chunks. Checked for every rank of every collective case.
TEST(GoldenPrograms, TransfersPairUpAcrossRanks) {
  int checked = 0;
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
    for (const Case& c : cases(op)) {
      std::vector<std::vector<RecordingBackend::Posted>> all;
      for (int r = 0; r < c.tp; ++r) all.push_back(record(c, r).posted);
      // (sender, receiver) -> the transfers in posting order, as seen from each side.
      std::map<std::pair<int, int>, std::vector<std::tuple<size_t, size_t>>> sent, received;
      for (int r = 0; r < c.tp; ++r) {
        for (const auto& x : all[static_cast<size_t>(r)]) {
          sent[{r, x.send_peer}].emplace_back(x.bytes, x.send_offset);
          received[{x.recv_peer, r}].emplace_back(x.bytes, x.recv_offset);
        }
      }
      EXPECT_EQ(sent, received) << c.title(0);
      EXPECT_FALSE(sent.empty()) << c.title(0);
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
}

// FSDP wraps any kind's programs (runtime/src/fsdp/fsdp_gather.hpp): the weight gathered over
// the fsdp group inside the GEMM. Each kind at fsdp 2 (tp 1: columns, one GEMM per shard) and at
// fsdp 2 x tp 2 (the all-gather GEMM's column-parallel weight by its contracting rows, the
// others by columns), every fsdp rank of tp rank 0, with and without a bias; and the weight
// gradient's reduce-scatter over fsdp by rows and by columns. Within each case the fsdp
// exchanges every rank posts pair up with its peers'.
TEST(GoldenPrograms, Fsdp) {
  std::string got;
  int paired = 0;
  for (CollectiveOp op :
       {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, CollectiveOp::kNone}) {
    for (int tp : {1, 2}) {
      for (bool bias : {false, true}) {
        const int fsdp = 2;
        std::map<std::pair<int, int>, std::vector<std::tuple<size_t, size_t>>> sent, received;
        for (int rank = 0; rank < fsdp; ++rank) {
          PlanningMesh m;
          m.tp = tp;
          m.fsdp = fsdp;
          m.fsdp_rank = rank;
          const GemmDesc d = tensor_sequence_parallel_gemm(m, "w", op, 2, 48, 64, 96,
                                                           DType::kBFloat16, bias, false);
          PlanningOptions opt;
          opt.backend = BackendKind::kCpu;
          const PlannedGemm p = plan_gemm_programs(d, m, opt);
          RecordingBackend be(tp, 0, opt.overlap.num_max_streams, fsdp, rank);
          const PlanBytes& b = p.description.bytes;
          const Operands x(be.region("lhs", static_cast<size_t>(b.lhs)),
                           be.region("rhs", static_cast<size_t>(b.rhs)),
                           bias ? be.region("bias", static_cast<size_t>(b.bias)) : nullptr,
                           be.region("out", static_cast<size_t>(b.out)));
          got += "== " + std::string(collective_name(op)) + " fsdp=2 tp=" + std::to_string(tp) +
                 " fsdp_rank=" + std::to_string(rank) + " bias=" + std::to_string(bias ? 1 : 0) +
                 " rhs " + spec_str(d.rhs_spec) + "\n";
          for (const auto& [name, program] : std::vector<std::pair<const char*, const Program*>>{
                   {"overlapped", &p.kind.overlapped},
                   {"sequential", &p.kind.sequential},
                   {"gemm_only", &p.kind.gemm_only},
                   {"collective_only", &p.kind.collective_only}}) {
            Engine engine(be, rank);
            const size_t from = be.calls().size();
            const size_t posted = be.posted().size();
            engine.prepare({&program, 1});
            engine.run(*program, x);
            got += std::string("-- ") + name + "\n";
            for (size_t i = from; i < be.calls().size(); ++i) got += be.calls()[i] + "\n";
            if (program != &p.kind.overlapped) continue;
            for (size_t i = posted; i < be.posted().size(); ++i) {
              const auto& t = be.posted()[i];
              if (t.group != Group::kFsdp) continue;  // the tp ring's (paired above)
              sent[{rank, t.send_peer}].emplace_back(t.bytes, t.send_offset);
              received[{t.recv_peer, rank}].emplace_back(t.bytes, t.recv_offset);
            }
          }
        }
        EXPECT_EQ(sent, received) << collective_name(op) << " tp=" << tp;
        EXPECT_EQ(sent.size(), 2u) << collective_name(op) << " tp=" << tp;
        ++paired;
      }
    }
  }
  // The weight gradient's reduce-scatter over fsdp (kinds/fsdp_reduce_scatter_gemm.cpp): dW =
  // x^T dy over tokens split over fsdp 2, by rows and by columns, on 2 streams.
  for (int by_rows = 0; by_rows < 2; ++by_rows) {
    const int fsdp = 2;
    std::map<std::pair<int, int>, std::vector<std::tuple<size_t, size_t>>> sent, received;
    for (int rank = 0; rank < fsdp; ++rank) {
      PlanningMesh m;
      m.fsdp = fsdp;
      m.fsdp_rank = rank;
      GemmDesc d;
      d.name = "dw";
      d.lhs_shape = {4, 8, 64};
      d.rhs_shape = {4, 8, 96};
      d.lhs_spec = {SpecEntry::axis("fsdp"), SpecEntry::none(), SpecEntry::none()};
      d.rhs_spec = d.lhs_spec;
      d.contracting_dims = {{0, 1}, {0, 1}};
      d.out_dtype = DType::kFloat32;
      d.fsdp_scatter_dim = by_rows == 1 ? 0 : 1;
      PlanningOptions opt;
      opt.backend = BackendKind::kCpu;
      opt.overlap.num_max_streams = 2;
      const PlannedGemm p = plan_gemm_programs(d, m, opt);
      RecordingBackend be(1, 0, 2, fsdp, rank);
      const PlanBytes& b = p.description.bytes;
      const Operands x(be.region("lhs", static_cast<size_t>(b.lhs)),
                       be.region("rhs", static_cast<size_t>(b.rhs)), nullptr,
                       be.region("out", static_cast<size_t>(b.out)));
      got += std::string("== fsdp reduce-scatter by ") + (by_rows == 1 ? "rows" : "columns") +
             " fsdp=2 fsdp_rank=" + std::to_string(rank) + "\n";
      for (const auto& [name, program] : std::vector<std::pair<const char*, const Program*>>{
               {"overlapped", &p.kind.overlapped}, {"sequential", &p.kind.sequential}}) {
        Engine engine(be, rank);
        const size_t from = be.calls().size();
        const size_t posted = be.posted().size();
        engine.prepare({&program, 1});
        engine.run(*program, x);
        got += std::string("-- ") + name + "\n";
        for (size_t i = from; i < be.calls().size(); ++i) got += be.calls()[i] + "\n";
        for (size_t i = posted; i < be.posted().size(); ++i) {
          const auto& t = be.posted()[i];
          sent[{rank, t.send_peer}].emplace_back(t.bytes, t.send_offset);
          received[{t.recv_peer, rank}].emplace_back(t.bytes, t.recv_offset);
        }
      }
    }
    EXPECT_EQ(sent, received) << "reduce-scatter by " << (by_rows == 1 ? "rows" : "columns");
    EXPECT_EQ(sent.size(), 2u);
    ++paired;
  }
  EXPECT_EQ(paired, 14);
  compare_golden(got, std::string(CGEMM_GOLDEN_DIR) + "/fsdp.txt");
}

}  // namespace
}  // namespace cgemm
