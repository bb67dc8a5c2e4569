#pragma once
// A tensor quantized once and read by many GEMMs: Transformer Engine's FP8 weight caching (a
// weight quantized after each optimizer step, its FP8 copies reused by every GEMM of the step and
// every micro-batch), or any activation a caller quantizes itself (a norm's output). The copies
// go to GEMMs as pre-quantized operands (QuantizationDesc::lhs_quantized / rhs_quantized,
// plan_description.hpp) with scale_inv() in the call's kLhsScaleInv / kRhsScaleInv slot.
//
// Shapes: this rank's shard, 2-D [R, C], row-major in `dtype` (float32, bfloat16 or float16) in
// backend memory. rowwise() is [R, C] and colwise() its transpose [C, R], one `format` byte per
// element (TE's ScaledTensor2x: the rowwise copy for a GEMM that contracts C, the colwise one for a
// GEMM that contracts R, since Hopper's FP8 GEMM reads both operands contracting their last dim).
// A [K, N] weight is the forward's rhs as colwise() [N, K] and the dgrad's (dy W^T, contracting N)
// as rowwise() [K, N].
//
// Scaling (per tensor, as TE's current and delayed scaling; quantize_task.hpp's formulas): each
// quantize() takes this rank's amax, max-reduced over every rank of the job, so the global tensor
// has one scale (TE's reduce_amax), scale = fp8_max / amax / 2^margin, and
//   current: the scale from this call's amax;
//   delayed: the scale from the amax history of earlier calls (1 at the first), then this call's
//            amax joins the history, so the history advances once per quantize(): once per
//            optimizer step for a cached weight, as TE's.
// scale_inv() is 1/scale of the last quantize(): the dequantized value is byte x scale_inv.
//
// Calls run on the backend's stream 0 (asynchronous on CUDA: GEMMs issued after, on any plan of
// the same Context, read the copies after they are written). Every rank of the job calls
// quantize() in the same order (the amax reduction). Errors: cgemm::Error for a shape that is not
// 2-D, a dtype or format it does not take, a scaling mode other than current or delayed, and a
// null source.

#include <memory>
#include <string>
#include <vector>

#include "cgemm/core/dtype.hpp"
#include "cgemm/core/scaling_modes.hpp"
#include "cgemm/core/shape.hpp"
#include "cgemm/gemm/quantize_task.hpp"
#include "cgemm/runtime/context.hpp"

namespace cgemm {

struct QuantizedTensorDesc {
  std::string name = "tensor";  // for errors and trace labels
  Shape shape;                  // this rank's [R, C]
  DType dtype = DType::kBFloat16;
  DType format = DType::kFloat8E4M3;  // e4m3 or e5m2
  ScalingMode mode = ScalingMode::kCurrentTensorScaling;
  ScalingRecipe recipe;  // delayed scaling's history and algo; the margin
  bool rowwise = true;   // keep the [R, C] copy
  bool colwise = true;   // keep the [C, R] copy
  // false: no copies of its own (rowwise(), colwise() and scale_inv() null, quantize() throws):
  // a tensor only quantized into the caller's buffers (quantize_into; the C API's) holds no
  // memory for them.
  bool own_copies = true;
};

class QuantizedTensor {
 public:
  /// Allocates the copies and the scale state (not collective).
  QuantizedTensor(Context& ctx, QuantizedTensorDesc desc);
  ~QuantizedTensor();
  QuantizedTensor(const QuantizedTensor&) = delete;
  QuantizedTensor& operator=(const QuantizedTensor&) = delete;

  const QuantizedTensorDesc& desc() const { return desc_; }
  /// Quantizes `src` (desc().shape in desc().dtype) into the copies. Collective over the job.
  void quantize(const void* src);
  /// As quantize(), into the caller's buffers (backend memory) instead of the tensor's own copies:
  /// for a framework that keeps each call's copies until its backward (cgemm_torch's FP8
  /// layers). rowwise [R, C] and colwise [C, R] FP8 codes, given exactly for the copies the desc
  /// keeps (null otherwise); scale_inv one float32. The same scale state as quantize() (one
  /// delayed history for both). `stream`: the caller's stream as GemmPlan::execute takes it
  /// (null: stream 0). cgemm::Error for a null source or scale_inv, or a copy given that is not
  /// kept or missing where kept. Collective over the job, as quantize().
  void quantize_into(const void* src, void* rowwise, void* colwise, float* scale_inv,
                     void* stream = nullptr);
  /// The copies (backend memory), written by the last quantize(); null when not kept (or not
  /// own_copies).
  const void* rowwise() const;
  const void* colwise() const;
  /// One float32 in backend memory: 1/scale of the last quantize().
  const float* scale_inv() const;
  /// The scale state (quantize_task.hpp's ScaleStateLayout: scale, scale_inv, amax, and for
  /// delayed scaling the step count and the amax history), as GemmPlan::scale_state: save it with
  /// a checkpoint and set it back to resume. Synchronous.
  std::vector<float> scale_state();
  void set_scale_state(const std::vector<float>& state);

  struct Impl;  // runtime/src/layers/quantized_tensor.cpp

 private:
  QuantizedTensorDesc desc_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgemm
