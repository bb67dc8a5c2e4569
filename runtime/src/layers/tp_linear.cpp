#include "cgemm/runtime/tp_linear.hpp"

#include <utility>
#include <vector>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/error.hpp"
#include "fsdp_weight_gather.hpp"
#include "linear_fp8.hpp"

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
  return checked_bytes(num_elements(s), dtype_size(lhs_input_dtype(plan.desc())),
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

// A local tensor as rows x its last dim, for QuantizedTensor and the FP8 transposes.
Shape as_rows(const Shape& s) { return {num_elements(s) / s.back(), s.back()}; }

// FP8: a QuantizedTensor of the layer's for an activation shard `local` in `format` (rowwise,
// and colwise too where the wgrad reads it so).
std::unique_ptr<QuantizedTensor> activation_fp8(Context& ctx, const TpLinearDesc& d,
                                                const std::string& what, const Shape& local,
                                                DType format, bool colwise) {
  QuantizedTensorDesc q;
  q.name = d.name + " " + what;
  q.shape = as_rows(local);
  q.dtype = d.dtype;
  q.format = format;
  q.mode = d.quantization.mode;
  q.recipe = d.quantization.recipe;
  q.colwise = colwise;
  return std::make_unique<QuantizedTensor>(ctx, q);
}

// The forward's rhs as the caller holds W: the plan's, or (FP8: the colwise copy) transposed.
Shape weight_shape(const GemmPlan& forward, bool fp8) {
  const Shape& r = forward.rhs_local();
  return fp8 ? Shape{r[1], r[0]} : r;
}
Shape weight_at(const GemmPlan& forward, bool fp8) {
  const Shape r = forward.rhs_offset();
  return fp8 ? Shape{r[1], r[0]} : r;
}

// Which weight cache an FP8 backward reads: the caller's, or the one forward() read.
const QuantizedTensor& cache_for_backward(const TpLinearDesc& d, const QuantizedTensor* w) {
  if (w == nullptr) {
    throw Error("layer '" + d.name + "': an FP8 backward() with W as a pointer reuses the " +
                "weight its forward() with W as a pointer quantized: call that forward() first " +
                "(after a forward() with a weight cache, pass the cache to backward())");
  }
  return *w;
}

void require_fp8(const TpLinearDesc& d) {
  if (!linear_fp8::on(d)) {
    throw Error(
        "layer '" + d.name + "' runs in " + std::string(dtype_name(d.dtype)) +
        ": a weight cache (QuantizedTensor) is for FP8 layers (TpLinearDesc::quantization)");
  }
}

}  // namespace

GemmDesc tp_linear_forward_desc(const PlanningMesh& mesh, const TpLinearDesc& d,
                                CollectiveOp collective) {
  const TpLinearDesc r = on_replica(mesh, d);
  GemmDesc g = tensor_sequence_parallel_gemm(replica_mesh(mesh), r.name + " forward", collective,
                                             r.batch, r.seq_len, r.hidden_in, r.hidden_out, r.dtype,
                                             r.bias, r.transpose_batch_sequence);
  if (linear_fp8::on(d)) {
    // The weight cache's colwise copy; the activation quantized by the layer, once: the column
    // layer's x (its gather moves FP8 bytes and is handed out for the wgrad), the row layer's h
    // (its colwise copy is the wgrad's).
    linear_fp8::check(d, mesh);
    const DType e4m3 = DType::kFloat8E4M3;
    g.quantization = linear_fp8::gemm_quantization(d, e4m3, e4m3, true, true);
    g = linear_fp8::colwise_rhs(std::move(g));
  }
  return g;
}

namespace {

// FP8: the dgrad reads dy's copy and the weight cache's rowwise copy [K, N].
GemmDesc fp8_dgrad(const TpLinearDesc& d, GemmDesc g) {
  if (linear_fp8::on(d)) {
    g.quantization =
        linear_fp8::gemm_quantization(d, d.grad_format, DType::kFloat8E4M3, true, true);
  }
  return g;
}

}  // namespace

// --- column-parallel ---

