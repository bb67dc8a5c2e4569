#include "fsdp_gather.hpp"

#include <algorithm>
#include <map>
#include <utility>
#include <variant>
#include <vector>

namespace cgemm {

namespace {

// How a program's shards reach this rank.
enum class Arrival {
  kExchanges,  // the overlapped path: fsdp - 1 exchange steps, each GEMM waits for its shard
  kAllGather,  // the sequential path: one all-gather over the fsdp group before the GEMMs
  kThere,      // the benchmark's GEMM alone: the slots are read as they are
};

Ref slot(const FsdpGather& f, int j) {
  return {Workspace::kFsdpRing, static_cast<size_t>(j) * f.shard_bytes};
}

bool reads_rhs(const Op& op) {
  const auto* g = std::get_if<GemmOp>(&op);
  return g != nullptr && std::holds_alternative<Operand>(g->rhs.buf) &&
         std::get<Operand>(g->rhs.buf) == Operand::kRhs;
}

// Writes one program's rewrite; `tokens` grows by the exchanges it adds.
class Rewrite {
 public:
  Rewrite(const FsdpGather& f, const GemmGeometry& g, Arrival how) : f_(f), g_(g), how_(how) {}

  Program run(const Program& in) {
    Program p = in;
    p.ops.clear();
    p.workspace.fsdp_ring = static_cast<int64_t>(g_.times(f_.shard_bytes, f_.size, "fsdp ring"));
    first_token_ = in.tokens;
    p.tokens = in.tokens + (how_ == Arrival::kExchanges ? f_.size - 1 : 0);
    const bool forks = std::any_of(in.ops.begin(), in.ops.end(),
                                   [](const Op& op) { return std::holds_alternative<ForkOp>(op); });
    // Before anything else: the sequential path's all-gather, on stream 0 (its GEMMs are
    // there, or behind its fork); the exchanges' own-shard copy (rows), which the fork orders
    // before every stream and the transport; a fork where the program has none (the plain
    // GEMM: the exchanges must follow the caller's work on stream 0).
    if (how_ == Arrival::kAllGather) {
      p.ops.push_back(AllGatherOp{{Operand::kRhs},
                                  slot(f_, 0),
                                  f_.shard_bytes,
                                  0,
                                  g_.name + " fsdp all-gather rhs",
                                  Group::kFsdp});
    }
    if (how_ == Arrival::kExchanges && !f_.columns) {
      CopyOp c;
      c.src = {Operand::kRhs};
      c.dst = slot(f_, f_.me);
      c.bytes = f_.shard_bytes;
      c.label = g_.name + " fsdp own rhs shard";
      p.ops.push_back(c);
    }
    bool moved = how_ != Arrival::kExchanges;
    if (!moved && !forks) {
      p.ops.push_back(ForkOp{});
      exchanges(p);
      moved = true;
    }
    for (const Op& op : in.ops) {
      if (!reads_rhs(op)) {
        p.ops.push_back(op);
        if (!moved && std::holds_alternative<ForkOp>(op)) {
          exchanges(p);
          moved = true;
        }
        continue;
      }
      const GemmOp& o = std::get<GemmOp>(op);
      if (f_.columns) {
        for (int s = 0; s < f_.size; ++s) shard_gemm(p, o, (f_.me - s + f_.size) % f_.size, s);
      } else {
        wait(p, o.stream, f_.size - 1);
        GemmOp whole = o;
        whole.rhs = slot(f_, 0);
        p.ops.push_back(std::move(whole));
      }
    }
    return p;
  }

 private:
  // Step s = 1..size-1: this rank's shard to fsdp rank me + s, rank me - s's into its slot.
  void exchanges(Program& p) const {
    const Ref own{Operand::kRhs};
    for (int s = 1; s < f_.size; ++s) {
      const int to = (f_.me + s) % f_.size, from = (f_.me - s + f_.size) % f_.size;
      ExchangeOp x;
      x.transfers.push_back({own, f_.shard_bytes, to, slot(f_, f_.me).offset, from,
                             slot(f_, from).offset,
                             g_.name + " fsdp step " + std::to_string(s) + ": rhs shard " +
                                 std::to_string(f_.me) + " -> fsdp rank " + std::to_string(to)});
      x.token = first_token_ + s - 1;
      x.group = Group::kFsdp;
      x.ring = Workspace::kFsdpRing;
      p.ops.push_back(std::move(x));
    }
  }

