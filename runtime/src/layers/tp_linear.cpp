#include "cgemm/runtime/tp_linear.hpp"

#include <utility>
#include <vector>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/error.hpp"
#include "fsdp_weight_gather.hpp"

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

// The token dims a layer's gradients contract, and their spec: without an fsdp axis this rank's
// [B/dp, S] (or [S, B/dp]) as the whole of them (the dp sum is the caller's); with one, the
// global [B, S] with the batch sharded over the data axes, which the planner then reduces the
// gradients over (the wgrad reduce-scattered over fsdp, the bias gradient all-reduced).
struct Tokens {
  Shape shape;
  PartitionSpec spec;
};

// A gradient contracting the token dims of both operands: lhs [tokens..., K] (or the ones
// [tokens...]) and rhs [tokens..., N] -> [K, N] (or [N]).
GemmDesc token_sum_desc(const TpLinearDesc& d, std::string what, const Tokens& tokens,
                        int64_t lhs_hidden, SpecEntry lhs_hidden_spec, SpecEntry rhs_hidden_spec) {
  GemmDesc g;
  g.name = d.name + " " + std::move(what);
  g.lhs_shape = tokens.shape;
  g.lhs_spec = tokens.spec;
  if (lhs_hidden > 0) {
    g.lhs_shape.push_back(lhs_hidden);
    g.lhs_spec.push_back(std::move(lhs_hidden_spec));
  }
  g.rhs_shape = tokens.shape;
  g.rhs_shape.push_back(d.hidden_out);
  g.rhs_spec = tokens.spec;
  g.rhs_spec.push_back(std::move(rhs_hidden_spec));
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

bool has_fsdp(const PlanningMesh& m) { return m.fsdp > 1; }

// The gradients' tokens (see Tokens) for a layer whose activation shard is `local`; `tp` gathers
// the sequence of a sequence-sharded one.
Tokens gradient_tokens(const PlanningMesh& m, const TpLinearDesc& d, const Shape& local, int tp) {
  const bool tbs = d.transpose_batch_sequence;
  if (!has_fsdp(m)) return {local_tokens(local, tp, tbs), {none(), none()}};
  const SpecEntry data =
      m.dp == 1 ? SpecEntry::axis(m.fsdp_axis) : SpecEntry::tuple({m.dp_axis, m.fsdp_axis});
  if (tbs) return {{d.seq_len, d.batch}, {none(), data}};
  return {{d.batch, d.seq_len}, {data, none()}};
}

// The mesh a layer's forward and dgrad plan on: the context's, or with an fsdp axis one replica
// of it (dp 1, the batch over 'fsdp' alone, B / dp sequences). With the batch over
// ('dp', 'fsdp') gemm.py keeps the row-parallel weight, and the column-parallel one in its
// dgrad, sharded over fsdp (a non-contracting rhs dim is gathered only where the lhs names the
// same entry); the replicas' GEMMs never exchange anything, so each plans as a job of its own.
PlanningMesh replica_mesh(PlanningMesh m) {
  if (has_fsdp(m)) {
    m.dp = 1;
    m.dp_rank = 0;
  }
  return m;
}

TpLinearDesc on_replica(const PlanningMesh& m, TpLinearDesc d) {
  if (!has_fsdp(m)) return d;
  if (d.batch % m.dp != 0) {
    throw Error("linear layer '" + d.name + "': batch " + std::to_string(d.batch) +
                " does not divide over dp " + std::to_string(m.dp));
  }
  d.batch /= m.dp;
  return d;
}

// The first batch of the replica a rank's forward and dgrad plans see (replica_mesh).
int64_t replica_batch_offset(const PlanningMesh& m, const TpLinearDesc& d) {
  return has_fsdp(m) ? static_cast<int64_t>(m.dp_rank) * (d.batch / m.dp) : 0;
}

Shape add_batch_offset(Shape offset, int64_t batches, bool tbs) {
  if (batches != 0) offset.at(tbs ? 1 : 0) += batches;
  return offset;
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

// The dgrad reads the weight its FsdpWeightGather left in the fsdp ring: its own program must
// not use the ring (its weight spec names no fsdp axis, so the planner gives it none).
void require_dgrad_off_the_ring(const GemmPlan& dgrad) {
  if (dgrad.description().bytes.fsdp_ring == 0) return;
  throw Error("GEMM '" + dgrad.desc().name + "' uses the fsdp ring its gathered weight is read " +
              "from (an internal error)");
}

}  // namespace

GemmDesc tp_linear_forward_desc(const PlanningMesh& mesh, const TpLinearDesc& d,
                                CollectiveOp collective) {
  const TpLinearDesc r = on_replica(mesh, d);
  return tensor_sequence_parallel_gemm(replica_mesh(mesh), r.name + " forward", collective, r.batch,
                                       r.seq_len, r.hidden_in, r.hidden_out, r.dtype, r.bias,
                                       r.transpose_batch_sequence);
}

// --- column-parallel ---

ColumnParallelLinear::ColumnParallelLinear(Context& ctx, TpLinearDesc desc)
    : desc_(std::move(desc)) {
  const TpLinearDesc& d = desc_;
  const bool tbs = d.transpose_batch_sequence;
  const PlanningMesh mesh = planning_mesh(ctx);
  const SpecEntry data = SpecEntry::axis(has_fsdp(mesh) ? mesh.fsdp_axis : mesh.dp_axis);
  const SpecEntry tpsp = SpecEntry::axis(mesh.tpsp_axis);
  forward_ = std::make_unique<GemmPlan>(ctx, tp_linear_forward_desc(mesh, d, kCollectives.forward));
  dgrad_ = std::make_unique<GemmPlan>(
      ctx, dgrad_desc(on_replica(mesh, d), kCollectives.backward,
                      activation(data, none(), tpsp, tbs), {none(), tpsp}));
  const Tokens tokens = gradient_tokens(mesh, d, forward_->lhs_local(), ctx.comms().tp());
  // With an fsdp axis the wgrad's sum over fsdp is reduce-scattered into this rank's shard of
  // W: its rows ('fsdp', 'tpsp'), or its columns at tp 1 (None, 'fsdp'), which then name no
  // tpsp (of size 1 there).
  const int w_fsdp_dim = forward_->description().fsdp_dim;
  GemmDesc wgrad =
      token_sum_desc(d, "wgrad", tokens, d.hidden_in, none(), w_fsdp_dim == 1 ? none() : tpsp);
  wgrad.fsdp_scatter_dim = w_fsdp_dim;
  wgrad_ = std::make_unique<GemmPlan>(ctx, std::move(wgrad));
  if (d.bias) {
    bgrad_ =
        std::make_unique<GemmPlan>(ctx, token_sum_desc(d, "bias grad", tokens, 0, none(), tpsp));
    ones_ = ones(ctx.backend(),
                 num_elements(local_tokens(forward_->lhs_local(), ctx.comms().tp(), tbs)), d.dtype);
  }
  if (w_fsdp_dim >= 0) {
    require_dgrad_off_the_ring(*dgrad_);
    fsdp_w_ = std::make_unique<FsdpWeightGather>(ctx, d.name + " W", forward_->rhs_local(),
                                                 w_fsdp_dim, d.dtype);
  }
  replica_batch_offset_ = replica_batch_offset(mesh, d);
  if (d.wgrad_input == WgradInput::kGatherAgain) {
    gather_ =
        std::make_unique<ActivationGather>(ctx, d.name + " x", forward_->lhs_local(), d.dtype, tbs);
  }
  gathered_x_ = allocate(ctx.backend(), gathered_bytes(*forward_));
}

ColumnParallelLinear::~ColumnParallelLinear() = default;

Shape ColumnParallelLinear::activation_offset(Shape plan_offset) const {
  return add_batch_offset(std::move(plan_offset), replica_batch_offset_,
                          desc_.transpose_batch_sequence);
}

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
  run(*dgrad_, desc_.path, dy, fsdp_w_ ? fsdp_w_->execute(w) : w, nullptr, dx);
  have_x_ = false;  // one forward per backward: a second backward needs a new forward
}

