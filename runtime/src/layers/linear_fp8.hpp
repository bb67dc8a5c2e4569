#pragma once
// FP8 training in the layer pair (tp_linear.hpp, TpLinearDesc::quantization), as Transformer
// Engine's Linear runs it on Hopper: every GEMM of forward and backward in FP8, the forward e4m3 x
// e4m3, the gradients in TpLinearDesc::grad_format (e5m2: TE's HYBRID recipe). The weight, x
// and dy are quantized once per call and read where each GEMM needs them:
//   - the weight: a QuantizedTensor (the caller's cache, quantized once per optimizer step, or the
//     layer's own, quantized on every forward()): colwise [N, K] for the forward, rowwise [K, N]
//     for the dgrad;
//   - the column layer's x and the layers' dy: a QuantizedTensor of the layer, so an all-gather
//     GEMM moves FP8 bytes and hands them out for the wgrad, which reads them transposed
//     [hidden, tokens] (FP8 codes transposed as they are: Hopper's FP8 GEMM contracts both
//     operands on their last dim);
//   - the row layer's h: a QuantizedTensor of the layer, quantized once by forward(): rowwise
//     for the forward, colwise [hidden, tokens] for the wgrad (so backward() reads the copies
//     of its forward(), as the column layer reads its forward's gathered x).
// Bias gradients stay in the layer's dtype (TE computes dbias from the unquantized dy). The row
// layer's, whose dy is gathered as FP8, sums each rank's tokens and all-reduces over tp.

#include <string>

#include "cgemm/runtime/plan.hpp"
#include "cgemm/runtime/quantized_tensor.hpp"
#include "cgemm/runtime/tp_linear.hpp"

namespace cgemm::linear_fp8 {

inline bool on(const TpLinearDesc& d) { return d.quantization.mode != ScalingMode::kNoScaling; }

/// Throws cgemm::Error naming the layer for what the FP8 layers do not run: a mode other than
/// per-tensor current or delayed scaling, a forward format other than e4m3, a grad_format other
/// than e4m3 or e5m2, an fsdp axis, WgradInput::kGatherAgain.
void check(const TpLinearDesc& d, const PlanningMesh& m);

/// The quantization of one of the layer's GEMMs: d's mode and recipe with these formats and these
/// operands pre-quantized.
QuantizationDesc gemm_quantization(const TpLinearDesc& d, DType lhs, DType rhs, bool lhs_given,
                                   bool rhs_given);

/// `g` with its rhs [K, N] given as the colwise copy [N, K].
GemmDesc colwise_rhs(GemmDesc g);
/// A gradient GEMM's operand [tokens..., hidden] (contracting its leading dims) given as its
/// transposed copy [hidden, tokens...] (contracting its trailing dims).
GemmDesc lhs_tokens_last(GemmDesc g);
GemmDesc rhs_tokens_last(GemmDesc g);

/// FP8 codes [rows, cols] (backend memory) into dst [cols, rows], on stream 0.
void transpose(Backend& be, const void* src, int64_t rows, int64_t cols, void* dst, DType format,
               const std::string& label);

/// The weight cache of a layer whose weight shard is `w_local` [K_l, N_l].
QuantizedTensorDesc weight_desc(const TpLinearDesc& d, const Shape& w_local);
/// Throws cgemm::Error naming the layer unless `w` is such a cache.
void check_weight(const TpLinearDesc& d, const QuantizedTensor& w, const Shape& w_local);

/// `x` with its scale_inv slots set (null: not set).
Operands scaled(Operands x, const float* lhs_scale_inv, const float* rhs_scale_inv);

}  // namespace cgemm::linear_fp8
