#include "program.hpp"

#include <algorithm>

namespace cgemm {

namespace {

// Every Ref an op names, read or written.
std::vector<Ref> refs(const Op& op) {
  const auto with_bias = [](std::vector<Ref> r, const std::optional<Ref>& bias) {
    if (bias) r.push_back(*bias);
    return r;
  };
  return std::visit(Overloaded{
                        [](const ForkOp&) { return std::vector<Ref>{}; },
                        [](const JoinOp&) { return std::vector<Ref>{}; },
                        [&](const GemmOp& o) {
                          return with_bias({o.lhs, o.rhs, o.out}, o.bias);
                        },
                        [](const ExchangeOp& o) {
                          std::vector<Ref> r;
                          for (const Transfer& t : o.transfers) r.push_back(t.src);
                          return r;
                        },
                        [](const WaitOp&) { return std::vector<Ref>{}; },
                        [&](const SumOp& o) {
                          std::vector<Ref> r = o.parts;
                          r.push_back(o.out);
                          return with_bias(std::move(r), o.bias);
                        },
                        [](const ReorderOp& o) {
                          return std::vector<Ref>{o.src, o.dst};
                        },
                        [](const AllGatherOp& o) {
                          return std::vector<Ref>{o.src, o.dst};
                        },
                        [](const ReduceScatterOp& o) {
                          return std::vector<Ref>{o.src, o.dst};
                        },
                        [](const AllReduceOp& o) { return std::vector<Ref>{o.buf}; },
                    },
                    op);
}

}  // namespace

std::vector<Operand> Program::operands_used() const {
  std::vector<Operand> out;
  for (const Op& op : ops) {
    for (const Ref& r : refs(op)) {
      if (const auto* o = std::get_if<Operand>(&r.buf)) {
        if (std::find(out.begin(), out.end(), *o) == out.end()) out.push_back(*o);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
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
