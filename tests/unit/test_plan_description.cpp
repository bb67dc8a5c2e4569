// plan_gemm (cgemm/runtime/plan_description.hpp): planning with no Context, backend or MPI,
// its bytes, its refusals; the memory check; checked size arithmetic.

#include <gtest/gtest.h>

#include <sys/resource.h>
#include "sanitizers.hpp"

#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#include <set>
#include <string>

#include "cgemm/runtime/memory_check.hpp"
#include "cgemm/runtime/plan_description.hpp"
#include "transport_table.hpp"

namespace cgemm {
namespace {

PlanningMesh mesh(int dp, int tp, int dp_rank, int tp_rank) {
  PlanningMesh m;
  m.dp = dp;
  m.tp = tp;
  m.dp_rank = dp_rank;
  m.tp_rank = tp_rank;
  return m;
}

GemmDesc tpsp(const PlanningMesh& m, CollectiveOp op, int64_t batch, int64_t seq, int64_t k,
              int64_t n, bool bias = true) {
  return tensor_sequence_parallel_gemm(m, "g", op, batch, seq, k, n, DType::kBFloat16, bias, false);
}

GemmDesc tpsp_gemm(const PlanningMesh& m, CollectiveOp op) { return tpsp(m, op, 2, 16, 32, 48); }

TEST(PlanDescription, AllGatherShapesOffsetsAndBytes) {
  const PlanningMesh m = mesh(2, 4, 1, 2);
  const PlanDescription d = plan_gemm(tpsp(m, CollectiveOp::kAllGather, 4, 64, 32, 48), m);
  EXPECT_EQ(d.lhs_local, (Shape{2, 16, 32}));
  EXPECT_EQ(d.rhs_local, (Shape{32, 12}));
  EXPECT_EQ(d.out_global, (Shape{4, 64, 48}));
  EXPECT_EQ(d.out_local, (Shape{2, 64, 12}));
  EXPECT_EQ(d.lhs_offset, (Shape{2, 32, 0}));
  EXPECT_EQ(d.rhs_offset, (Shape{0, 24}));
  EXPECT_EQ(d.out_offset, (Shape{2, 0, 24}));
  EXPECT_EQ(d.chunks, 4);
  EXPECT_EQ(d.chunk_rows, 16);  // strided: 16 rows of each of the 2 batch blocks
  EXPECT_TRUE(d.overlappable);
  const PlanBytes& b = d.bytes;
  EXPECT_EQ(b.lhs, 2 * 16 * 32 * 2);
  EXPECT_EQ(b.rhs, 32 * 12 * 2);
  EXPECT_EQ(b.bias, 12 * 2);
  EXPECT_EQ(b.out, 2 * 64 * 12 * 2);
  EXPECT_EQ(b.overlapped.ring, 4 * b.lhs);     // every rank's chunk
  EXPECT_EQ(b.sequential.work_in, 4 * b.lhs);  // the gathered lhs
  EXPECT_EQ(b.sequential.work_out, b.out);     // before the dp-leading reorder
  EXPECT_EQ(b.workspace, b.overlapped.ring + b.sequential.work_in + b.sequential.work_out);
  // Default: the CUDA backend on sm 90, one 32 MiB cuBLAS workspace per stream.
  EXPECT_EQ(b.cublas_workspace_per_stream, int64_t{32} << 20);
  EXPECT_EQ(b.cublas_workspace, 3 * (int64_t{32} << 20) + 256);
  EXPECT_EQ(b.cpu_fp64_copies, 0);
  EXPECT_EQ(b.total(), b.operands() + b.workspace + b.cublas_workspace);
}

TEST(PlanDescription, CpuBackendCountsItsFp64Copies) {
  const PlanningMesh m = mesh(1, 2, 0, 1);
  PlanningOptions o;
  o.backend = BackendKind::kCpu;
  const PlanDescription d = plan_gemm(tpsp(m, CollectiveOp::kReduceScatter, 1, 32, 64, 16), m, o);
  // The sequential path's whole GEMM: lhs [32, 32], rhs [32, 16], out [32, 16] in fp64.
  EXPECT_EQ(d.bytes.cpu_fp64_copies, (32 * 32 + 32 * 16 + 32 * 16) * 8);
  EXPECT_GT(d.bytes.cpu_scratch, 0);
  EXPECT_EQ(d.bytes.cublas_workspace, 0);
  EXPECT_EQ(d.bytes.overlapped.ring, 2 * 16 * 16 * 2);
  EXPECT_EQ(d.bytes.overlapped.send, d.bytes.overlapped.ring);
}

TEST(PlanDescription, RefusesChunksOfZeroRows) {
  // A sequence shorter than tp where the schedule must split it: planning refuses it (here
  // the output's sequence shard already does not divide).
  const PlanningMesh m = mesh(1, 2, 0, 0);
  EXPECT_THROW(plan_gemm(tpsp(m, CollectiveOp::kReduceScatter, 2, 1, 64, 16), m), Error);
  // No rows at all (an empty batch): every chunk would hold 0 rows.
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
    try {
      plan_gemm(tpsp(m, op, 0, 16, 64, 16), m);
      ADD_FAILURE() << "planned chunks of 0 rows";
    } catch (const PlanError& e) {
      EXPECT_NE(std::string(e.what()).find("chunks of 0 rows"), std::string::npos) << e.what();
    }
  }
}

TEST(PlanDescription, RefusesSizesThatOverflow) {
  const PlanningMesh m = mesh(1, 2, 0, 0);
  EXPECT_THROW(
      plan_gemm(tpsp(m, CollectiveOp::kAllGather, 2, int64_t{1} << 40, int64_t{1} << 30, 512), m),
      Error);
  // The element count fits, the bytes do not (2^62 bf16 elements).
  EXPECT_THROW(
      plan_gemm(
          tpsp(m, CollectiveOp::kAllGather, 4, int64_t{1} << 30, int64_t{1} << 30, 512, false), m),
      Error);
}

TEST(PlanDescription, RefusesBadMesh) {
  const PlanningMesh m = mesh(1, 2, 0, 2);
  EXPECT_THROW(plan_gemm(tpsp(m, CollectiveOp::kAllGather, 2, 16, 32, 48), m), Error);
}

// Expects plan_gemm to throw E whose message holds every one of `words`.
template <typename E>
void expect_refusal(const GemmDesc& d, const PlanningMesh& m,
                    std::initializer_list<std::string> words) {
  try {
    plan_gemm(d, m);
    ADD_FAILURE() << "GEMM '" << d.name << "' planned";
  } catch (const E& e) {
    for (const std::string& w : words) {
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << w << " in: " << e.what();
    }
  }
}

// lhs (None, tpsp, dp) @ rhs (dp, None): the contracting dim is sharded over dp, so the
// planner reduces the output over dp (gemm.py's reduce_spec), then adds the bias.
GemmDesc reduced_over_dp(CollectiveOp op, const PartitionSpec& lhs_spec) {
  GemmDesc d;
  d.name = "r";
  d.collective = op;
  d.lhs_shape = {2, 16, 32};
  d.rhs_shape = {32, 24};
  d.bias_shape = Shape{24};
  d.contracting_dims = {{2}, {0}};
  d.lhs_spec = lhs_spec;
  d.rhs_spec = {SpecEntry::axis("dp"), SpecEntry::none()};
  d.bias_spec = {SpecEntry::none()};
  return d;
}

TEST(PlanDescription, RefusesReductionsItDoesNotRun) {
  const PlanningMesh m = mesh(2, 2, 1, 0);
  const SpecEntry none = SpecEntry::none(), dp = SpecEntry::axis("dp"),
                  tpsp = SpecEntry::axis("tpsp");
  // The all-gather and the plain GEMM all-reduce over dp (issue 43 item 2): planned, each
  // with its sum over the dp group, then the bias (every path ends with them).
  for (const CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kNone}) {
    const PlanDescription d = plan_gemm(reduced_over_dp(op, {none, tpsp, dp}), m);
    EXPECT_NE(d.schedule_summary.find("all-reduce over ('dp',)"), std::string::npos)
        << d.schedule_summary;
  }
  // Found by review: sequence-first, K sharded over tpsp on both operands: the planner reduces
  // over tpsp, which the all-gather's tp group gathers over instead.
  {
    GemmDesc d = reduced_over_dp(CollectiveOp::kAllGather, {none, none, tpsp});
    d.rhs_spec = {tpsp, none};
    d.transpose_batch_sequence = true;
    expect_refusal<Error>(d, m, {"'r'", "reduced over ('tpsp',)", "gathers the sequence"});
  }
  // The reduce-scatter reduces over tp; gemm.py itself refuses any other reduce axis.
  expect_refusal<PlanError>(reduced_over_dp(CollectiveOp::kReduceScatter, {none, none, dp}), m,
                            {"TPSP"});
}

