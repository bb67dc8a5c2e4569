// The C API's quantized tensors (cgemm_quantized_tensor_* in cgemm/cgemm_quantized.h) over
// QuantizedTensor (cgemm/runtime/quantized_tensor.hpp). Creation is collective only for the
// rank agreement (the quantization is collective itself: the amax reduction).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "boundary.hpp"
#include "cgemm/cgemm.h"
#include "cgemm/core/dtype.hpp"
#include "cgemm/runtime/quantization_names.hpp"
#include "cgemm/runtime/quantized_tensor.hpp"
#include "descriptors.hpp"
#include "rank_agreement.hpp"

namespace {

using namespace cgemm::capi;

struct QuantizedTensorObject {
  ContextObject* owner = nullptr;
  std::unique_ptr<cgemm::QuantizedTensor> tensor;
};

// Tag 0 as graphs (contexts are 1, GEMM plans 2 and grouped plans 3), with serials from 2^40
// (graphs' start at 1), so no handle passes for another kind.
Handles<QuantizedTensorObject>& tensors() {
  static auto* h =
      new Handles<QuantizedTensorObject>(0, "cgemm_quantized_tensor", uintptr_t{1} << 40);
  return *h;
}

QuantizedTensorObject& tensor_of(const cgemm_quantized_tensor* t) {
  if (t == nullptr) throw ArgumentError("tensor is NULL");
  return tensors().get(reinterpret_cast<uintptr_t>(t), "tensor");
}

Fields desc_fields(const cgemm_quantized_tensor_desc& d) {
  return {{"rows", std::to_string(d.rows)},
          {"cols", std::to_string(d.cols)},
          {"dtype", text_field(d.dtype)},
          {"format", text_field(d.format)},
          {"scaling", text_field(d.scaling)},
          {"margin", std::to_string(d.margin)},
          {"amax_history_len", std::to_string(d.amax_history_len)},
          {"amax_compute_algo", text_field(d.amax_compute_algo)},
          {"rowwise", std::to_string(d.rowwise)},
          {"colwise", std::to_string(d.colwise)}};
}

cgemm::QuantizedTensorDesc tensor_desc(const cgemm_quantized_tensor_desc& d) {
  cgemm::QuantizedTensorDesc q;
  q.name = d.name ? d.name : "tensor";
  for (const auto& [v, what] : {std::pair{d.rows, "rows"}, std::pair{d.cols, "cols"}}) {
    if (v < 1) throw ArgumentError(std::string(what) + " " + std::to_string(v) + ": must be >= 1");
  }
  q.shape = {d.rows, d.cols};
  q.dtype = parse_arg(d.dtype, "bfloat16", "dtype", cgemm::parse_dtype);
  if (q.dtype != cgemm::DType::kBFloat16 && q.dtype != cgemm::DType::kFloat16 &&
      q.dtype != cgemm::DType::kFloat32) {
    throw ArgumentError("dtype \"" + std::string(d.dtype) +
                        "\": \"bfloat16\", \"float16\" or \"float32\" (the source's)");
  }
  q.format = parse_arg(d.format, "e4m3", "format", cgemm::parse_fp8_format);
  q.mode = parse_arg(d.scaling, "current", "scaling", cgemm::parse_scaling_option);
  if (q.mode != cgemm::ScalingMode::kCurrentTensorScaling &&
      q.mode != cgemm::ScalingMode::kDelayedTensorScaling) {
    throw ArgumentError("scaling \"" + std::string(d.scaling) +
                        "\": \"current\" or \"delayed\" (per-tensor: one scale_inv)");
  }
  q.recipe = recipe_arg(d.amax_compute_algo, d.margin, d.amax_history_len, "");
  for (const auto& [v, what] : {std::pair{d.rowwise, "rowwise"}, std::pair{d.colwise, "colwise"}}) {
    if (v != 0 && v != 1) {
      throw ArgumentError(std::string(what) + " " + std::to_string(v) + ": must be 0 or 1");
    }
  }
  if (d.rowwise == 0 && d.colwise == 0) throw ArgumentError("rowwise and colwise are both 0");
  q.rowwise = d.rowwise != 0;
  q.colwise = d.colwise != 0;
  q.own_copies = false;  // the C API writes the caller's buffers only
  return q;
}

cgemm_status create(cgemm_context* ctx, const cgemm_quantized_tensor_desc* desc,
                    cgemm_quantized_tensor** out) {
  ContextObject& c = context_of(ctx);
  require(desc, "desc");
  require(out, "out");
  *out = nullptr;
  agree(c.ctx->comms().world(), desc_fields(*desc));
  auto object = std::make_unique<QuantizedTensorObject>();
  object->owner = &c;
  object->tensor = std::make_unique<cgemm::QuantizedTensor>(*c.ctx, tensor_desc(*desc));
  ++c.plans;
  *out = reinterpret_cast<cgemm_quantized_tensor*>(tensors().add(std::move(object)));
  return CGEMM_SUCCESS;
}

size_t state_size(cgemm::QuantizedTensor& t) { return t.scale_state().size(); }

}  // namespace