  // Later work on `stream` waits for exchange step `step` (and so every step before it: the
  // exchanges finish in start order). Nothing to wait for on the other paths, or for step 0.
  void wait(Program& p, int stream, int step) {
    if (how_ != Arrival::kExchanges || step == 0) return;
    int& done = waited_[stream];
    if (done >= step) return;
    p.ops.push_back(WaitOp{first_token_ + step - 1, stream});
    done = step;
  }

  // The part of GEMM `o` on rhs shard j (arrived at step s): its columns of the output.
  void shard_gemm(Program& p, const GemmOp& o, int j, int s) {
    wait(p, o.stream, s);
    const int64_t n = o.task.n / f_.size;
    const size_t columns = static_cast<size_t>(j) * static_cast<size_t>(n);
    GemmOp part = o;
    part.task.n = n;
    if (!o.task.rhs_transposed) part.task.ldb = n;  // a [K, N/f] shard; [N/f, K] keeps ldb K
    part.rhs = how_ == Arrival::kExchanges && j == f_.me ? Ref{Operand::kRhs} : slot(f_, j);
    part.out = o.out.plus(columns * dtype_size(o.task.out_dtype));
    if (o.bias) part.bias = o.bias->plus(columns * dtype_size(o.task.out_dtype));
    part.label = o.label + " rhs shard " + std::to_string(j);
    p.ops.push_back(std::move(part));
  }

  const FsdpGather& f_;
  const GemmGeometry& g_;
  Arrival how_;
  int first_token_ = 0;
  std::map<int, int> waited_;  // stream -> the last step it waited for
};

}  // namespace

void add_fsdp_gather(CollectiveGemm& c, const FsdpGather& f, const GemmGeometry& g) {
  if (f.size < 2) return;
  if (f.columns && g.n % f.size != 0) {
    throw Error("GEMM '" + g.name + "': " + std::to_string(g.n) + " output columns do not split " +
                "into fsdp=" + std::to_string(f.size) + " shards (an internal error: planning " +
                "checks it)");
  }
  const auto rewrite = [&](Program& p, Arrival how) { p = Rewrite(f, g, how).run(p); };
  rewrite(c.overlapped, Arrival::kExchanges);
  rewrite(c.sequential, Arrival::kAllGather);
  if (c.overlapped_gathering) rewrite(*c.overlapped_gathering, Arrival::kExchanges);
  if (c.sequential_gathering) rewrite(*c.sequential_gathering, Arrival::kAllGather);
  rewrite(c.gemm_only, Arrival::kThere);
  // The collective alone: the kind's own, after the weight's all-gather.
  Program gather;
  gather.workspace = c.collective_only.workspace;
  gather.workspace.fsdp_ring = static_cast<int64_t>(g.times(f.shard_bytes, f.size, "fsdp ring"));
  gather.ops.push_back(AllGatherOp{{Operand::kRhs},
                                   slot(f, 0),
                                   f.shard_bytes,
                                   0,
                                   g.name + " fsdp all-gather rhs",
                                   Group::kFsdp});
  for (Op& op : c.collective_only.ops) gather.ops.push_back(std::move(op));
  gather.tokens = c.collective_only.tokens;
  gather.ring_group = c.collective_only.ring_group;
  c.collective_only = std::move(gather);
  c.fsdp = f.size;
  c.summary += ", rhs gathered over fsdp=" + std::to_string(f.size) +
               (f.columns ? " (one GEMM per shard of the output columns, as each arrives)"
                          : " (the contracting dim's shards, whole before the GEMMs)");
}

}  // namespace cgemm
