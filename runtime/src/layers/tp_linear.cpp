#include "cgemm/runtime/tp_linear.hpp"

#include <utility>
#include <vector>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/error.hpp"

namespace cgemm {

namespace {

SpecEntry none() { return SpecEntry::none(); }

void run(GemmPlan& plan, LinearPath path, const Operands& x) {
  switch (path) {
    case LinearPath::kPolicy:
      plan.execute(x);
      return;
    case LinearPath::kOverlapped:
      plan.execute_overlapped(x);
      return;
    case LinearPath::kSequential:
      plan.execute_sequential(x);
      return;
  }
}

void run(GemmPlan& plan, LinearPath path, const void* lhs, const void* rhs, const void* bias,
         void* out) {
  run(plan, path, Operands(lhs, rhs, bias, out));
}

// An all-gather GEMM call that also writes its gathered lhs to `gathered` (the layer's buffer
// of gathered_bytes()).
void run_gathering(GemmPlan& plan, LinearPath path, const void* lhs, const void* rhs,
                   const void* bias, void* out, void* gathered) {
  run(plan, path, Operands(lhs, rhs, bias, out).set_output(Operand::kGatheredLhs, gathered));
}

// Bytes of the all-gather GEMM `plan`'s gathered lhs, the buffer a layer keeps for its wgrad.
int64_t gathered_bytes(const GemmPlan& plan) {
  const Shape& s = plan.gathered_lhs_local();
  if (s.empty()) {
    throw Error("GEMM '" + plan.desc().name + "' hands out no gathered lhs for the wgrad");
  }
  return checked_bytes(num_elements(s), dtype_size(plan.desc().dtype),
                       "GEMM '" + plan.desc().name + "' gathered lhs");
}

void require(const TpLinearDesc& d, const void* p, const char* what) {
  if (p == nullptr) throw Error("layer '" + d.name + "': " + what + " is null");
}

// The activation's spec, written batch-first and swapped for sequence-first layouts (as
// tensor_sequence_parallel_gemm writes its specs).
PartitionSpec activation(SpecEntry batch, SpecEntry seq, SpecEntry hidden, bool tbs) {
  return tbs ? PartitionSpec{seq, batch, hidden} : PartitionSpec{batch, seq, hidden};
}

Shape activation_shape(int64_t batch, int64_t seq, int64_t hidden, bool tbs) {
  return tbs ? Shape{seq, batch, hidden} : Shape{batch, seq, hidden};
}

// A dgrad: dy [B, S, N] times W [K, N] contracting N (W as rhs [N, K]'s transpose: gemm.py's
// rhs contracting its last dim) -> [B, S, K], fused with `collective`.
GemmDesc dgrad_desc(const TpLinearDesc& d, CollectiveOp collective, PartitionSpec dy_spec,
                    PartitionSpec w_spec) {
  GemmDesc g;
  g.name = d.name + " dgrad";
  g.lhs_shape = activation_shape(d.batch, d.seq_len, d.hidden_out, d.transpose_batch_sequence);
  g.rhs_shape = {d.hidden_in, d.hidden_out};
  g.lhs_spec = std::move(dy_spec);
  g.rhs_spec = std::move(w_spec);
  g.contracting_dims = {{2}, {1}};
  g.collective = collective;
  g.transpose_batch_sequence = d.transpose_batch_sequence;
  g.dtype = g.out_dtype = d.dtype;
  return g;
}

// A gradient contracting the token dims [B/dp, S] (or [S, B/dp]) of both operands: lhs
// [tokens..., K] (or the ones [tokens...]) and rhs [tokens..., N] -> [K, N] (or [N]). The local
// batch is the whole batch of these plans: the dp sum is the caller's.
GemmDesc token_sum_desc(const TpLinearDesc& d, std::string what, const Shape& tokens,
                        int64_t lhs_hidden, SpecEntry lhs_hidden_spec, SpecEntry rhs_hidden_spec) {
  GemmDesc g;
  g.name = d.name + " " + std::move(what);
  g.lhs_shape = tokens;
  g.lhs_spec = {none(), none()};
  if (lhs_hidden > 0) {
    g.lhs_shape.push_back(lhs_hidden);
    g.lhs_spec.push_back(std::move(lhs_hidden_spec));
  }
  g.rhs_shape = tokens;
  g.rhs_shape.push_back(d.hidden_out);
  g.rhs_spec = {none(), none(), std::move(rhs_hidden_spec)};
  g.contracting_dims = {{0, 1}, {0, 1}};
  g.dtype = g.out_dtype = d.dtype;
  return g;
}

// The token dims of a local activation shard (its first two, with the sequence gathered).
Shape local_tokens(const Shape& local_batch_first_or_not, int tp, bool tbs) {
  Shape t{local_batch_first_or_not[0], local_batch_first_or_not[1]};
  t[tbs ? 0 : 1] *= tp;
  return t;
}

std::unique_ptr<detail::BackendMemory> allocate(Backend& be, int64_t bytes) {
  return std::make_unique<detail::BackendMemory>(be, static_cast<size_t>(bytes));
}

// A ones tensor of `count` elements in `dtype`, in backend memory.
std::unique_ptr<detail::BackendMemory> ones(Backend& be, int64_t count, DType dtype) {
  const std::vector<float> one(static_cast<size_t>(count), 1.0f);
  std::vector<char> host(static_cast<size_t>(checked_bytes(count, dtype_size(dtype), "ones")));
  convert_from_float(one.data(), host.data(), dtype, count);
  auto p = allocate(be, static_cast<int64_t>(host.size()));
  be.copy_from_host(p->get(), host.data(), host.size());
  return p;
}

// The layer pair plans its GEMMs for the dp x tp mesh: its weight gradients see the local batch
// whole, which an fsdp axis (other tokens on the fsdp ranks, the weights sharded) would make
// silently wrong.
void require_no_fsdp(const Context& ctx, const std::string& layer) {
  if (ctx.comms().fsdp() == 1) return;
  throw Error("linear layer '" + layer + "': the tensor-parallel layer pair runs on a dp x tp " +
              "mesh; this context has an fsdp axis of " + std::to_string(ctx.comms().fsdp()) +
              " ranks, which it does not run yet (docs/FSDP.md)");
}

}  // namespace

// --- column-parallel ---

ColumnParallelLinear::ColumnParallelLinear(Context& ctx, TpLinearDesc desc)
    : desc_(std::move(desc)) {
  require_no_fsdp(ctx, desc_.name);
  const TpLinearDesc& d = desc_;
  const bool tbs = d.transpose_batch_sequence;
  const SpecEntry dp = SpecEntry::axis(ctx.mesh_config().dp_axis);
  const SpecEntry tpsp = SpecEntry::axis(ctx.mesh_config().tpsp_axis);
  forward_ = std::make_unique<GemmPlan>(
      ctx,
      tensor_sequence_parallel_gemm(ctx, d.name + " forward", kCollectives.forward, d.batch,
                                    d.seq_len, d.hidden_in, d.hidden_out, d.dtype, d.bias, tbs));
  dgrad_ = std::make_unique<GemmPlan>(
      ctx, dgrad_desc(d, kCollectives.backward, activation(dp, none(), tpsp, tbs), {none(), tpsp}));
  const Shape tokens = local_tokens(forward_->lhs_local(), ctx.comms().tp(), tbs);
  wgrad_ = std::make_unique<GemmPlan>(
      ctx, token_sum_desc(d, "wgrad", tokens, d.hidden_in, none(), tpsp));
  if (d.bias) {
    bgrad_ =
        std::make_unique<GemmPlan>(ctx, token_sum_desc(d, "bias grad", tokens, 0, none(), tpsp));
    ones_ = ones(ctx.backend(), num_elements(tokens), d.dtype);
  }
  if (d.wgrad_input == WgradInput::kGatherAgain) {
    gather_ =
        std::make_unique<ActivationGather>(ctx, d.name + " x", forward_->lhs_local(), d.dtype, tbs);
  }
  gathered_x_ = allocate(ctx.backend(), gathered_bytes(*forward_));
}

ColumnParallelLinear::~ColumnParallelLinear() = default;

void ColumnParallelLinear::forward(const void* x, const void* w, const void* b, void* y) {
  require(desc_, x, "x");
  require(desc_, w, "W");
  if (desc_.bias) require(desc_, b, "b");
  require(desc_, y, "y");
  if (desc_.wgrad_input == WgradInput::kGatherAgain) {
    run(*forward_, desc_.path, x, w, desc_.bias ? b : nullptr, y);
    return;
  }
  // The forward GEMM's ring gathers x anyway: it hands AG(x) to the layer (no second gather).
  have_x_ = false;  // a forward that throws leaves no stale x behind
  run_gathering(*forward_, desc_.path, x, w, desc_.bias ? b : nullptr, y, gathered_x_->get());
  have_x_ = true;
}

void ColumnParallelLinear::backward(const void* x, const void* w, const void* dy, void* dx,
                                    void* dw, void* db) {
  require(desc_, w, "W");
  require(desc_, dy, "dy");
  require(desc_, dx, "dx");
  require(desc_, dw, "dW");
  if (desc_.bias) require(desc_, db, "db");
  if (desc_.wgrad_input == WgradInput::kGatherAgain) {
    require(desc_, x, "x");
    // Before the wgrad and the dgrad, on the same stream: TE runs this gather beside the dgrad
    // GEMM (its bulk overlap); here it is ordered, not overlapped, because the wgrad must read
    // dy before the dgrad may write dx over it (see backward's order below).
    gather_->execute(x, gathered_x_->get());
  } else if (!have_x_) {
    throw Error("layer '" + desc_.name +
                "': backward() with WgradInput::kKeepFromForward needs a forward() first");
  }
  // The wgrad and the bias gradient first: they read dy, which a caller may reuse for dx
  // (found by review: dx written over dy gave a wrong dW before this order).
  run(*wgrad_, desc_.path, gathered_x_->get(), dy, nullptr, dw);
  if (desc_.bias) run(*bgrad_, desc_.path, ones_->get(), dy, nullptr, db);
  run(*dgrad_, desc_.path, dy, w, nullptr, dx);
  have_x_ = false;  // one forward per backward: a second backward needs a new forward
}

// --- row-parallel ---

RowParallelLinear::RowParallelLinear(Context& ctx, TpLinearDesc desc) : desc_(std::move(desc)) {
  require_no_fsdp(ctx, desc_.name);
  const TpLinearDesc& d = desc_;
  const bool tbs = d.transpose_batch_sequence;
  const SpecEntry dp = SpecEntry::axis(ctx.mesh_config().dp_axis);
  const SpecEntry tpsp = SpecEntry::axis(ctx.mesh_config().tpsp_axis);
  forward_ = std::make_unique<GemmPlan>(
      ctx,
      tensor_sequence_parallel_gemm(ctx, d.name + " forward", kCollectives.forward, d.batch,
                                    d.seq_len, d.hidden_in, d.hidden_out, d.dtype, d.bias, tbs));
  dgrad_ = std::make_unique<GemmPlan>(
      ctx, dgrad_desc(d, kCollectives.backward, activation(dp, tpsp, none(), tbs), {tpsp, none()}));
  h_bytes_ = checked_bytes(num_elements(forward_->lhs_local()), dtype_size(d.dtype), "h bytes");
  // h's local shard holds every token of the local batch already.
  const Shape tokens = local_tokens(forward_->lhs_local(), 1, tbs);
  wgrad_ = std::make_unique<GemmPlan>(
      ctx, token_sum_desc(d, "wgrad", tokens, d.hidden_in, tpsp, none()));
  if (d.bias) {
    bgrad_ =
        std::make_unique<GemmPlan>(ctx, token_sum_desc(d, "bias grad", tokens, 0, none(), none()));
    ones_ = ones(ctx.backend(), num_elements(tokens), d.dtype);
  }
  gathered_dy_ = allocate(ctx.backend(), gathered_bytes(*dgrad_));
}

RowParallelLinear::~RowParallelLinear() = default;

void RowParallelLinear::forward(const void* h, const void* w, const void* b, void* y) {
  require(desc_, h, "h");
  require(desc_, w, "W");
  if (desc_.bias) require(desc_, b, "b");
  require(desc_, y, "y");
  run(*forward_, desc_.path, h, w, desc_.bias ? b : nullptr, y);
}

void RowParallelLinear::backward(const void* h, const void* w, const void* dy, void* dh, void* dw,
                                 void* db) {
  require(desc_, h, "h");
  require(desc_, w, "W");
  require(desc_, dy, "dy");
  require(desc_, dh, "dh");
  require(desc_, dw, "dW");
  if (desc_.bias) require(desc_, db, "db");
  // The dgrad first: its all-gather GEMM gathers dy and hands AG(dy) to the layer for the
  // wgrad and the bias gradient. The wgrad then reads h after dh is written, so dh must not
  // lie over h (an earlier order allowed it; a review found dW wrong by far when the wgrad read
  // an overwritten h): refused rather than silently wrong.
  if (ranges_overlap(h, dh, static_cast<size_t>(h_bytes_))) {
    throw Error("layer '" + desc_.name +
                "': dh overlaps h; the wgrad reads h after the dgrad writes dh (the dgrad "
                "gathers dy for it), so dh needs a buffer of its own");
  }
  run_gathering(*dgrad_, desc_.path, dy, w, nullptr, dh, gathered_dy_->get());
  run(*wgrad_, desc_.path, h, gathered_dy_->get(), nullptr, dw);
  if (desc_.bias) run(*bgrad_, desc_.path, ones_->get(), gathered_dy_->get(), nullptr, db);
}

}  // namespace cgemm
