// The overlap schedules of schedule.hpp run on a Backend: written once for every backend.
// Every rank of a TP group issues the same exchanges in the same order.

#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cgemm/runtime/plan.hpp"
#include "cgemm/runtime/schedule.hpp"
#include "plan_impl.hpp"

namespace cgemm {

namespace {

const char* at(const void* p, size_t bytes) { return static_cast<const char*>(p) + bytes; }
char* at(void* p, size_t bytes) { return static_cast<char*>(p) + bytes; }

void ensure(Backend& be, void*& buf, size_t& have, size_t bytes) {
  if (have >= bytes && buf != nullptr) return;
  if (buf != nullptr) be.release(buf);
  buf = be.allocate(bytes);
  have = bytes;
}

// The GEMM of one sequence chunk: `lhs` holds its rows (contiguous, or B strided blocks
// when lhs_batch_stride != 0), the result goes to `out` (likewise).
// The plan's GEMM without its rows: dtypes, k, n, rhs and the dense leading dimensions.
GemmTask plan_task(const GemmPlan::Impl& g, const void* rhs) {
  GemmTask t;
  t.in_dtype = g.in;
  t.out_dtype = g.out;
  t.k = g.k;
  t.n = g.n;
  t.lda = g.k;
  t.rhs = rhs;
  t.ldb = g.ldb;
  t.rhs_transposed = g.rhs_transposed;
  t.ldc = g.n;
  return t;
}

// The reference path's (and the benchmark's) partial products of a reduce-scatter: the whole
// local GEMM [lhs rows, n], then room for the reduced chunk behind it.
void* ensure_partials(GemmPlan::Impl& g) {
  const size_t partial_bytes = static_cast<size_t>(g.lhs_rows * g.n) * g.out_size();
  ensure(*g.backend, g.scratch2, g.scratch2_bytes,
         partial_bytes + static_cast<size_t>(g.chunk_rows * g.n) * g.out_size());
  return g.scratch2;
}

GemmTask chunk_task(const GemmPlan::Impl& g, const void* lhs, int64_t lhs_batch_stride,
                    const void* rhs, const void* bias, void* out, int64_t out_batch_stride,
                    DType out_dtype) {
  GemmTask t = plan_task(g, rhs);
  t.out_dtype = out_dtype;
  t.lhs = lhs;
  t.out = out;
  t.bias = bias;
  if (g.strided) {
    t.batch = g.batch;
    t.m = g.seq_rows;
    t.lhs_batch_stride = lhs_batch_stride;
    t.out_batch_stride = out_batch_stride;
  } else {
    t.m = g.chunk_rows;
  }
  return t;
}

}  // namespace

void GemmPlan::execute_overlapped(const void* lhs, const void* rhs, const void* bias, void* out) {
  Impl& g = *impl_;
  Backend& be = *g.backend;
  // Trace labels cost a string each: only made while tracing.
  const bool tracing = be.tracing();
  std::vector<std::string> labels;
  const auto label = [&](const std::string& what) -> const char* {
    if (!tracing) return nullptr;
    labels.push_back(desc_.name + " " + what);
    return labels.back().c_str();
  };
  labels.reserve(static_cast<size_t>(4 * g.tp + 4));
  if (g.has_bias && bias == nullptr) {
    throw Error("GEMM '" + desc_.name + "' was planned with a bias but got none");
  }
  const void* fused_bias = g.fuse_bias ? bias : nullptr;

  if (desc_.collective == CollectiveOp::kNone) {
    GemmTask t = chunk_task(g, lhs, 0, rhs, fused_bias, out, 0, g.out);
    t.m = g.lhs_rows;
    t.batch = 1;
    t.label = label("gemm");
    be.gemm(t, 0);
    if (sharding_.reduce_spec) {
      be.all_reduce(out, g.out, num_elements(out_local_), 0);
      if (g.has_bias) {
        const void* parts[] = {out};
        be.sum_partials(parts, g.out, num_elements(out_local_), bias, g.n, out, g.out, 0);
      }
    }
    return;
  }

  // Chunks on other streams and the transport start after the caller's work on stream 0
  // (which also holds the end of this plan's previous call).
  be.fork_streams();
  const size_t chunk_lhs_bytes = static_cast<size_t>(g.chunk_rows * g.k) * g.in_size();
  const size_t chunk_out_bytes = static_cast<size_t>(g.chunk_rows * g.n) * g.out_size();

  if (desc_.collective == CollectiveOp::kAllGather) {
    if (g.ring.local == nullptr && g.tp > 1) {
      g.ring = be.allocate_symmetric(chunk_lhs_bytes * static_cast<size_t>(g.tp));
    }
    const auto steps = all_gather_schedule(g.tp, g.me, g.aggregate);
    // Chunk c lands at its sequence position: rows c*S/tp.. of every batch block.
    const auto chunk_lhs = [&](int c) -> const void* {
      return c == g.me ? lhs : at(g.ring.local, static_cast<size_t>(c) * chunk_lhs_bytes);
    };
    const auto chunk_out = [&](int c) -> void* {
      const int64_t row = g.strided ? c * g.seq_rows : c * g.chunk_rows;
      return at(out, static_cast<size_t>(row * g.n) * g.out_size());
    };
    ExchangeToken previous = -1;
    int gemm_index = 0;
    for (const AllGatherStep& step : steps) {
      const int stream = gemm_index % g.num_streams;
      if (previous >= 0) be.wait_exchange(previous, stream);
      const ExchangeToken waited = previous;
      previous = -1;
      if (!step.transfers.empty()) {
        std::vector<Exchange> group;
        for (const ChunkTransfer& tr : step.transfers) {
          // Chunk c lives at slot c of every rank's ring buffer.
          group.push_back({.src = chunk_lhs(tr.send_chunk),
                           .bytes = chunk_lhs_bytes,
                           .send_peer = tr.send_peer,
                           .send_offset = static_cast<size_t>(tr.send_chunk) * chunk_lhs_bytes,
                           .recv_peer = tr.recv_peer,
                           .recv_offset = static_cast<size_t>(tr.recv_chunk) * chunk_lhs_bytes,
                           .dst = &g.ring,
                           .label = label("chunk " + std::to_string(tr.send_chunk) + " -> rank " +
                                          std::to_string(tr.send_peer))});
        }
        previous = be.start_exchange(group, -1);
      }
      const ExchangeToken arrived = waited;
      for (int c : step.compute) {
        const int s = gemm_index++ % g.num_streams;
        // A second chunk of the step (aggregate mode) may land on another stream: it waits
        // for the exchange too.
        if (s != stream && c != g.me && arrived >= 0) be.wait_exchange(arrived, s);
        GemmTask t = chunk_task(g, chunk_lhs(c), g.seq_rows * g.k, rhs, fused_bias, chunk_out(c),
                                g.seq_total * g.n, g.out);
        t.label = label("gemm chunk " + std::to_string(c));
        be.gemm(t, s);
      }
    }
    be.join_streams(0);
    return;
  }

  // REDUCE_SCATTER: partials in the output dtype, summed in fp32 in rank order at the end.
  if (g.tp == 1) {  // nothing to reduce: the one partial is the output
    GemmTask t = chunk_task(g, lhs, g.seq_total * g.k, rhs, nullptr, out, g.seq_rows * g.n, g.out);
    t.label = label("gemm");
    be.gemm(t, 0);
    if (g.has_bias) {
      const void* parts[] = {out};
      be.sum_partials(parts, g.out, g.chunk_rows * g.n, bias, g.n, out, g.out, 0);
    }
    be.join_streams(0);
    return;
  }
  if (g.ring.local == nullptr) {
    g.ring = be.allocate_symmetric(chunk_out_bytes * static_cast<size_t>(g.tp));
    if (g.tp > 1) g.send = be.allocate(chunk_out_bytes * static_cast<size_t>(g.tp));
  }
  const auto steps = reduce_scatter_schedule(g.tp, g.me);
  std::vector<ExchangeToken> tokens;
  for (size_t s = 0; s < steps.size(); ++s) {
    const ReduceScatterStep& step = steps[s];
    // The partials run in order on one stream: on several they would share the GPU, every
    // one would finish late, and the first transfer could not start until near the end.
    const int stream = 0;
    // Destination d's rows: rows d*S/tp.. of every batch block (strided) or one block.
    const int64_t first_row = g.strided ? step.dest * g.seq_rows : step.dest * g.chunk_rows;
    const void* a = at(lhs, static_cast<size_t>(first_row * g.k) * g.in_size());
    void* partial = step.dest == g.me
                        ? at(g.ring.local, static_cast<size_t>(g.me) * chunk_out_bytes)
                        : at(g.send, static_cast<size_t>(step.dest) * chunk_out_bytes);
    GemmTask t =
        chunk_task(g, a, g.seq_total * g.k, rhs, nullptr, partial, g.seq_rows * g.n, g.out);
    t.label = label("gemm partial for rank " + std::to_string(step.dest));
    be.gemm(t, stream);
    if (step.dest != g.me) {
      // The partial from rank p lives at slot p of the destination's ring buffer.
      const Exchange x{.src = partial,
                       .bytes = chunk_out_bytes,
                       .send_peer = step.dest,
                       .send_offset = static_cast<size_t>(g.me) * chunk_out_bytes,
                       .recv_peer = step.recv_from,
                       .recv_offset = static_cast<size_t>(step.recv_from) * chunk_out_bytes,
                       .dst = &g.ring,
                       .label = label("partial -> rank " + std::to_string(step.dest))};
      tokens.push_back(be.start_exchange({&x, 1}, stream));
    }
  }
  for (ExchangeToken t : tokens) be.wait_exchange(t, 0);
  be.join_streams(0);
  std::vector<const void*> parts;
  for (int p = 0; p < g.tp; ++p) {
    parts.push_back(at(g.ring.local, static_cast<size_t>(p) * chunk_out_bytes));
  }
  be.sum_partials(parts, g.out, g.chunk_rows * g.n, g.has_bias ? bias : nullptr, g.n, out, g.out,
                  0);
}

void GemmPlan::execute_reference(const void* lhs, const void* rhs, const void* bias, void* out) {
  Impl& g = *impl_;
  Backend& be = *g.backend;
  if (desc_.collective == CollectiveOp::kNone) {
    execute_overlapped(lhs, rhs, bias, out);  // nothing to overlap: the plain path is the reference
    return;
  }
  const void* fused_bias = g.fuse_bias ? bias : nullptr;
  GemmTask t = plan_task(g, rhs);
  const size_t lhs_bytes = static_cast<size_t>(g.lhs_rows * g.k) * g.in_size();
  if (desc_.collective == CollectiveOp::kAllGather) {
    // all-gather (rank-major [tp, B, S/tp, K]), one GEMM, then the dp-leading reorder.
    const size_t out_bytes = static_cast<size_t>(g.tp * g.lhs_rows * g.n) * g.out_size();
    ensure(be, g.scratch, g.scratch_bytes, lhs_bytes * static_cast<size_t>(g.tp));
    be.all_gather(lhs, g.scratch, lhs_bytes, 0);
    t.lhs = g.scratch;
    t.m = g.tp * g.lhs_rows;
    t.bias = fused_bias;
    if (g.strided) {
      ensure(be, g.scratch2, g.scratch2_bytes, out_bytes);
      t.out = g.scratch2;
      be.gemm(t, 0);
      be.reorder(ReorderKind::kDpLeading, out_local_, g.dp, g.scratch2, out, g.out, 0);
    } else {
      t.out = out;
      be.gemm(t, 0);
    }
    return;
  }
  // reduce-scatter: the tpsp-leading reorder, one GEMM, reduce-scatter, then the bias.
  const size_t partial_bytes = static_cast<size_t>(g.lhs_rows * g.n) * g.out_size();
  ensure_partials(g);
  const void* a = lhs;
  if (g.strided) {
    ensure(be, g.scratch, g.scratch_bytes, lhs_bytes);
    be.reorder(ReorderKind::kTpspLeading, lhs_local_, g.dp, lhs, g.scratch, g.in, 0);
    a = g.scratch;
  }
  t.lhs = a;
  t.m = g.lhs_rows;
  t.out = g.scratch2;
  be.gemm(t, 0);
  void* reduced = at(g.scratch2, partial_bytes);
  be.reduce_scatter(g.scratch2, reduced, g.out, g.chunk_rows * g.n, 0);
  const void* parts[] = {reduced};
  be.sum_partials(parts, g.out, g.chunk_rows * g.n, g.has_bias ? bias : nullptr, g.n, out, g.out,
                  0);
}

void GemmPlan::execute(const void* lhs, const void* rhs, const void* bias, void* out) {
  Impl& g = *impl_;
  if (desc_.collective != CollectiveOp::kNone && g.policy == OverlapPolicy::kAuto &&
      !g.path_decided) {
    decide_path(lhs, rhs, bias, out);
  }
  if (g.use_overlap) {
    execute_overlapped(lhs, rhs, bias, out);
  } else {
    execute_reference(lhs, rhs, bias, out);
  }
}

void GemmPlan::decide_path(const void* lhs, const void* rhs, const void* bias, void* out) {
  // Both paths write the same result, so timing them on the caller's buffers is harmless;
  // the call that follows writes the final output. Medians of a few runs, the slowest rank
  // of the TP group deciding for all (the two paths run different collectives).
  Impl& g = *impl_;
  Backend& be = *g.backend;
  constexpr int kRuns = 5;
  std::vector<double> over, seq;
  for (int i = 0; i < kRuns + 1; ++i) {
    const double a = be.time_ms([&] { execute_overlapped(lhs, rhs, bias, out); });
    const double b = be.time_ms([&] { execute_reference(lhs, rhs, bias, out); });
    if (i == 0) continue;  // warm-up: first use allocates and tunes
    over.push_back(a);
    seq.push_back(b);
  }
  std::sort(over.begin(), over.end());
  std::sort(seq.begin(), seq.end());
  double t[2] = {over[kRuns / 2], seq[kRuns / 2]};
  if (MPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_MAX, ctx_.comms().tp_comm()) !=
      MPI_SUCCESS) {
    throw Error("GEMM '" + desc_.name + "': MPI_Allreduce failed while choosing the path");
  }
  g.auto_overlapped_ms = t[0];
  g.auto_sequential_ms = t[1];
  g.use_overlap = t[0] <= t[1];
  g.path_decided = true;
  if (g.use_overlap) {  // the sequential path's scratch is not needed any more
    for (void** p : {&g.scratch, &g.scratch2}) {
      if (*p != nullptr) be.release(*p);
      *p = nullptr;
    }
    g.scratch_bytes = g.scratch2_bytes = 0;
  }
}