ColumnParallelLinear::ColumnParallelLinear(Context& ctx, TpLinearDesc desc)
    : desc_(std::move(desc)) {
  const TpLinearDesc& d = desc_;
  const bool tbs = d.transpose_batch_sequence;
  const PlanningMesh mesh = planning_mesh(ctx);
  const SpecEntry data = SpecEntry::axis(has_fsdp(mesh) ? mesh.fsdp_axis : mesh.dp_axis);
  const SpecEntry tpsp = SpecEntry::axis(mesh.tpsp_axis);
  const bool fp8 = linear_fp8::on(d);
  backend_ = &ctx.backend();
  forward_ = std::make_unique<GemmPlan>(ctx, tp_linear_forward_desc(mesh, d, kCollectives.forward));
  dgrad_ = std::make_unique<GemmPlan>(
      ctx, fp8_dgrad(d, dgrad_desc(on_replica(mesh, d), kCollectives.backward,
                                   activation(data, none(), tpsp, tbs), {none(), tpsp})));
  const Tokens tokens = gradient_tokens(mesh, d, forward_->lhs_local(), ctx.comms().tp());
  // With an fsdp axis the wgrad's sum over fsdp is reduce-scattered into this rank's shard of
  // W: its rows ('fsdp', 'tpsp'), or its columns at tp 1 (None, 'fsdp'), which then name no
  // tpsp (of size 1 there).
  const int w_fsdp_dim = forward_->description().fsdp_dim;
  GemmDesc wgrad =
      token_sum_desc(d, "wgrad", tokens, d.hidden_in, none(), w_fsdp_dim == 1 ? none() : tpsp);
  wgrad.fsdp_scatter_dim = w_fsdp_dim;
  if (fp8) {  // AG(x) and dy as their transposed FP8 copies [K, tokens] and [N/tp, tokens]
    wgrad = linear_fp8::rhs_tokens_last(linear_fp8::lhs_tokens_last(std::move(wgrad)));
    wgrad.quantization =
        linear_fp8::gemm_quantization(d, DType::kFloat8E4M3, d.grad_format, true, true);
  }
  wgrad_ = std::make_unique<GemmPlan>(ctx, std::move(wgrad));
  weight_local_ = weight_shape(*forward_, fp8);
  weight_offset_ = weight_at(*forward_, fp8);
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
  if (fp8) {
    w8_ = std::make_unique<QuantizedTensor>(ctx, weight_cache_desc());
    x8_ = activation_fp8(ctx, d, "x", forward_->lhs_local(), DType::kFloat8E4M3, false);
    dy8_ = activation_fp8(ctx, d, "dy", dgrad_->lhs_local(), d.grad_format, true);
    x_t_ = allocate(ctx.backend(), gathered_bytes(*forward_));
  }
}

ColumnParallelLinear::~ColumnParallelLinear() = default;

QuantizedTensorDesc ColumnParallelLinear::weight_cache_desc() const {
  return linear_fp8::weight_desc(desc_, weight_local_);
}

Shape ColumnParallelLinear::activation_offset(Shape plan_offset) const {
  return add_batch_offset(std::move(plan_offset), replica_batch_offset_,
                          desc_.transpose_batch_sequence);
}

void ColumnParallelLinear::forward(const void* x, const void* w, const void* b, void* y) {
  require(desc_, x, "x");
  require(desc_, w, "W");
  if (desc_.bias) require(desc_, b, "b");
  require(desc_, y, "y");
  if (linear_fp8::on(desc_)) {
    w8_->quantize(w);
    forward(x, *w8_, b, y);
    return;
  }
  if (desc_.wgrad_input == WgradInput::kGatherAgain) {
    run(*forward_, desc_.path, x, w, desc_.bias ? b : nullptr, y);
    return;
  }
  // The forward GEMM's ring gathers x anyway: it hands AG(x) to the layer (no second gather).
  have_x_ = false;  // a forward that throws leaves no stale x behind
  run_gathering(*forward_, desc_.path, x, w, desc_.bias ? b : nullptr, y, gathered_x_->get());
  have_x_ = true;
}

void ColumnParallelLinear::forward(const void* x, const QuantizedTensor& w, const void* b,
                                   void* y) {
  require_fp8(desc_);
  linear_fp8::check_weight(desc_, w, weight_local_);
  require(desc_, x, "x");
  if (desc_.bias) require(desc_, b, "b");
  require(desc_, y, "y");
  have_x_ = false;
  forward_w_ = nullptr;
  x8_->quantize(x);
  const Operands in =
      linear_fp8::scaled(Operands(x8_->rowwise(), w.colwise(), desc_.bias ? b : nullptr, y),
                         x8_->scale_inv(), w.scale_inv());
  run(*forward_, desc_.path, Operands(in).set_output(Operand::kGatheredLhs, gathered_x_->get()));
  have_x_ = true;
  forward_w_ = &w;
}