TEST(PlanDescription, RefusesABiasSpecThePlannerDoesNotGive) {
  const PlanningMesh m = mesh(1, 2, 0, 1);
  const SpecEntry none = SpecEntry::none(), tpsp = SpecEntry::axis("tpsp");
  // All-gather: the bias is sharded as the rhs's columns; a replicated one would be read as
  // this rank's N/tp slice.
  GemmDesc ag = tpsp_gemm(m, CollectiveOp::kAllGather);
  ag.bias_spec = {none};
  expect_refusal<PlanError>(ag, m, {"'g' bias", "(None,)", "('tpsp',)"});
  ag.bias_spec = {};  // no spec: replicated, as JAX pads it
  expect_refusal<PlanError>(ag, m, {"'g' bias", "(None,)", "('tpsp',)"});
  // Reduce-scatter: the bias is whole on every rank; a sharded one would be read past the
  // caller's N/tp elements.
  GemmDesc rs = tpsp_gemm(m, CollectiveOp::kReduceScatter);
  rs.bias_spec = {tpsp};
  expect_refusal<PlanError>(rs, m, {"'g' bias", "(None,)", "('tpsp',)"});
  // Without a bias its spec is not read.
  ag.bias_shape.reset();
  EXPECT_NO_THROW(plan_gemm(ag, m));
  // The layouts of tensor_sequence_parallel_gemm (what cgemm-run plans) pass.
  for (CollectiveOp op :
       {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, CollectiveOp::kNone}) {
    EXPECT_NO_THROW(plan_gemm(tpsp_gemm(m, op), m)) << collective_name(op);
  }
}

