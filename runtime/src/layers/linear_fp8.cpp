#include "linear_fp8.hpp"

#include <utility>

#include "cgemm/core/error.hpp"
#include "cgemm/gemm/quantize_task.hpp"

namespace cgemm::linear_fp8 {

void check(const TpLinearDesc& d, const PlanningMesh& m) {
  const QuantizationDesc& q = d.quantization;
  const std::string where = "layer '" + d.name + "': FP8 training ";
  if (q.mode != ScalingMode::kCurrentTensorScaling &&
      q.mode != ScalingMode::kDelayedTensorScaling) {
    throw Error(where + "takes per-tensor scaling (current or delayed), got " +
                std::string(scaling_mode_name(q.mode)));
  }
  if (q.lhs_format != DType::kFloat8E4M3 || q.rhs_format != DType::kFloat8E4M3) {
    throw Error(where + "runs its forward in e4m3 x e4m3 (the gradients' format is grad_format)");
  }
  if (d.grad_format != DType::kFloat8E4M3 && d.grad_format != DType::kFloat8E5M2) {
    throw Error(where + "takes grad_format e5m2 (TE's HYBRID recipe) or e4m3, got " +
                std::string(dtype_name(d.grad_format)));
  }
  if (m.fsdp > 1) {
    throw Error(where + "with an fsdp axis is not run yet (the fsdp gather moves the weight in " +
                "its own dtype)");
  }
  if (d.wgrad_input == WgradInput::kGatherAgain) {
    throw Error(where + "keeps the forward's gathered FP8 x for the wgrad " +
                "(WgradInput::kKeepFromForward); gathering it again is not run");
  }
}

QuantizationDesc gemm_quantization(const TpLinearDesc& d, DType lhs, DType rhs, bool lhs_given,
                                   bool rhs_given) {
  QuantizationDesc q = d.quantization;
  q.lhs_format = lhs;
  q.rhs_format = rhs;
  q.lhs_quantized = lhs_given;
  q.rhs_quantized = rhs_given;
  return q;
}

GemmDesc colwise_rhs(GemmDesc g) {
  std::swap(g.rhs_shape[0], g.rhs_shape[1]);
  std::swap(g.rhs_spec[0], g.rhs_spec[1]);
  g.contracting_dims.second = {1};
  return g;
}

namespace {
// [t..., h] contracting its leading dims -> [h, t...] contracting its trailing ones.
void tokens_last(Shape& shape, PartitionSpec& spec, std::vector<int>& contracting) {
  shape.insert(shape.begin(), shape.back());
  shape.pop_back();
  spec.insert(spec.begin(), spec.back());
  spec.pop_back();
  for (int& c : contracting) ++c;
}
}  // namespace

GemmDesc lhs_tokens_last(GemmDesc g) {
  tokens_last(g.lhs_shape, g.lhs_spec, g.contracting_dims.first);
  return g;
}

GemmDesc rhs_tokens_last(GemmDesc g) {
  tokens_last(g.rhs_shape, g.rhs_spec, g.contracting_dims.second);
  return g;
}

void transpose(Backend& be, const void* src, int64_t rows, int64_t cols, void* dst, DType format,
               const std::string& label) {
  QuantizeTask t;
  t.rows = rows;
  t.cols = cols;
  t.src_dtype = format;
  t.src = src;
  t.format = format;
  t.dst = dst;
  t.transpose = true;
  t.label = label.c_str();
  be.quantize(t, 0);
}

QuantizedTensorDesc weight_desc(const TpLinearDesc& d, const Shape& w_local) {
  QuantizedTensorDesc w;
  w.name = d.name + " W";
  w.shape = w_local;
  w.dtype = d.dtype;
  w.format = d.quantization.rhs_format;
  w.mode = d.quantization.mode;
  w.recipe = d.quantization.recipe;
  return w;
}

void check_weight(const TpLinearDesc& d, const QuantizedTensor& w, const Shape& w_local) {
  const QuantizedTensorDesc& g = w.desc();
  const QuantizedTensorDesc want = weight_desc(d, w_local);
  if (g.shape != want.shape || g.format != want.format || !g.rowwise || !g.colwise) {
    throw Error("layer '" + d.name + "': its weight cache must be the W shard " +
                shape_str(want.shape) + " in " + std::string(dtype_name(want.format)) +
                " with both copies (weight_cache_desc()); got '" + g.name + "' " +
                shape_str(g.shape) + " in " + std::string(dtype_name(g.format)) +
                (g.rowwise && g.colwise ? "" : " without both copies"));
  }
}

Operands scaled(Operands x, const float* lhs_scale_inv, const float* rhs_scale_inv) {
  if (lhs_scale_inv != nullptr) x.set_input(Operand::kLhsScaleInv, lhs_scale_inv);
  if (rhs_scale_inv != nullptr) x.set_input(Operand::kRhsScaleInv, rhs_scale_inv);
  return x;
}

}  // namespace cgemm::linear_fp8