void ColumnParallelLinear::backward(const void* x, const QuantizedTensor& w, const void* dy,
                                    void* dx, void* dw, void* db) {
  require_fp8(desc_);
  linear_fp8::check_weight(desc_, w, weight_local_);
  require(desc_, dy, "dy");
  require(desc_, dx, "dx");
  require(desc_, dw, "dW");
  if (desc_.bias) require(desc_, db, "db");
  static_cast<void>(x);  // kKeepFromForward: the forward's gathered FP8 x
  if (!have_x_) {
    throw Error("layer '" + desc_.name + "': backward() needs a forward() first");
  }
  if (forward_w_ != &w) {
    throw Error("layer '" + desc_.name + "': backward() takes the weight cache its forward() " +
                "took ('" + w.desc().name + "' is another)");
  }
  // dy once into both copies: rowwise for the dgrad, colwise [N/tp, tokens] for the wgrad; AG(x)
  // [tokens, K] transposed for the wgrad.
  dy8_->quantize(dy);
  const Shape gx = as_rows(forward_->gathered_lhs_local());
  linear_fp8::transpose(*backend_, gathered_x_->get(), gx[0], gx[1], x_t_->get(),
                        DType::kFloat8E4M3, desc_.name + " AG(x) transposed");
  run(*wgrad_, desc_.path,
      linear_fp8::scaled(Operands(x_t_->get(), dy8_->colwise(), nullptr, dw), x8_->scale_inv(),
                         dy8_->scale_inv()));
  if (desc_.bias) run(*bgrad_, desc_.path, ones_->get(), dy, nullptr, db);
  run(*dgrad_, desc_.path,
      linear_fp8::scaled(Operands(dy8_->rowwise(), w.rowwise(), nullptr, dx), dy8_->scale_inv(),
                         w.scale_inv()));
  have_x_ = false;
  forward_w_ = nullptr;
}

void ColumnParallelLinear::backward(const void* x, const void* w, const void* dy, void* dx,
                                    void* dw, void* db) {
  require(desc_, w, "W");
  if (linear_fp8::on(desc_)) {
    backward(x, cache_for_backward(desc_, forward_w_ == w8_.get() ? forward_w_ : nullptr), dy, dx,
             dw, db);
    return;
  }
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
  const bool fp8 = linear_fp8::on(d);
  backend_ = &ctx.backend();
  forward_ = std::make_unique<GemmPlan>(ctx, tp_linear_forward_desc(mesh, d, kCollectives.forward));
  dgrad_ = std::make_unique<GemmPlan>(
      ctx, fp8_dgrad(d, dgrad_desc(on_replica(mesh, d), kCollectives.backward,
                                   activation(data, tpsp, none(), tbs), {tpsp, none()})));
  h_bytes_ = checked_bytes(num_elements(forward_->lhs_local()), dtype_size(d.dtype), "h bytes");
  // h's local shard holds every token of the local batch already.
  const Tokens tokens = gradient_tokens(mesh, d, forward_->lhs_local(), 1);
  GemmDesc wgrad = token_sum_desc(d, "wgrad", tokens, d.hidden_in, tpsp, none());
  // With an fsdp axis: reduce-scattered into this rank's columns of W ('tpsp', 'fsdp').
  const int w_fsdp_dim = forward_->description().fsdp_dim;
  wgrad.fsdp_scatter_dim = w_fsdp_dim;
  if (fp8) {  // h's colwise copy [K/tp, tokens] (the forward's); AG(dy) transposed [N, tokens]
    wgrad = linear_fp8::rhs_tokens_last(linear_fp8::lhs_tokens_last(std::move(wgrad)));
    wgrad.quantization =
        linear_fp8::gemm_quantization(d, DType::kFloat8E4M3, d.grad_format, true, true);
  }
  wgrad_ = std::make_unique<GemmPlan>(ctx, std::move(wgrad));
  weight_local_ = weight_shape(*forward_, fp8);
  weight_offset_ = weight_at(*forward_, fp8);
  if (d.bias) {
    // FP8: AG(dy) is gathered as FP8, so db sums this rank's tokens of dy (the sequence over
    // tpsp) and all-reduces them over tp.
    Tokens own = tokens;
    if (fp8) own.spec = tbs ? PartitionSpec{tpsp, none()} : PartitionSpec{none(), tpsp};
    bgrad_ =
        std::make_unique<GemmPlan>(ctx, token_sum_desc(d, "bias grad", own, 0, none(), none()));
    ones_ = ones(ctx.backend(), num_elements(bgrad_->lhs_local()), d.dtype);
  }
  if (w_fsdp_dim >= 0) {
    require_dgrad_off_the_ring(*dgrad_);
    fsdp_w_ = std::make_unique<FsdpWeightGather>(ctx, d.name + " W", forward_->rhs_local(),
                                                 w_fsdp_dim, d.dtype);
  }
  replica_batch_offset_ = replica_batch_offset(mesh, d);
  gathered_dy_ = allocate(ctx.backend(), gathered_bytes(*dgrad_));
  if (fp8) {
    w8_ = std::make_unique<QuantizedTensor>(ctx, weight_cache_desc());
    h8_ = activation_fp8(ctx, d, "h", forward_->lhs_local(), DType::kFloat8E4M3, true);
    dy8_ = activation_fp8(ctx, d, "dy", dgrad_->lhs_local(), d.grad_format, false);
    dy_t_ = allocate(ctx.backend(), gathered_bytes(*dgrad_));
  }
}

