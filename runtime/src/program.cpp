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
                          return Access{with({o.lhs, o.rhs}, o.bias), {o.out}};
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
                        [](const AllGatherOp& o) {
                          return Access{{o.src}, {o.dst}};
                        },
                        [](const ReduceScatterOp& o) {
                          return Access{{o.src}, {o.dst}};
                        },
                        [](const AllReduceOp& o) {
                          return Access{{o.buf}, {o.buf}};
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
  }
  return s.ring;  // unreachable: every Workspace is a case above (-Wswitch)
}

int64_t workspace_bytes(const WorkspaceSizes& s, Workspace w) {
  return workspace_bytes(const_cast<WorkspaceSizes&>(s), w);  // NOLINT: read only
}

}  // namespace cgemm
