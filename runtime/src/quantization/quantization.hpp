#pragma once
// Quantized GEMMs (GemmDesc::quantization): Transformer Engine's scaling modes as ops of a
// collective GEMM's programs. Planning points the geometry at the plan's quantized copies of
// lhs and rhs, so the collective GEMM kinds (runtime/src/kinds/) build their programs as
// for any dtype, and then wraps each program with the quantization:
//
//   current scaling   amax lhs, amax rhs, max over the job, scales, quantize lhs and rhs | GEMMs
//   delayed scaling   quantize lhs and rhs with the scales of earlier calls | GEMMs | amaxes,
//                     max over the job, record them in the history, the next call's scales
//   MXFP8             quantize with block scales (E8M0 per 32) | GEMMs (the lhs block scales
//                     ride the all-gather ring with their chunk)
//   NVFP4             amaxes, max over the job, tensor scales, quantize | one GEMM (no
//                     collective: gemm.py refuses it)
//
// The rhs is quantized into [N, K] (TE's colwise copy of a [K, N] weight): a Hopper FP8 GEMM
// contracts both operands on their last dim (gemm.py's NT layout rule).
//
// A pre-quantized operand (QuantizationDesc::lhs_quantized, rhs_quantized: the caller's FP8
// bytes and scale_inv) has no ops: the geometry reads it where the caller holds it, its scale_inv
// from the call's kLhsScaleInv / kRhsScaleInv slot, and the ops above run for the other operand
// alone. A pre-quantized lhs is the caller's tensor, so an all-gather GEMM can hand out the FP8
// bytes its ring gathered (Operand::kGatheredLhs).

#include <optional>

#include "cgemm/runtime/plan_description.hpp"
#include "kinds/collective_gemm.hpp"

namespace cgemm {

/// Where the quantization of one plan keeps things (bytes into the kQuant and kScales
/// workspaces) and what it runs.
struct QuantizationPlan {
  QuantizationDesc desc;
  DType src = DType::kBFloat16;  // the caller's lhs and rhs dtype
  BlockScaling scaling = BlockScaling::kTensor;
  ScaleRule rule = ScaleRule::kCurrent;
  int64_t lhs_rows = 0, k = 0, n = 0;
  bool rhs_source_transposed = false;  // the caller's rhs is already [N, K]
  bool lhs_source_transposed = false;  // the caller's lhs is [K, M]: quantized into [M, K]
  // kQuant: quantized lhs, quantized rhs [N, K], their block scales, the two amaxes.
  size_t lhs_at = 0, rhs_at = 0, lhs_block_at = 0, rhs_block_at = 0, amax_at = 0;
  int64_t quant_bytes = 0;
  // kScales: the lhs's then the rhs's ScaleStateLayout.
  size_t rhs_state_at = 0;
  std::vector<float> scales_init;
};

/// Checks a quantized GEMM as gemm.py does and as the runtime can run it (throws PlanError
/// where gemm.py raises, cgemm::Error naming the GEMM otherwise), and points `g` (filled by
/// fill_geometry) at the quantized operands. nullopt when the GEMM is not quantized.
std::optional<QuantizationPlan> plan_quantization(const GemmDesc& desc, GemmGeometry& g,
                                                  const PlanDescription& r,
                                                  const PlanningMesh& mesh,
                                                  const PlanningOptions& opt);

/// Adds the quantization's ops and workspaces to every program of `c`.
void add_quantization(CollectiveGemm& c, const QuantizationPlan& q, const std::string& name);

/// "delayed e4m3 x e4m3" and the like, for schedule summaries.
std::string quantization_summary(const QuantizationDesc& q);

}  // namespace cgemm
