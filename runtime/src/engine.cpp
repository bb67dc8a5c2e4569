#include "engine.hpp"

#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace cgemm {

namespace {

char* offset(void* p, size_t bytes) { return static_cast<char*>(p) + bytes; }

// Grows a private workspace to `bytes` (never shrinks it: plans of one shape reuse it).
void grow(Backend& be, void*& buf, size_t& have, size_t bytes) {
  if (bytes == 0 || (buf != nullptr && have >= bytes)) return;
  if (buf != nullptr) be.release(buf);
  buf = be.allocate(bytes);
  have = bytes;
}

void drop(Backend& be, void*& buf, size_t& have) {
  if (buf != nullptr) be.release(buf);
  buf = nullptr;
  have = 0;
}

// Test-only fault switch, for the watchdog's tests: CGEMM_TEST_FAULT=KIND:RANK[:N] makes world
// rank RANK, at its N-th exchange (default 1), either stop itself (KIND stop: SIGSTOP, a
// stalled peer) or skip the exchange (KIND skip_exchange: a peer that never posts its half;
// its own waits pass, its peers' never do). Unset: no fault.
struct Fault {
  enum Kind { kNone, kStop, kSkip } kind = kNone;
  int rank = -1;
  long at = 1;
};

Fault read_fault() {
  const char* v = std::getenv("CGEMM_TEST_FAULT");
  Fault f;
  if (v == nullptr || *v == '\0') return f;
  const std::string s(v);
  const size_t c1 = s.find(':');
  const std::string kind = s.substr(0, c1);
  if (kind == "stop") {
    f.kind = Fault::kStop;
  } else if (kind == "skip_exchange") {
    f.kind = Fault::kSkip;
  }
  try {
    if (f.kind == Fault::kNone || c1 == std::string::npos) throw std::invalid_argument(s);
    const size_t c2 = s.find(':', c1 + 1);
    f.rank = std::stoi(s.substr(c1 + 1, c2 - c1 - 1));
    if (c2 != std::string::npos) f.at = std::stol(s.substr(c2 + 1));
  } catch (const std::exception&) {
    throw Error("CGEMM_TEST_FAULT='" + s + "': expected stop:RANK[:N] or skip_exchange:RANK[:N]");
  }
  return f;
}

const Fault& fault() {
  static const Fault f = read_fault();
  return f;
}

}  // namespace

Engine::Engine(Backend& be, int world_rank) : be_(be), world_rank_(world_rank) {
  static_cast<void>(fault());  // a bad value fails at planning, not mid-run
}

Engine::~Engine() {
  if (ring_.local != nullptr) be_.release_symmetric(ring_);
  drop(be_, send_, have_.send);
  drop(be_, work_in_, have_.work_in);
  drop(be_, work_out_, have_.work_out);
}

void Engine::ensure(const WorkspaceBytes& need) {
  // The ring is allocated once at its size: every rank of the TP group runs the same
  // programs, so every rank reaches this allocation (a collective one) at the same op.
  if (need.ring > 0 && ring_.local == nullptr) {
    ring_ = be_.allocate_symmetric(need.ring);
    have_.ring = need.ring;
  }
  if (need.ring > have_.ring) {
    throw Error("engine: a program needs a ring of " + std::to_string(need.ring) +
                " bytes, the plan holds " + std::to_string(have_.ring));
  }
  grow(be_, send_, have_.send, need.send);
  grow(be_, work_in_, have_.work_in, need.work_in);
  grow(be_, work_out_, have_.work_out, need.work_out);
}

void* Engine::at_mut(const Ref& r, const Operands& x) const {
  void* base = nullptr;
  switch (r.buf) {
    case Buf::kOut:
      base = x.out;
      break;
    case Buf::kRing:
      base = ring_.local;
      break;
    case Buf::kSend:
      base = send_;
      break;
    case Buf::kWorkIn:
      base = work_in_;
      break;
    case Buf::kWorkOut:
      base = work_out_;
      break;
    default:
      throw Error("engine: an operation writes to a read-only operand");
  }
  return offset(base, r.offset);
}