// --- row-parallel ---

RowParallelLinear::RowParallelLinear(Context& ctx, TpLinearDesc desc) : desc_(std::move(desc)) {
  const TpLinearDesc& d = desc_;
  const bool tbs = d.transpose_batch_sequence;
  const PlanningMesh mesh = planning_mesh(ctx);
  const SpecEntry data = SpecEntry::axis(has_fsdp(mesh) ? mesh.fsdp_axis : mesh.dp_axis);
  const SpecEntry tpsp = SpecEntry::axis(mesh.tpsp_axis);
  forward_ = std::make_unique<GemmPlan>(ctx, tp_linear_forward_desc(mesh, d, kCollectives.forward));
  dgrad_ = std::make_unique<GemmPlan>(
      ctx, dgrad_desc(on_replica(mesh, d), kCollectives.backward,
                      activation(data, tpsp, none(), tbs), {tpsp, none()}));
  h_bytes_ = checked_bytes(num_elements(forward_->lhs_local()), dtype_size(d.dtype), "h bytes");
  // h's local shard holds every token of the local batch already.
  const Tokens tokens = gradient_tokens(mesh, d, forward_->lhs_local(), 1);
  GemmDesc wgrad = token_sum_desc(d, "wgrad", tokens, d.hidden_in, tpsp, none());
  // With an fsdp axis: reduce-scattered into this rank's columns of W ('tpsp', 'fsdp').
  const int w_fsdp_dim = forward_->description().fsdp_dim;
  wgrad.fsdp_scatter_dim = w_fsdp_dim;
  wgrad_ = std::make_unique<GemmPlan>(ctx, std::move(wgrad));
  if (d.bias) {
    bgrad_ =
        std::make_unique<GemmPlan>(ctx, token_sum_desc(d, "bias grad", tokens, 0, none(), none()));
    ones_ = ones(ctx.backend(), num_elements(local_tokens(forward_->lhs_local(), 1, tbs)), d.dtype);
  }
  if (w_fsdp_dim >= 0) {
    require_dgrad_off_the_ring(*dgrad_);
    fsdp_w_ = std::make_unique<FsdpWeightGather>(ctx, d.name + " W", forward_->rhs_local(),
                                                 w_fsdp_dim, d.dtype);
  }
  replica_batch_offset_ = replica_batch_offset(mesh, d);
  gathered_dy_ = allocate(ctx.backend(), gathered_bytes(*dgrad_));
}

RowParallelLinear::~RowParallelLinear() = default;

Shape RowParallelLinear::activation_offset(Shape plan_offset) const {
  return add_batch_offset(std::move(plan_offset), replica_batch_offset_,
                          desc_.transpose_batch_sequence);
}

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
  run_gathering(*dgrad_, desc_.path, dy, fsdp_w_ ? fsdp_w_->execute(w) : w, nullptr, dh,
                gathered_dy_->get());
  run(*wgrad_, desc_.path, h, gathered_dy_->get(), nullptr, dw);
  if (desc_.bias) run(*bgrad_, desc_.path, ones_->get(), gathered_dy_->get(), nullptr, db);
}

}  // namespace cgemm
