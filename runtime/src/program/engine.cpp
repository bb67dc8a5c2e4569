#include "engine.hpp"

#include "cgemm/core/env.hpp"

#include <algorithm>
#include <array>
#include <csignal>
#include <optional>
#include <stdexcept>
#include <string>

namespace cgemm {

namespace {

char* offset(void* p, size_t bytes) { return static_cast<char*>(p) + bytes; }

// Grows a private workspace to `bytes` (never shrinks it: plans of one shape reuse it).
void grow(Backend& be, void*& buf, int64_t& have, int64_t bytes) {
  if (bytes == 0 || (buf != nullptr && have >= bytes)) return;
  if (buf != nullptr) be.release(buf);
  buf = be.allocate(static_cast<size_t>(bytes));
  have = bytes;
}

constexpr std::array<Workspace, 4> kPrivate{Workspace::kSend, Workspace::kWorkIn,
                                            Workspace::kWorkOut, Workspace::kQuant};

size_t slot(Workspace w) { return static_cast<size_t>(w); }

// Test-only fault switch (env::kTestFault), for the watchdog's tests:
// CGEMM_TEST_FAULT=KIND:RANK[:N] makes world rank RANK, at the N-th exchange of a plan (each
// Engine counts its own; default 1), either
// stop itself (KIND stop: SIGSTOP, a stalled peer), skip the exchange (KIND skip_exchange: a peer
// that never posts its half; its own waits pass, its peers' never do) or die (KIND die: SIGKILL,
// a peer that crashes mid-exchange). Unset: no fault.
struct Fault {
  enum Kind { kNone, kStop, kSkip, kDie } kind = kNone;
  int rank = -1;
  long at = 1;
};

Fault read_fault() {
  Fault f;
  const std::optional<std::string> v = env_text(env::kTestFault);
  if (!v) return f;
  const std::string& s = *v;
  const size_t c1 = s.find(':');
  const std::string kind = s.substr(0, c1);
  if (kind == "stop") {
    f.kind = Fault::kStop;
  } else if (kind == "skip_exchange") {
    f.kind = Fault::kSkip;
  } else if (kind == "die") {
    f.kind = Fault::kDie;
  }
  try {
    if (f.kind == Fault::kNone || c1 == std::string::npos) throw std::invalid_argument(s);
    const size_t c2 = s.find(':', c1 + 1);
    f.rank = std::stoi(s.substr(c1 + 1, c2 - c1 - 1));
    if (c2 != std::string::npos) f.at = std::stol(s.substr(c2 + 1));
  } catch (const std::exception&) {
    throw Error("CGEMM_TEST_FAULT='" + s +
                "': expected stop:RANK[:N], skip_exchange:RANK[:N] or die:RANK[:N]");
  }
  return f;
}

const Fault& fault() {
  static const Fault f = read_fault();
  return f;
}

}  // namespace

Engine::Engine(Backend& be, int world_rank, SharedRing* fsdp_ring)
    : be_(be), shared_fsdp_(fsdp_ring), world_rank_(world_rank) {
  static_cast<void>(fault());  // a bad value fails at planning, not mid-run
}

Engine::~Engine() {
  for (const auto& [shape, handle] : grouped_) be_.release_grouped_gemm(handle);
  if (ring_.local != nullptr) be_.release_symmetric(ring_);
  if (fsdp_ring_.local != nullptr) be_.release_symmetric(fsdp_ring_);
  if (uses_shared_fsdp_) shared_fsdp_->drop_user();
  for (void* p : private_) {
    if (p != nullptr) be_.release(p);
  }
}

GroupedGemmHandle Engine::grouped_handle(const GroupedGemmShape& shape) const {
  for (const auto& [s, h] : grouped_) {
    if (s == shape) return h;
  }
  return 0;
}

void Engine::prepare(std::span<const Program* const> programs) {
  WorkspaceSizes need;
  const Program* with_scales = nullptr;
  for (const Program* p : programs) {
    for (Workspace w : kPrivate) {
      workspace_bytes(need, w) =
          std::max(workspace_bytes(need, w), workspace_bytes(p->workspace, w));
    }
    need.ring = std::max(need.ring, p->workspace.ring);
    need.fsdp_ring = std::max(need.fsdp_ring, p->workspace.fsdp_ring);
    need.host = std::max(need.host, p->workspace.host);
    if (p->workspace.ring > 0) {
      if (ring_group_ && *ring_group_ != p->ring_group) {
        throw Error(std::string("engine: a program's ring is symmetric over ") +
                    group_name(p->ring_group) + ", the plan's over " + group_name(*ring_group_));
      }
      ring_group_ = p->ring_group;
    }
    if (p->workspace.scales == 0) continue;
    if (with_scales == nullptr) {
      with_scales = p;
    } else if (p->scales_init != with_scales->scales_init) {
      throw Error("engine: two programs of one plan start their shared scale state differently");
    }
  }
  // The ring is allocated once at its size: every rank of its group prepares the same
  // programs, so every rank reaches this allocation (a collective one) alike.
  if (need.ring > 0 && ring_.local == nullptr) {
    ring_ = be_.allocate_symmetric(static_cast<size_t>(need.ring), *ring_group_);
    have_.ring = need.ring;
  }
  if (need.ring > have_.ring) {
    throw Error("engine: a program needs a ring of " + std::to_string(need.ring) +
                " bytes, the plan holds " + std::to_string(have_.ring));
  }
  // The same for the FSDP gather's slots, over the fsdp group (after the ring, on every rank):
  // the Context's shared ring grown to this plan's need, or this engine's own.
  if (need.fsdp_ring > 0 && shared_fsdp_ != nullptr) {
    shared_fsdp_->reserve(be_, need.fsdp_ring);
    if (!uses_shared_fsdp_) shared_fsdp_->add_user();
    uses_shared_fsdp_ = true;
    have_.fsdp_ring = std::max(have_.fsdp_ring, need.fsdp_ring);
  } else if (need.fsdp_ring > 0 && fsdp_ring_.local == nullptr) {
    fsdp_ring_ = be_.allocate_symmetric(static_cast<size_t>(need.fsdp_ring), Group::kFsdp);
    have_.fsdp_ring = need.fsdp_ring;
  }
  if (need.fsdp_ring > have_.fsdp_ring) {
    throw Error("engine: a program needs an fsdp ring of " + std::to_string(need.fsdp_ring) +
                " bytes, the plan holds " + std::to_string(have_.fsdp_ring));
  }
  // Collective too, so before any allocation that may fail on one rank alone (the plan then
  // agrees on the failure over the world: a rank gone there must not leave its peers here).
  reserve_collectives(programs);
  for (Workspace w : kPrivate) {
    grow(be_, private_[slot(w)], workspace_bytes(have_, w), workspace_bytes(need, w));
  }
  if (need.host > have_.host) {
    host_.resize(static_cast<size_t>(need.host));
    have_.host = need.host;
  }
  // One backend state per distinct grouped GEMM shape (a plan's programs share theirs).
  for (const Program* p : programs) {
    for (const Op& op : p->ops) {
      const auto* g = std::get_if<GroupedGemmOp>(&op);
      if (g == nullptr || std::any_of(grouped_.begin(), grouped_.end(),
                                      [&](const auto& e) { return e.first == g->shape; })) {
        continue;
      }
      grouped_.emplace_back(g->shape, be_.prepare_grouped_gemm(g->shape, g->label));
    }
  }
  // The scale state lives as long as the plan: set once, then only the programs' scale
  // updates change it (delayed scaling's history runs across calls and both paths).
  if (with_scales != nullptr && private_[slot(Workspace::kScales)] == nullptr) {
    const Program& p = *with_scales;
    const size_t bytes = p.scales_init.size() * sizeof(float);
    if (static_cast<int64_t>(bytes) != p.workspace.scales) {
      throw Error("engine: a program's scale state holds " + std::to_string(bytes) +
                  " bytes of initial values for " + std::to_string(p.workspace.scales) + " bytes");
    }
    void* state = be_.allocate(bytes);
    be_.copy_from_host(state, p.scales_init.data(), bytes);
    private_[slot(Workspace::kScales)] = state;
    have_.scales = p.workspace.scales;
  }
  for (const Program* p : programs) check_prepared(*p);
}

void Engine::reserve_collectives(std::span<const Program* const> programs) {
  // The bytes each group's collectives stage for a call: every rank's block. Every rank
  // prepares the same programs in the same order, so the reservations stay collective.
  std::array<size_t, kGroups.size()> need{};
  const auto at_least = [&](Group g, size_t block) {
    size_t& n = need[group_index(g)];
    n = std::max(n, block * static_cast<size_t>(be_.group_size(g)));
  };
  for (const Program* p : programs) {
    for (const Op& op : p->ops) {
      if (const auto* o = std::get_if<AllGatherOp>(&op)) {
        at_least(o->group, o->bytes_per_rank);
      } else if (const auto* r = std::get_if<ReduceScatterOp>(&op)) {
        at_least(r->group, static_cast<size_t>(r->count_per_rank) * dtype_size(r->dtype));
      } else if (const auto* a = std::get_if<AllReduceOp>(&op)) {
        at_least(a->group, static_cast<size_t>(a->count) * dtype_size(a->dtype));
      } else if (const auto* m = std::get_if<AmaxReduceOp>(&op)) {
        for (Group g : kGroups) at_least(g, static_cast<size_t>(m->count) * sizeof(float));
      }
    }
  }
  for (Group g : kGroups) {
    if (need[group_index(g)] > 0) be_.reserve_collectives(g, need[group_index(g)]);
  }
}

void Engine::check_prepared(const Program& p) const {
  for (Workspace w : kWorkspaces) {
    const int64_t need = workspace_bytes(p.workspace, w), have = workspace_bytes(have_, w);
    if (need > have) {
      throw Error("engine: a program needs " + std::to_string(need) + " bytes of workspace " +
                  workspace_name(w) + ", the plan prepared " + std::to_string(have) +
                  " (an internal error: plans prepare every program " +
                  "they run when they are made)");
    }
  }
  if (p.workspace.ring > 0 && ring_group_ != p.ring_group) {
    throw Error(std::string("engine: a program's ring is over ") + group_name(p.ring_group) +
                ", the prepared ring over another group (an internal error)");
  }
}

std::vector<float> Engine::scales(const Program& p) {
  if (p.workspace.scales == 0) return {};
  check_prepared(p);
  std::vector<float> s(p.scales_init.size());
  be_.copy_to_host(s.data(), base(Workspace::kScales), s.size() * sizeof(float));
  return s;
}

void Engine::set_scales(const Program& p, const std::vector<float>& s) {
  if (s.size() != p.scales_init.size()) {
    throw Error("engine: a scale state of " + std::to_string(s.size()) + " floats for a plan " +
                "that keeps " + std::to_string(p.scales_init.size()));
  }
  if (s.empty()) return;
  check_prepared(p);
  be_.copy_from_host(base(Workspace::kScales), s.data(), s.size() * sizeof(float));
}

void* Engine::base(Workspace w) const {
  if (w == Workspace::kHost) return const_cast<std::byte*>(host_.data());  // NOLINT: the run's
  if (w == Workspace::kRing) return ring_.local;
  if (w == Workspace::kFsdpRing) return fsdp_ring().local;
  return private_[slot(w)];
}

void* Engine::at_mut(const Ref& r, const Operands& x) const {
  void* b = std::visit(
      Overloaded{[&](Operand o) { return x.output(o); }, [&](Workspace w) { return base(w); }},
      r.buf);
  return offset(b, r.offset);
}

const void* Engine::at(const Ref& r, const Operands& x) const {
  const void* b = std::visit(Overloaded{[&](Operand o) { return x.input(o); },
                                        [&](Workspace w) -> const void* { return base(w); }},
                             r.buf);
  return static_cast<const char*>(b) + r.offset;
}

void Engine::check_capturable(const Program& p, const std::string& name) const {
  const std::string why = capture_refusal(p, be_.capture_refusal());
  if (!why.empty()) {
    throw Error((name.empty() ? std::string("this call") : name) +
                " cannot be captured into a CUDA graph: " + why);
  }
}

int64_t Engine::capture(const Program& p, const Operands& x, void* stream,
                        const std::string& name) {
  check_capturable(p, name);
  if (shared_fsdp_ != nullptr && p.workspace.fsdp_ring > 0) shared_fsdp_->mark_captured();
  // Copies of the operands and the name: the CPU backend runs this again at each replay.
  return be_.capture_graph(stream, [this, &p, x, stream, name] { run_on(p, x, stream, name); });
}

void Engine::run_on(const Program& p, const Operands& x, void* external, const std::string& name) {
  if (external == nullptr) {
    run(p, x, name);
    return;
  }
  // A call inside a capture the backend already brackets (capture_graph) needs no second one.
  const bool captured = !be_.capturing() && be_.is_capturing(external);
  if (captured) {
    check_capturable(p, name);  // before anything is recorded
    if (shared_fsdp_ != nullptr && p.workspace.fsdp_ring > 0) shared_fsdp_->mark_captured();
    be_.begin_capture();
  }
  std::optional<CaptureScope> scope;  // end_capture on every way out
  if (captured) scope.emplace(be_);
  be_.after_external(external);
  try {
    run(p, x, name);
  } catch (...) {
    // A caching allocator would reuse the caller's buffers once its stream moves on: the stream
    // must wait for what the call queued. The join's own failure is not the error to report.
    try {
      be_.external_after(external);
    } catch (...) {
    }
    throw;
  }
  be_.external_after(external);
}

void Engine::run(const Program& p, const Operands& x, const std::string& name) {
  check_prepared(p);
  if (be_.capturing()) {
    check_capturable(p, name);  // e.g. a training step being captured
    // Whatever captures it (capture(), run_on in a caller's capture, Backend::capture_graph
    // around a whole step), the graph holds the shared ring's address from now on.
    if (shared_fsdp_ != nullptr && p.workspace.fsdp_ring > 0) shared_fsdp_->mark_captured();
  }
  tokens_.assign(static_cast<size_t>(p.tokens), -1);
  // Labels name the work in traces and in the watchdog's timeout messages.
  const auto label = [](const std::string& s) { return s.c_str(); };
  const auto maybe = [&](const std::optional<Ref>& r) { return r ? at(*r, x) : nullptr; };
  // One lambda per kind of op and no catch-all: an op kind added to Op without a lambda here
  // does not compile.
  const Overloaded issue{
      [&](const ForkOp&) { be_.fork_streams(); },
      [&](const JoinOp& o) { be_.join_streams(o.stream); },
      [&](const GemmOp& o) {
        GemmTask t = o.task;
        t.lhs = at(o.lhs, x);
        t.rhs = at(o.rhs, x);
        t.out = at_mut(o.out, x);
        t.bias = maybe(o.bias);
        t.label = label(o.label);
        const auto scale = [&](const std::optional<Ref>& r) {
          return static_cast<const float*>(maybe(r));
        };
        const auto block = [&](const std::optional<Ref>& r) {
          return static_cast<const uint8_t*>(maybe(r));
        };
        t.lhs_scale_inv = scale(o.scales.lhs_scale_inv);
        t.rhs_scale_inv = scale(o.scales.rhs_scale_inv);
        t.lhs_block_scale = block(o.scales.lhs_block);
        t.rhs_block_scale = block(o.scales.rhs_block);
        be_.gemm(t, o.stream);
      },
      [&](const ExchangeOp& o) {
        const SymmetricBuffer* dst = o.ring == Workspace::kFsdpRing ? &fsdp_ring() : &ring_;
        std::vector<Exchange> group;
        group.reserve(o.transfers.size());
        for (const Transfer& tr : o.transfers) {
          group.push_back({.src = at(tr.src, x),
                           .bytes = tr.bytes,
                           .send_peer = tr.send_peer,
                           .send_offset = tr.send_offset,
                           .recv_peer = tr.recv_peer,
                           .recv_offset = tr.recv_offset,
                           .dst = dst,
                           .label = label(tr.label)});
        }
        const Fault& f = fault();
        if (f.kind != Fault::kNone && f.rank == world_rank_ && ++exchanges_run_ == f.at) {
          if (f.kind == Fault::kStop) raise(SIGSTOP);
          if (f.kind == Fault::kSkip) group.clear();
          if (f.kind == Fault::kDie) raise(SIGKILL);
        }
        tokens_[static_cast<size_t>(o.token)] = be_.start_exchange(o.group, group, o.after_stream);
      },
      [&](const WaitOp& o) { be_.wait_exchange(tokens_[static_cast<size_t>(o.token)], o.stream); },
      [&](const SumOp& o) {
        std::vector<const void*> parts;
        parts.reserve(o.parts.size());
        for (const Ref& r : o.parts) parts.push_back(at(r, x));
        be_.sum_partials(parts, o.part_dtype, o.count, maybe(o.bias), o.bias_len, at_mut(o.out, x),
                         o.out_dtype, o.stream);
      },
      [&](const ReorderOp& o) {
        be_.reorder(o.kind, o.shape, o.dp, be_.tp_size(), at(o.src, x), at_mut(o.dst, x), o.dtype,
                    o.stream);
      },
      [&](const CopyOp& o) {
        for (int64_t i = 0; i < o.count; ++i) {
          const auto at_i = [&](const Ref& r, size_t stride) {
            return r.plus(static_cast<size_t>(i) * stride);
          };
          be_.copy(at_mut(at_i(o.dst, o.dst_stride), x), at(at_i(o.src, o.src_stride), x), o.bytes,
                   o.stream, label(o.label));
        }
      },
      [&](const AllGatherOp& o) {
        be_.all_gather(o.group, at(o.src, x), at_mut(o.dst, x), o.bytes_per_rank, o.stream,
                       label(o.label));
      },
      [&](const ReduceScatterOp& o) {
        be_.reduce_scatter(o.group, at(o.src, x), at_mut(o.dst, x), o.dtype, o.count_per_rank,
                           o.stream, label(o.label));
      },
      [&](const AllReduceOp& o) {
        be_.all_reduce(o.group, at_mut(o.buf, x), o.dtype, o.count, o.stream, label(o.label));
      },
      [&](const AmaxOp& o) {
        be_.amax(at(o.src, x), o.dtype, o.count, static_cast<float*>(at_mut(o.amax, x)), o.stream);
      },
      [&](const AmaxReduceOp& o) {
        be_.all_reduce_max(static_cast<float*>(at_mut(o.amax, x)), o.count, o.stream,
                           label(o.label));
      },
      [&](const ScaleOp& o) {
        ScaleUpdate u = o.update;
        u.state = static_cast<float*>(at_mut(o.state, x));
        u.amax = static_cast<const float*>(at(o.amax, x));
        be_.update_scale(u, o.stream);
      },
      [&](const QuantizeOp& o) {
        QuantizeTask t = o.task;
        t.src = at(o.src, x);
        t.dst = at_mut(o.dst, x);
        t.state = static_cast<const float*>(at(o.state, x));
        t.block_scale = o.block_scale ? static_cast<uint8_t*>(at_mut(*o.block_scale, x)) : nullptr;
        t.amax = o.amax ? static_cast<float*>(at_mut(*o.amax, x)) : nullptr;
        t.label = label(o.label);
        be_.quantize(t, o.stream);
      },
      [&](const GroupSizesToHostOp& o) {
        be_.copy_to_host(at_mut(o.dst, x), at(o.src, x),
                         static_cast<size_t>(o.count) * sizeof(int32_t));
      },
      [&](const GroupedGemmOp& o) {
        const auto handle = std::find_if(grouped_.begin(), grouped_.end(),
                                         [&](const auto& e) { return e.first == o.shape; });
        if (handle == grouped_.end()) {
          throw Error("engine: grouped GEMM '" + o.label +
                      "' was not prepared (an internal error: plans prepare every program they "
                      "run when they are made)");
        }
        GroupedGemmTask t;
        t.shape = o.shape;
        t.handle = handle->second;
        t.lhs = at(o.lhs, x);
        t.rhs = at(o.rhs, x);
        t.bias = maybe(o.bias);
        t.out = at_mut(o.out, x);
        t.host_sizes = static_cast<const int32_t*>(maybe(o.host_sizes));
        t.sizes = static_cast<const int32_t*>(maybe(o.sizes));
        t.lhs_scale_inv = static_cast<const float*>(maybe(o.lhs_scale_inv));
        t.rhs_scale_inv = static_cast<const float*>(maybe(o.rhs_scale_inv));
        t.scale_stride = o.scale_stride;
        t.label = label(o.label);
        t.group_labels = o.group_labels;
        // Before anything of the call is issued: a bad size would make every offset wrong.
        // Sizes only in backend memory are the backend's to check (grouped_task.hpp).
        int64_t sum = -1;
        if (t.host_sizes != nullptr) {
          sum = check_group_sizes(o.shape, o.label,
                                  {t.host_sizes, static_cast<size_t>(o.shape.groups)});
        }
        if (!be_.grouped_gemm(t, o.stream)) ++grouped_fallbacks_;
        if (sum >= 0) zero_padding_rows(be_, t, sum, o.stream);
      },
  };
  for (const Op& op : p.ops) std::visit(issue, op);
}

}  // namespace cgemm