extern "C" {

void cgemm_quantized_tensor_desc_init(cgemm_quantized_tensor_desc* desc) {
  if (desc == nullptr) return;
  *desc = cgemm_quantized_tensor_desc{};
  desc->rowwise = 1;
  desc->colwise = 1;
}

cgemm_status cgemm_quantized_tensor_create(cgemm_context* ctx,
                                           const cgemm_quantized_tensor_desc* desc,
                                           cgemm_quantized_tensor** out) {
  return guarded(__func__, [&] { return create(ctx, desc, out); });
}

cgemm_status cgemm_quantized_tensor_quantize(cgemm_quantized_tensor* tensor, const void* src,
                                             void* rowwise, void* colwise, float* scale_inv,
                                             void* stream) {
  return guarded(__func__, [&] {
    tensor_of(tensor).tensor->quantize_into(src, rowwise, colwise, scale_inv, stream);
    return CGEMM_SUCCESS;
  });
}

cgemm_status cgemm_quantized_tensor_get_scale_state(cgemm_quantized_tensor* tensor, float* state,
                                                    size_t* count) {
  return guarded(__func__, [&] {
    cgemm::QuantizedTensor& t = *tensor_of(tensor).tensor;
    require(count, "count");
    if (state == nullptr) {
      *count = state_size(t);
      return CGEMM_SUCCESS;
    }
    const std::vector<float> s = t.scale_state();
    if (*count != s.size()) {
      throw ArgumentError("count " + std::to_string(*count) + ": the state has " +
                          std::to_string(s.size()) + " floats");
    }
    std::copy(s.begin(), s.end(), state);
    return CGEMM_SUCCESS;
  });
}

cgemm_status cgemm_quantized_tensor_set_scale_state(cgemm_quantized_tensor* tensor,
                                                    const float* state, size_t count) {
  return guarded(__func__, [&] {
    cgemm::QuantizedTensor& t = *tensor_of(tensor).tensor;
    require(state, "state");
    if (const size_t n = state_size(t); count != n) {
      throw ArgumentError("count " + std::to_string(count) + ": the state has " +
                          std::to_string(n) + " floats");
    }
    t.set_scale_state(std::vector<float>(state, state + count));
    return CGEMM_SUCCESS;
  });
}

void cgemm_quantized_tensor_destroy(cgemm_quantized_tensor* tensor) {
  if (tensor == nullptr) return;
  (void)guarded(__func__, [&] {
    std::unique_ptr<QuantizedTensorObject> t =
        tensors().take(reinterpret_cast<uintptr_t>(tensor), "tensor");
    ContextObject* owner = t->owner;
    t.reset();
    --owner->plans;
    return CGEMM_SUCCESS;
  });
}

}  // extern "C"
