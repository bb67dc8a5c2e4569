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
  return std::visit(
      Overloaded{
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
            return Access{{o.src, o.state}, with(with({o.dst}, o.block_scale), o.amax)};
          },
          [](const GroupSizesToHostOp& o) {
            return Access{{o.src}, {o.dst}};
          },
          [&](const GroupedGemmOp& o) {
            std::vector<Ref> reads = with({o.lhs, o.rhs}, o.bias);
            for (const auto* r : {&o.host_sizes, &o.sizes, &o.lhs_scale_inv, &o.rhs_scale_inv}) {
              reads = with(std::move(reads), *r);
            }
            return Access{std::move(reads), {o.out}};
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
    case Workspace::kHost:
      return s.host;
    case Workspace::kFsdpRing:
      return s.fsdp_ring;
  }
  return s.ring;  // unreachable: every Workspace is a case above (-Wswitch)
}

CaptureTrait capture_trait(const Op& op) {
  constexpr CaptureTrait device{Capture::kDevice, ""}, transport{Capture::kTransport, ""};
  return std::visit(
      Overloaded{
          [&](const ForkOp&) { return device; },
          [&](const JoinOp&) { return device; },
          [&](const GemmOp&) { return device; },
          [&](const ExchangeOp&) { return transport; },
          [&](const WaitOp&) { return transport; },
          [&](const SumOp&) { return device; },
          [&](const ReorderOp&) { return device; },
          [&](const CopyOp&) { return device; },
          // The sequential path's collectives run on NCCL or over the ring's transport.
          [&](const AllGatherOp&) { return transport; },
          [&](const ReduceScatterOp&) { return transport; },
          [&](const AllReduceOp&) { return transport; },
          [&](const AmaxOp&) { return device; },
          // The max over the tp group, then over the dp group (Backend::all_reduce_max): on the
          // CUDA backend those groups' collectives, on the device.
          [&](const AmaxReduceOp&) { return transport; },
          [&](const ScaleOp&) { return device; },
          [&](const QuantizeOp&) { return device; },
          [&](const GroupSizesToHostOp&) {
            return CaptureTrait{Capture::kHost,
                                "the grouped GEMM's group sizes are copied to the host, which "
                                "waits for the device, to compute every group's pointers"};
          },
          // With host sizes, its pointers are computed on the host from them (or, on the
          // device tiles path, the sizes staged from there): a replay would run the captured
          // call's sizes. Without, a kernel reads them in backend memory at every replay.
          [&](const GroupedGemmOp& o) {
            if (!o.host_sizes) return device;
            return CaptureTrait{Capture::kHost,
                                "the grouped GEMM computes its groups' pointers on the host from "
                                "this call's sizes; a replay would reuse the captured call's"};
          },
      },
      op);
}

namespace {

// What a refusal names an op by: its kind, and its label where it has one.
std::string op_name(const Op& op) {
  const auto labelled = [](const char* kind, const std::string& label) {
    return label.empty() ? std::string(kind) : std::string(kind) + " '" + label + "'";
  };
  return std::visit(
      Overloaded{
          [&](const ForkOp&) { return std::string("fork"); },
          [&](const JoinOp&) { return std::string("join"); },
          [&](const GemmOp& o) { return labelled("gemm", o.label); },
          [&](const ExchangeOp& o) {
            return labelled("exchange", o.transfers.empty() ? "" : o.transfers.front().label);
          },
          [&](const WaitOp&) { return std::string("wait"); },
          [&](const SumOp&) { return std::string("sum"); },
          [&](const ReorderOp&) { return std::string("reorder"); },
          [&](const CopyOp& o) { return labelled("copy", o.label); },
          [&](const AllGatherOp& o) { return labelled("all-gather", o.label); },
          [&](const ReduceScatterOp& o) { return labelled("reduce-scatter", o.label); },
          [&](const AllReduceOp& o) { return labelled("all-reduce", o.label); },
          [&](const AmaxOp&) { return std::string("amax"); },
          [&](const AmaxReduceOp& o) { return labelled("amax reduction", o.label); },
          [&](const ScaleOp&) { return std::string("scale update"); },
          [&](const QuantizeOp& o) { return labelled("quantize", o.label); },
          [&](const GroupSizesToHostOp& o) { return labelled("group sizes to host", o.label); },
          [&](const GroupedGemmOp& o) { return labelled("grouped gemm", o.label); },
      },
      op);
}

}  // namespace

std::string capture_refusal(const Program& p, const std::string& transport_refusal) {
  for (const Op& op : p.ops) {
    const CaptureTrait t = capture_trait(op);
    if (t.capture == Capture::kHost) return op_name(op) + " cannot be captured: " + t.why;
    if (t.capture == Capture::kTransport && !transport_refusal.empty()) {
      return op_name(op) + " cannot be captured: " + transport_refusal;
    }
  }
  return "";
}

const char* workspace_name(Workspace w) {
  switch (w) {
    case Workspace::kRing:
      return "ring";
    case Workspace::kSend:
      return "send";
    case Workspace::kWorkIn:
      return "work_in";
    case Workspace::kWorkOut:
      return "work_out";
    case Workspace::kQuant:
      return "quant";
    case Workspace::kScales:
      return "scales";
    case Workspace::kHost:
      return "host";
    case Workspace::kFsdpRing:
      return "fsdp_ring";
  }
  return "?";  // unreachable: every Workspace is a case above (-Wswitch)
}

int64_t workspace_bytes(const WorkspaceSizes& s, Workspace w) {
  return workspace_bytes(const_cast<WorkspaceSizes&>(s), w);  // NOLINT: read only
}

}  // namespace cgemm