TEST(PlanDescription, PredictsTransports) {
  EXPECT_EQ(predict_transport(BackendKind::kCpu, 4, true, true), "mpi");
  EXPECT_EQ(predict_transport(BackendKind::kCuda, 4, true, true), "copy-engine (CUDA IPC)");
  EXPECT_EQ(predict_transport(BackendKind::kCuda, 4, false, true), "nccl");
  EXPECT_EQ(predict_transport(BackendKind::kCuda, 4, true, false), "nccl");
  EXPECT_EQ(predict_transport(BackendKind::kCuda, 1, true, true), "none (tp = 1)");
}

// A forced transport (--transport) is planned as a real run takes it, or refused as it refuses.
TEST(PlanDescription, PredictsForcedTransports) {
  using T = TransportKind;
#ifdef CGEMM_HAVE_UCX
  EXPECT_EQ(predict_transport(BackendKind::kCpu, 4, false, true, T::kUcx), "ucx");
  EXPECT_EQ(predict_transport(BackendKind::kCpu, 1, true, true, T::kUcx), "mpi");
  EXPECT_EQ(predict_transport(BackendKind::kCuda, 4, true, true, T::kUcx),
            "ucx (staged through pinned host memory)");
  EXPECT_EQ(predict_transport(BackendKind::kCuda, 1, true, true, T::kUcx), "none (tp = 1)");
#else
  EXPECT_EQ(predict_transport(BackendKind::kCuda, 4, true, true, T::kUcx),
            "refused: transport = ucx: this cgemm was built without UCX");
  // Without UCX a real run refuses transport = ucx at any tp (cpu_backend.cpp's make_ucx).
  EXPECT_EQ(predict_transport(BackendKind::kCpu, 4, false, true, T::kUcx),
            "refused: transport = ucx: this cgemm was built without UCX");
  EXPECT_EQ(predict_transport(BackendKind::kCpu, 1, true, true, T::kUcx),
            "refused: transport = ucx: this cgemm was built without UCX");
#endif
  EXPECT_EQ(predict_transport(BackendKind::kCpu, 4, false, true, T::kMpi), "mpi");
  EXPECT_EQ(predict_transport(BackendKind::kCuda, 4, true, true, T::kNccl), "nccl");
  EXPECT_EQ(predict_transport(BackendKind::kCuda, 4, true, true, T::kCe), "copy-engine (CUDA IPC)");
  EXPECT_EQ(predict_transport(BackendKind::kCuda, 4, false, true, T::kCe),
            "refused: transport = ce, and the TP group spans hosts");
  EXPECT_EQ(
      predict_transport(BackendKind::kCuda, 4, true, true, T::kMpi),
      "refused: transport = mpi needs the CPU backend; the CUDA backend has ucx, nccl and ce");
  EXPECT_EQ(predict_transport(BackendKind::kCpu, 4, true, true, T::kNccl),
            "refused: transport = nccl needs the CUDA backend; the CPU backend has mpi and ucx");
  EXPECT_EQ(transport_kind_name(parse_transport_kind("ucx")), "ucx");
  EXPECT_THROW(parse_transport_kind("verbs"), Error);
}

