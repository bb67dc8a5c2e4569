#pragma once
// The caller's tensors of one GEMM call, by named slot: what GemmPlan::execute binds to a
// plan's programs on every call. Pointers are backend memory (host on the CPU backend, device
// on the CUDA backend) holding this rank's shard, with the shapes GemmPlan reports
// (lhs_local(), rhs_local(), bias_local(), out_local()) in the plan's dtypes, row-major.
//
// A slot a plan does not read may stay null; GemmPlan::execute throws cgemm::Error naming the
// slot when a slot the plan reads is null. A new operand kind (FP8's scale_inv, amax, a grouped
// GEMM's group sizes) is a new row of kOperandSlots below and of the enum, nothing else here.

#include <array>
#include <cstddef>
#include <string_view>

namespace cgemm {

enum class Operand : std::size_t {
  kLhs,   // the lhs shard (read)
  kRhs,   // the rhs shard (read)
  kBias,  // the bias shard, out dtype (read); null when the plan has no bias
  kOut,   // the output shard (written)
  // Optional output of all-gather GEMMs: the lhs as the call gathers it, this rank's shard
  // grown along the gathered (sequence) dim, in sequence order (GemmPlan::gathered_lhs_local()).
  // Null: the call hands nothing out. Other GEMMs refuse a non-null one.
  kGatheredLhs,
  // A grouped GEMM's call (grouped_plan.hpp): its G int32 group sizes, in backend memory...
  kGroupSizes,
  // ...or in host memory (GroupedGemmPlan's host-sizes call; never both).
  kHostGroupSizes,
  // FP8 grouped GEMMs: G float32 scale_inv values per operand (backend memory); a dense GEMM
  // with a pre-quantized operand (QuantizationDesc::lhs_quantized / rhs_quantized): its one.
  kLhsScaleInv,
  kRhsScaleInv,
  // QuantizedTensor::quantize_into's outputs besides kOut (the rowwise copy): the colwise
  // (transposed) copy and the scale_inv the copies were made with, in the caller's memory.
  kColwiseOut,
  kScaleInvOut,
  kCount  // the number of slots; not a slot
};

struct OperandSlot {
  std::string_view name;  // as errors and traces name it
  bool written;           // the call writes it (otherwise only reads it)
};

/// One row per Operand, in enum order.
inline constexpr std::array<OperandSlot, static_cast<std::size_t>(Operand::kCount)> kOperandSlots{{
    {"lhs", false},
    {"rhs", false},
    {"bias", false},
    {"out", true},
    {"gathered_lhs", true},
    {"group_sizes", false},
    {"host_group_sizes", false},
    {"lhs_scale_inv", false},
    {"rhs_scale_inv", false},
    {"colwise_out", true},
    {"scale_inv_out", true},
}};
// A slot added to the enum without its row here leaves a row unnamed.
static_assert(
    [] {
      for (const OperandSlot& s : kOperandSlots) {
        if (s.name.empty()) return false;
      }
      return true;
    }(),
    "kOperandSlots needs one row per Operand, in enum order");

class Operands {
 public:
  Operands() = default;
  /// The four operands of a dense GEMM; bias may be null.
  Operands(const void* lhs, const void* rhs, const void* bias, void* out);

  /// Sets a slot the call only reads. Throws cgemm::Error if the slot is written.
  Operands& set_input(Operand slot, const void* p);
  /// Sets a slot the call writes. Throws cgemm::Error if the call only reads the slot.
  Operands& set_output(Operand slot, void* p);

  const void* input(Operand slot) const { return ptr_[index(slot)]; }
  /// A written slot's pointer. Throws cgemm::Error naming the slot if the call only reads it
  /// (a program may never write a caller's input).
  void* output(Operand slot) const;
  bool has(Operand slot) const { return ptr_[index(slot)] != nullptr; }

  static std::size_t index(Operand slot) { return static_cast<std::size_t>(slot); }
  static std::string_view name(Operand slot) { return kOperandSlots[index(slot)].name; }

 private:
  // Read-only slots are stored without const; output() refuses them.
  std::array<void*, kOperandSlots.size()> ptr_{};
};

}  // namespace cgemm