RowParallelLinear::~RowParallelLinear() = default;

QuantizedTensorDesc RowParallelLinear::weight_cache_desc() const {
  return linear_fp8::weight_desc(desc_, weight_local_);
}

Shape RowParallelLinear::activation_offset(Shape plan_offset) const {
  return add_batch_offset(std::move(plan_offset), replica_batch_offset_,
                          desc_.transpose_batch_sequence);
}

void RowParallelLinear::forward(const void* h, const void* w, const void* b, void* y) {
  require(desc_, h, "h");
  require(desc_, w, "W");
  if (desc_.bias) require(desc_, b, "b");
  require(desc_, y, "y");
  if (linear_fp8::on(desc_)) {
    w8_->quantize(w);
    forward(h, *w8_, b, y);
    return;
  }
  run(*forward_, desc_.path, h, w, desc_.bias ? b : nullptr, y);
}

void RowParallelLinear::forward(const void* h, const QuantizedTensor& w, const void* b, void* y) {
  require_fp8(desc_);
  linear_fp8::check_weight(desc_, w, weight_local_);
  require(desc_, h, "h");
  if (desc_.bias) require(desc_, b, "b");
  require(desc_, y, "y");
  forward_w_ = nullptr;  // a forward that throws leaves no stale cache behind
  forward_h_ = nullptr;
  h8_->quantize(h);  // once: the forward reads the rowwise copy, the wgrad the colwise one
  run(*forward_, desc_.path,
      linear_fp8::scaled(Operands(h8_->rowwise(), w.colwise(), desc_.bias ? b : nullptr, y),
                         h8_->scale_inv(), w.scale_inv()));
  forward_w_ = &w;
  forward_h_ = h;
}

void RowParallelLinear::backward(const void* h, const QuantizedTensor& w, const void* dy, void* dh,
                                 void* dw, void* db) {
  require_fp8(desc_);
  linear_fp8::check_weight(desc_, w, weight_local_);
  require(desc_, h, "h");
  require(desc_, dy, "dy");
  require(desc_, dh, "dh");
  require(desc_, dw, "dW");
  if (desc_.bias) require(desc_, db, "db");
  // The wgrad reads h's colwise copy, made by the forward: that forward must be this h's.
  if (forward_h_ == nullptr) {
    throw Error("layer '" + desc_.name + "': backward() needs a forward() first");
  }
  if (forward_h_ != h) {
    throw Error("layer '" + desc_.name + "': backward() takes the h its forward() took (FP8: " +
                "the wgrad reads the copies of h that forward() made)");
  }
  if (forward_w_ != &w) {
    throw Error("layer '" + desc_.name + "': backward() takes the weight cache its forward() " +
                "took ('" + w.desc().name + "' is another)");
  }
  // The bias gradient first, from dy as given (the dgrad's gather moves FP8 bytes).
  if (desc_.bias) run(*bgrad_, desc_.path, ones_->get(), dy, nullptr, db);
  dy8_->quantize(dy);
  run(*dgrad_, desc_.path,
      linear_fp8::scaled(Operands(dy8_->rowwise(), w.rowwise(), nullptr, dh), dy8_->scale_inv(),
                         w.scale_inv())
          .set_output(Operand::kGatheredLhs, gathered_dy_->get()));
  const Shape gdy = as_rows(dgrad_->gathered_lhs_local());
  linear_fp8::transpose(*backend_, gathered_dy_->get(), gdy[0], gdy[1], dy_t_->get(),
                        desc_.grad_format, desc_.name + " AG(dy) transposed");
  run(*wgrad_, desc_.path,
      linear_fp8::scaled(Operands(h8_->colwise(), dy_t_->get(), nullptr, dw), h8_->scale_inv(),
                         dy8_->scale_inv()));
  forward_w_ = nullptr;
  forward_h_ = nullptr;  // one forward per backward
}

void RowParallelLinear::backward(const void* h, const void* w, const void* dy, void* dh, void* dw,
                                 void* db) {
  require(desc_, h, "h");
  require(desc_, w, "W");
  if (linear_fp8::on(desc_)) {
    backward(h, cache_for_backward(desc_, forward_w_ == w8_.get() ? forward_w_ : nullptr), dy, dh,
             dw, db);
    return;
  }
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