const void* Engine::at(const Ref& r, const Operands& x) const {
  switch (r.buf) {
    case Buf::kLhs:
      return static_cast<const char*>(x.lhs) + r.offset;
    case Buf::kRhs:
      return static_cast<const char*>(x.rhs) + r.offset;
    case Buf::kBias:
      return static_cast<const char*>(x.bias) + r.offset;
    default:
      return at_mut(r, x);
  }
}

void Engine::run(const Program& p, const Operands& x) {
  ensure(p.workspace);
  tokens_.assign(static_cast<size_t>(p.tokens), -1);
  // Labels name the work in traces and in the watchdog's timeout messages.
  const auto label = [](const std::string& s) { return s.c_str(); };
  for (const Op& op : p.ops) {
    std::visit(
        [&](const auto& o) {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, ForkOp>) {
            be_.fork_streams();
          } else if constexpr (std::is_same_v<T, JoinOp>) {
            be_.join_streams(o.stream);
          } else if constexpr (std::is_same_v<T, GemmOp>) {
            GemmTask t = o.task;
            t.lhs = at(o.lhs, x);
            t.rhs = x.rhs;
            t.out = at_mut(o.out, x);
            t.bias = o.bias ? x.bias : nullptr;
            t.label = label(o.label);
            be_.gemm(t, o.stream);
          } else if constexpr (std::is_same_v<T, ExchangeOp>) {
            std::vector<Exchange> group;
            group.reserve(o.transfers.size());
            for (const Transfer& tr : o.transfers) {
              group.push_back({.src = at(tr.src, x),
                               .bytes = tr.bytes,
                               .send_peer = tr.send_peer,
                               .send_offset = tr.send_offset,
                               .recv_peer = tr.recv_peer,
                               .recv_offset = tr.recv_offset,
                               .dst = &ring_,
                               .label = label(tr.label)});
            }
            const Fault& f = fault();
            static long exchanges_run = 0;  // this process's, over all plans
            if (f.kind != Fault::kNone && f.rank == world_rank_ && ++exchanges_run == f.at) {
              if (f.kind == Fault::kStop) raise(SIGSTOP);
              if (f.kind == Fault::kSkip) group.clear();
            }
            tokens_[static_cast<size_t>(o.token)] = be_.start_exchange(group, o.after_stream);
          } else if constexpr (std::is_same_v<T, WaitOp>) {
            be_.wait_exchange(tokens_[static_cast<size_t>(o.token)], o.stream);
          } else if constexpr (std::is_same_v<T, SumOp>) {
            std::vector<const void*> parts;
            parts.reserve(o.parts.size());
            for (const Ref& r : o.parts) parts.push_back(at(r, x));
            be_.sum_partials(parts, o.part_dtype, o.count, o.bias ? x.bias : nullptr, o.bias_len,
                             at_mut(o.out, x), o.out_dtype, o.stream);
          } else if constexpr (std::is_same_v<T, ReorderOp>) {
            be_.reorder(o.kind, o.shape, o.dp, at(o.src, x), at_mut(o.dst, x), o.dtype, o.stream);
          } else if constexpr (std::is_same_v<T, AllGatherOp>) {
            be_.all_gather(at(o.src, x), at_mut(o.dst, x), o.bytes_per_rank, o.stream,
                           label(o.label));
          } else if constexpr (std::is_same_v<T, ReduceScatterOp>) {
            be_.reduce_scatter(at(o.src, x), at_mut(o.dst, x), o.dtype, o.count_per_rank, o.stream,
                               label(o.label));
          } else if constexpr (std::is_same_v<T, AllReduceOp>) {
            be_.all_reduce(at_mut(o.buf, x), o.dtype, o.count, o.stream, label(o.label));
          }
        },
        op);
  }
}

}  // namespace cgemm