std::string GemmPlan::path_summary() const {
  const Impl& g = *impl_;
  if (desc_.collective == CollectiveOp::kNone) return "plain GEMM (no collective to overlap)";
  if (g.policy == OverlapPolicy::kAlways) return "overlapped (overlap = on)";
  if (g.policy == OverlapPolicy::kNever) return "sequential (overlap = off)";
  if (!g.path_decided) return "auto (decided on the first call)";
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s (auto: overlapped %.3f ms vs sequential %.3f ms)",
                g.use_overlap ? "overlapped" : "sequential", g.auto_overlapped_ms,
                g.auto_sequential_ms);
  return buf;
}

bool GemmPlan::uses_overlap() const { return impl_->use_overlap; }

void GemmPlan::bench_gemm_only(const void* lhs, const void* rhs, void* out) {
  // The whole local GEMM in one call on stream 0, on the plan's scratch where the
  // collective would put or take its data: what the sequential path computes.
  Impl& g = *impl_;
  Backend& be = *g.backend;
  GemmTask t = plan_task(g, rhs);
  const size_t lhs_bytes = static_cast<size_t>(g.lhs_rows * g.k) * g.in_size();
  if (desc_.collective == CollectiveOp::kAllGather) {
    ensure(be, g.scratch, g.scratch_bytes, lhs_bytes * static_cast<size_t>(g.tp));
    t.lhs = g.scratch;
    t.m = g.tp * g.lhs_rows;
    t.out = out;
  } else {
    ensure_partials(g);
    t.lhs = lhs;
    t.m = g.lhs_rows;
    t.out = desc_.collective == CollectiveOp::kNone ? out : g.scratch2;
  }
  be.gemm(t, 0);
}

void GemmPlan::bench_collective_only(const void* lhs, void* out) {
  Impl& g = *impl_;
  Backend& be = *g.backend;
  const size_t lhs_bytes = static_cast<size_t>(g.lhs_rows * g.k) * g.in_size();
  if (desc_.collective == CollectiveOp::kAllGather) {
    ensure(be, g.scratch, g.scratch_bytes, lhs_bytes * static_cast<size_t>(g.tp));
    be.all_gather(lhs, g.scratch, lhs_bytes, 0);
  } else if (desc_.collective == CollectiveOp::kReduceScatter) {
    be.reduce_scatter(ensure_partials(g), out, g.out, g.chunk_rows * g.n, 0);
  } else if (sharding_.reduce_spec) {
    be.all_reduce(out, g.out, num_elements(out_local_), 0);
  }
}

}  // namespace cgemm
