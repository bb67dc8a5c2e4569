// GemmPlan's calls: each runs one of its collective GEMM's programs on the engine. The path
// choice of the overlap policy lives here; what the paths do lives in runtime/src/kinds/.

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cgemm/core/error.hpp"
#include "plan_impl.hpp"

namespace cgemm {

namespace {

// The path's program: the one that also writes the gathered lhs when the call asks for it
// (a program without the slot never looks at it, so a null one changes nothing).
const Program& pick(const Program& plain, const std::optional<Program>& gathering,
                    const std::vector<Operand>& plain_used,
                    const std::vector<Operand>& gathering_used, const std::string& refusal,
                    const std::string& name, const Operands& x) {
  if (!x.has(Operand::kGatheredLhs)) {
    require_operands(name, plain_used, x);
    return plain;
  }
  if (!gathering) throw Error(refusal);
  require_operands(name, gathering_used, x);
  return *gathering;
}

}  // namespace

const Program& GemmPlan::program_for(const Operands& x, bool overlapped) const {
  const Impl& im = *impl_;
  return overlapped
             ? pick(im.kind.overlapped, im.kind.overlapped_gathering, im.overlapped_operands,
                    im.overlapped_gathering_operands, im.kind.no_gathered_lhs, desc_.name, x)
             : pick(im.kind.sequential, im.kind.sequential_gathering, im.sequential_operands,
                    im.sequential_gathering_operands, im.kind.no_gathered_lhs, desc_.name, x);
}

void GemmPlan::execute_overlapped(const Operands& x, void* stream) {
  impl_->engine.run_on(program_for(x, true), x, stream, impl_->call_name);
}

void GemmPlan::execute_sequential(const Operands& x, void* stream) {
  impl_->engine.run_on(program_for(x, false), x, stream, impl_->call_name);
}

CapturedCall GemmPlan::capture(const Operands& x, void* stream) {
  Engine& e = impl_->engine;
  // Null: the backend's stream 0, as for a call without a stream; replays default to it too.
  void* st = stream != nullptr ? stream : e.backend().native_stream();
  const int64_t id = e.capture(program_for(x, impl_->use_overlap), x, st, impl_->call_name);
  return CapturedCall(e.backend(), id, st);
}

const Shape& GemmPlan::gathered_lhs_local() const { return impl_->kind.gathered_lhs; }

void GemmPlan::execute(const Operands& x, void* stream) {
  if (impl_->use_overlap) {
    execute_overlapped(x, stream);
  } else {
    execute_sequential(x, stream);
  }
}

std::string GemmPlan::path_summary() const {
  const Impl& p = *impl_;
  if (!p.kind.overlappable && p.kind.fsdp == 1) return "plain GEMM (no collective to overlap)";
  if (p.policy == OverlapPolicy::kAlways) return "overlapped (overlap = on)";
  if (p.policy == OverlapPolicy::kNever) return "sequential (overlap = off)";
  if (p.kind.fsdp > 1) {
    return "overlapped (auto: " +
           std::string(p.geometry.fsdp_scatter == FsdpScatter::kNone
                           ? "the rhs is gathered over fsdp="
                           : "the output is reduce-scattered over fsdp=") +
           std::to_string(p.kind.fsdp) + ")";
  }
  char buf[200];
  std::snprintf(buf, sizeof(buf), "%s (auto: tp %d, %s GEMM %.3g GFLOP %s %.3g GFLOP)",
                p.use_overlap ? "overlapped" : "sequential", p.geometry.tp,
                p.geometry.pieces > 1 ? "piece" : "chunk", p.chunk_flop / 1e9,
                p.use_overlap ? ">=" : "<", kAutoOverlapMinChunkFlop / 1e9);
  return buf;
}

bool GemmPlan::uses_overlap() const { return impl_->use_overlap; }

std::vector<float> GemmPlan::scale_state() { return impl_->engine.scales(impl_->kind.overlapped); }

void GemmPlan::set_scale_state(const std::vector<float>& state) {
  impl_->engine.set_scales(impl_->kind.overlapped, state);
}

// The benchmarks' parts are prepared on their first call, not with the plan: a plan that only
// executes never holds their workspaces (PlanBytes counts the execute paths' only).
void GemmPlan::bench_gemm_only(const void* lhs, const void* rhs, void* out) {
  const Program* p = &impl_->kind.gemm_only;
  impl_->engine.prepare({&p, 1});
  impl_->engine.run(*p, Operands(lhs, rhs, nullptr, out));
}

void GemmPlan::bench_collective_only(const void* lhs, void* out) {
  const Program* p = &impl_->kind.collective_only;
  impl_->engine.prepare({&p, 1});
  impl_->engine.run(*p, Operands(lhs, nullptr, nullptr, out));
}

}  // namespace cgemm
