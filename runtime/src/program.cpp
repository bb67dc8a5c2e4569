#include "program.hpp"

#include <algorithm>
#include <string>

#include "cgemm/core/error.hpp"

namespace cgemm {

namespace {

// The Refs an op reads and the ones it writes.
struct Access {
  std::vector<Ref> reads, writes;
};

Access access(const Op& op) {
  const auto with = [](std::vector<Ref> r, const std::optional<Ref>& extra) {
    if (extra) r.push_back(*extra);
    return r;
  };
  return std::visit(Overloaded{
                        [](const ForkOp&) { return Access{}; },
                        [](const JoinOp&) { return Access{}; },
                        [&](const GemmOp& o) {
                          std::vector<Ref> reads = with({o.lhs, o.rhs}, o.bias);
                          for (const auto* s : {&o.scales.lhs_scale_inv, &o.scales.rhs_scale_inv,
                                                &o.scales.lhs_block, &o.scales.rhs_block}) {
                            reads = with(std::move(reads), *s);
                          }
                          return Access{std::move(reads), {o.out}};
                        },
                        [](const ExchangeOp& o) {
                          Access a;
                          for (const Transfer& t : o.transfers) a.reads.push_back(t.src);
                          return a;
                        },
                        [](const WaitOp&) { return Access{}; },
                        [&](const SumOp& o) {
                          return Access{with(o.parts, o.bias), {o.out}};
                        },
                        [](const ReorderOp& o) {
                          return Access{{o.src}, {o.dst}};
                        },
                        [](const CopyOp& o) {
                          return Access{{o.src}, {o.dst}};
                        },
                        [](const AllGatherOp& o) {
                          return Access{{o.src}, {o.dst}};
                        },
                        [](const ReduceScatterOp& o) {
                          return Access{{o.src}, {o.dst}};
                        },
                        [](const AllReduceOp& o) {
                          return Access{{o.buf}, {o.buf}};
                        },
                        [](const AmaxOp& o) {
                          return Access{{o.src}, {o.amax}};
                        },
                        [](const AmaxReduceOp& o) {
                          return Access{{o.amax}, {o.amax}};
                        },
                        [](const ScaleOp& o) {
                          return Access{{o.state, o.amax}, {o.state}};
                        },
                        [&](const QuantizeOp& o) {
                          return Access{{o.src, o.state}, with({o.dst}, o.block_scale)};
                        },
                    },
                    op);
}

}  // namespace

std::vector<Operand> Program::operands_used() const {
  std::vector<Operand> out;
  const auto add = [&](const std::vector<Ref>& refs) {
    for (const Ref& r : refs) {
      if (const auto* o = std::get_if<Operand>(&r.buf)) {
        if (std::find(out.begin(), out.end(), *o) == out.end()) out.push_back(*o);
      }
    }
  };
  for (const Op& op : ops) {
    const Access a = access(op);
    add(a.reads);
    add(a.writes);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void Program::check_writes(const std::string& gemm) const {
  for (const Op& op : ops) {
    for (const Ref& r : access(op).writes) {
      const auto* o = std::get_if<Operand>(&r.buf);
      if (o != nullptr && !kOperandSlots[Operands::index(*o)].written) {
        throw Error("GEMM '" + gemm + "': a planned operation writes the caller's " +
                    std::string(Operands::name(*o)) + ", which the call only reads");
      }
    }
  }
}

void require_operands(const std::string& gemm, const std::vector<Operand>& used,
                      const Operands& x) {
  for (Operand slot : used) {
    if (x.has(slot)) continue;
    if (slot == Operand::kBias) {
      throw Error("GEMM '" + gemm + "' was planned with a bias but got none");
    }
    throw Error("GEMM '" + gemm + "': operand '" + std::string(Operands::name(slot)) +
                "' is null; the plan reads or writes it");
  }
}

int64_t& workspace_bytes(WorkspaceSizes& s, Workspace w) {
  switch (w) {
    case Workspace::kRing:
      return s.ring;
    case Workspace::kSend:
      return s.send;
    case Workspace::kWorkIn:
      return s.work_in;
    case Workspace::kWorkOut:
      return s.work_out;
    case Workspace::kQuant:
      return s.quant;
    case Workspace::kScales:
      return s.scales;
  }
  return s.ring;  // unreachable: every Workspace is a case above (-Wswitch)
}

int64_t workspace_bytes(const WorkspaceSizes& s, Workspace w) {
  return workspace_bytes(const_cast<WorkspaceSizes&>(s), w);  // NOLINT: read only
}

}  // namespace cgemm