// One row per choice of the option but auto; each backend has some; the refusal of a kind a
// backend has not lists what it has, from the rows.
TEST(TransportTable, OneRowPerKindAndOneRefusalRule) {
  using T = TransportKind;
  std::set<T> kinds;
  for (const TransportRow& r : transport_rows()) {
    EXPECT_NE(r.kind, T::kAuto);
    EXPECT_TRUE(kinds.insert(r.kind).second) << transport_kind_name(r.kind);
    EXPECT_TRUE(r.cpu || r.cuda) << transport_kind_name(r.kind);
    ASSERT_NE(r.offer, nullptr);
  }
  // Every kind is made by make_transport (the backends make theirs through it: every MPI test
  // makes mpi, the UCX tests ucx, the GPU tests nccl and ce); auto is a rule, not a transport.
  std::string why;
  EXPECT_THROW(static_cast<void>(make_transport(T::kAuto, TransportSite{}, why)), Error);
  EXPECT_EQ(kinds, (std::set<T>{T::kMpi, T::kUcx, T::kNccl, T::kCe}));
  for (const TransportRow& r : transport_rows()) {
    for (BackendKind b : {BackendKind::kCpu, BackendKind::kCuda}) {
      const bool has = b == BackendKind::kCpu ? r.cpu : r.cuda;
      EXPECT_EQ(transport_backend_refusal(r.kind, b).empty(), has) << transport_kind_name(r.kind);
    }
  }
  EXPECT_EQ(transport_backend_refusal(T::kCe, BackendKind::kCpu),
            "transport = ce needs the CUDA backend; the CPU backend has mpi and ucx");
  EXPECT_EQ(transport_backend_refusal(T::kAuto, BackendKind::kCpu), "");
  const TransportOffer off =
      offer_transport(T::kCe, GroupView{.backend = BackendKind::kCuda, .size = 2, .use_ce = false});
  EXPECT_FALSE(off.served());
  EXPECT_EQ(off.refusal, "transport = ce with use_ce = off");
}

TEST(MemoryCheck, HostMemory) {
  ASSERT_GT(host_available_bytes(), 0);
  EXPECT_TRUE(check_memory(BackendKind::kCpu, 1, 1).ok);
  const MemoryCheck c = check_memory(BackendKind::kCpu, int64_t{1} << 60, 3);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.message.find("3 rank(s)"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find(std::to_string(int64_t{1} << 60)), std::string::npos) << c.message;
}

// RLIMIT_AS binds before MemAvailable when it leaves less: the message names it and this
// rank's own need (a child process, as the limit is the process's).
TEST(MemoryCheckDeathTest, AddressSpaceLimit) {
  if (kUnderAddressSanitizer) {
    GTEST_SKIP() << "AddressSanitizer reserves more address space than the limit allows";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        rlimit as{};
        getrlimit(RLIMIT_AS, &as);
        as.rlim_cur = rlim_t{1} << 30;
        if (setrlimit(RLIMIT_AS, &as) != 0) std::_Exit(1);  // cannot lower it: nothing to see
        // 2 GiB: within MemAvailable (the test machines have more), beyond the 1 GiB limit.
        const MemoryCheck c =
            check_memory(BackendKind::kCpu, int64_t{2} << 30, 1, int64_t{2} << 30);
        std::fprintf(stderr, "%s\n", c.message.c_str());
        std::_Exit(c.ok ? 0 : 1);
      },
      testing::ExitedWithCode(1),
      "not enough memory: this rank's address space \\(RLIMIT_AS.* leaves [0-9]+ bytes .*, this "
      "rank needs 2147483648 bytes");
}

TEST(MemoryCheck, LimitsIncludeMemAvailable) {
  const std::vector<HostMemoryLimit> limits = host_memory_limits();
  ASSERT_FALSE(limits.empty());
  EXPECT_EQ(limits[0].name, "host memory (MemAvailable)");
  for (const HostMemoryLimit& l : limits) EXPECT_GE(l.available, 0) << l.name;
}

TEST(CheckedArithmetic, Throws) {
  EXPECT_EQ(checked_mul(int64_t{1} << 31, int64_t{1} << 31, "x"), int64_t{1} << 62);
  EXPECT_THROW(checked_mul(int64_t{1} << 32, int64_t{1} << 31, "x"), Error);
  EXPECT_THROW(checked_add(INT64_MAX, 1, "x"), Error);
  EXPECT_THROW(checked_bytes(int64_t{1} << 62, 2, "x"), Error);
}

}  // namespace
}  // namespace cgemm
