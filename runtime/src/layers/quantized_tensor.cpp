#include "cgemm/runtime/quantized_tensor.hpp"

#include <tuple>
#include <utility>

#include "cgemm/core/error.hpp"
#include "cgemm/core/float8.hpp"
#include "program/engine.hpp"

namespace cgemm {

// The quantization as one program of the quantization ops GEMMs use (program.hpp), run by an
// engine of its own: kQuant holds the rowwise copy, the colwise copy, the amax and the scale_inv
// the copies were made with; kScales the scale state.
//
// The scale_inv the GEMMs read is a copy taken when the copies are made, not the state's: delayed
// scaling updates the state for the next quantize() right after, which the GEMMs of this step must
// not see.
struct QuantizedTensor::Impl {
  explicit Impl(Backend& be, int world_rank) : engine(be, world_rank) {}
  Engine engine;
  Program program;       // into the copies below
  Program into_program;  // into the caller's buffers
  size_t rowwise_at = 0, colwise_at = 0, scale_inv_at = 0;
};

namespace {

constexpr size_t kAlign = 256;  // cuBLASLt wants 16-byte aligned FP8 operands and scales

size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

void check(const QuantizedTensorDesc& d) {
  const std::string where = "quantized tensor '" + d.name + "': ";
  if (d.shape.size() != 2 || d.shape[0] < 1 || d.shape[1] < 1) {
    throw Error(where + "a 2-D shard [R, C] with R, C >= 1, got " + shape_str(d.shape));
  }
  if (d.dtype != DType::kFloat32 && d.dtype != DType::kBFloat16 && d.dtype != DType::kFloat16) {
    throw Error(where + "quantizes float32, bfloat16 or float16, got " +
                std::string(dtype_name(d.dtype)));
  }
  if (!is_fp8(d.format)) {
    throw Error(where + "quantizes into e4m3 or e5m2, got " + std::string(dtype_name(d.format)));
  }
  if (d.mode != ScalingMode::kCurrentTensorScaling &&
      d.mode != ScalingMode::kDelayedTensorScaling) {
    throw Error(where + "takes per-tensor scaling (current or delayed): its copies go to GEMMs " +
                "with one scale_inv each");
  }
  if (d.recipe.amax_history_len < 1 || d.recipe.amax_history_len > kMaxAmaxHistoryLen) {
    throw Error(where + "amax_history_len must be 1 to " + std::to_string(kMaxAmaxHistoryLen) +
                ", got " + std::to_string(d.recipe.amax_history_len));
  }
  if (d.recipe.margin < 0 || d.recipe.margin > 127) {
    throw Error(where + "margin must be in [0, 127], got " + std::to_string(d.recipe.margin));
  }
  if (!d.rowwise && !d.colwise) throw Error(where + "keeps neither copy");
}

}  // namespace

namespace {

// Where one quantization's outputs go: the tensor's own copies (quantize()) or the caller's
// buffers (quantize_into()).
struct Destinations {
  Ref rowwise, colwise, scale_inv;
};

// amax: this call's amax (kQuant); state: the scale state (kScales), shared by both programs so
// that a delayed history advances once per call whichever of the two runs.
Program quantize_program(const QuantizedTensorDesc& d, const Destinations& to, Ref amax,
                         int64_t quant_bytes) {
  const int64_t count = d.shape[0] * d.shape[1];
  const Ref state{Workspace::kScales, 0};
  const bool delayed = d.mode == ScalingMode::kDelayedTensorScaling;
  const int history = delayed ? d.recipe.amax_history_len : 0;
  Program p;
  p.workspace.quant = quant_bytes;
  p.scales_init.assign(static_cast<size_t>(ScaleStateLayout::floats(history)), 0.0f);
  p.scales_init[ScaleStateLayout::kScale] = 1.0f;
  p.scales_init[ScaleStateLayout::kScaleInv] = 1.0f;
  p.workspace.scales = static_cast<int64_t>(p.scales_init.size() * sizeof(float));

  // Delayed scaling's first cast measures the amax as it reads the source (QuantizeOp::amax);
  // current scaling needs it before the casts.
  std::vector<Op> scale_ops;
  if (!delayed) scale_ops.push_back(AmaxOp{{Operand::kLhs}, d.dtype, count, amax, 0});
  scale_ops.push_back(AmaxReduceOp{amax, 1, 0, d.name + " amax max over the job"});
  ScaleUpdate u;
  u.rule = delayed ? ScaleRule::kDelayed : ScaleRule::kCurrent;
  u.recipe = d.recipe;
  u.fp8_max = numeric::fp8_max(d.format);
  scale_ops.push_back(ScaleOp{u, state, amax, 0});

  std::vector<Op> quantize_ops;
  QuantizeTask t;
  t.rows = d.shape[0];
  t.cols = d.shape[1];
  t.src_dtype = d.dtype;
  t.format = d.format;
  for (const bool transpose : {false, true}) {
    if (!(transpose ? d.colwise : d.rowwise)) continue;
    t.transpose = transpose;
    const bool measures = delayed && quantize_ops.empty();
    quantize_ops.push_back(
        QuantizeOp{t,
                   {Operand::kLhs},
                   transpose ? to.colwise : to.rowwise,
                   state,
                   std::nullopt,
                   0,
                   d.name + (transpose ? " quantize colwise" : " quantize rowwise"),
                   measures ? std::optional<Ref>(amax) : std::nullopt});
  }
  CopyOp keep;
  keep.src = state.plus(ScaleStateLayout::kScaleInv * sizeof(float));
  keep.dst = to.scale_inv;
  keep.bytes = sizeof(float);
  keep.label = d.name + " scale_inv";
  quantize_ops.push_back(keep);

  // Delayed scaling quantizes with the history's scale and records this amax after (as a
  // quantized GEMM's program does); current scaling needs this amax first.
  const auto append = [&p](const std::vector<Op>& ops) {
    p.ops.insert(p.ops.end(), ops.begin(), ops.end());
  };
  append(delayed ? quantize_ops : scale_ops);
  append(delayed ? scale_ops : quantize_ops);
  return p;
}

}  // namespace

QuantizedTensor::QuantizedTensor(Context& ctx, QuantizedTensorDesc desc) : desc_(std::move(desc)) {
  const QuantizedTensorDesc& d = desc_;
  check(d);
  impl_ = std::make_unique<Impl>(ctx.backend(), ctx.comms().world_rank());
  Impl& im = *impl_;
  const int64_t count = checked_mul(d.shape[0], d.shape[1], "quantized tensor '" + d.name + "'");
  const auto bytes = static_cast<size_t>(count);  // one FP8 byte per element
  // The tensor's own copies, then the amax and the scale_inv they were made with; without own
  // copies (quantize_into only) just the amax.
  const bool own = d.own_copies;
  im.rowwise_at = 0;
  im.colwise_at = own && d.rowwise ? align_up(bytes) : 0;
  const size_t amax_at = own ? im.colwise_at + (d.colwise ? align_up(bytes) : 0) : 0;
  im.scale_inv_at = amax_at + kAlign;
  const Ref amax{Workspace::kQuant, amax_at};
  if (own) {
    im.program = quantize_program(d,
                                  {{Workspace::kQuant, im.rowwise_at},
                                   {Workspace::kQuant, im.colwise_at},
                                   {Workspace::kQuant, im.scale_inv_at}},
                                  amax, static_cast<int64_t>(im.scale_inv_at + sizeof(float)));
  }
  im.into_program =
      quantize_program(d, {{Operand::kOut}, {Operand::kColwiseOut}, {Operand::kScaleInvOut}}, amax,
                       static_cast<int64_t>(amax_at + sizeof(float)));
  std::vector<const Program*> programs{&im.into_program};
  if (own) programs.push_back(&im.program);
  im.engine.prepare(programs);
}

QuantizedTensor::~QuantizedTensor() = default;

void QuantizedTensor::quantize(const void* src) {
  if (!desc_.own_copies) {
    throw Error("quantized tensor '" + desc_.name +
                "': keeps no copies of its own (own_copies false): call quantize_into");
  }
  if (src == nullptr) throw Error("quantized tensor '" + desc_.name + "': null source");
  impl_->engine.run(impl_->program, Operands(src, nullptr, nullptr, nullptr),
                    "quantized tensor '" + desc_.name + "'");
}

void QuantizedTensor::quantize_into(const void* src, void* rowwise, void* colwise, float* scale_inv,
                                    void* stream) {
  const std::string where = "quantized tensor '" + desc_.name + "'";
  if (src == nullptr) throw Error(where + ": null source");
  if (scale_inv == nullptr) throw Error(where + ": null scale_inv");
  for (const auto& [kept, p, what] : {std::tuple{desc_.rowwise, rowwise, "rowwise"},
                                      std::tuple{desc_.colwise, colwise, "colwise"}}) {
    if (kept && p == nullptr) throw Error(where + ": null " + what + " copy");
    if (!kept && p != nullptr) {
      throw Error(where + ": a " + what + " buffer was given, but the tensor keeps no " + what +
                  " copy");
    }
  }
  Operands x(src, nullptr, nullptr, rowwise);
  x.set_output(Operand::kColwiseOut, colwise);
  x.set_output(Operand::kScaleInvOut, scale_inv);
  impl_->engine.run_on(impl_->into_program, x, stream, where);
}

namespace {
const void* at(const Engine& e, Workspace w, size_t offset) {
  return static_cast<const char*>(e.workspace(w)) + offset;
}
}  // namespace

const void* QuantizedTensor::rowwise() const {
  return desc_.rowwise && desc_.own_copies ? at(impl_->engine, Workspace::kQuant, impl_->rowwise_at)
                                           : nullptr;
}

const void* QuantizedTensor::colwise() const {
  return desc_.colwise && desc_.own_copies ? at(impl_->engine, Workspace::kQuant, impl_->colwise_at)
                                           : nullptr;
}

const float* QuantizedTensor::scale_inv() const {
  if (!desc_.own_copies) return nullptr;
  return static_cast<const float*>(at(impl_->engine, Workspace::kQuant, impl_->scale_inv_at));
}

std::vector<float> QuantizedTensor::scale_state() {
  return impl_->engine.scales(impl_->into_program);  // one state for both programs
}

void QuantizedTensor::set_scale_state(const std::vector<float>& state) {
  impl_->engine.set_scales(impl_->into_program, state);
}

}  // namespace cgemm
