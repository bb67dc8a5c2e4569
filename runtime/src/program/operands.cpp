#include "cgemm/runtime/operands.hpp"

#include <string>

#include "cgemm/core/error.hpp"

namespace cgemm {

Operands::Operands(const void* lhs, const void* rhs, const void* bias, void* out) {
  set_input(Operand::kLhs, lhs);
  set_input(Operand::kRhs, rhs);
  set_input(Operand::kBias, bias);
  set_output(Operand::kOut, out);
}

Operands& Operands::set_input(Operand slot, const void* p) {
  if (kOperandSlots[index(slot)].written) {
    throw Error("operand '" + std::string(name(slot)) + "' is written by the call: set_output");
  }
  ptr_[index(slot)] = const_cast<void*>(p);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  return *this;
}

Operands& Operands::set_output(Operand slot, void* p) {
  if (!kOperandSlots[index(slot)].written) {
    throw Error("operand '" + std::string(name(slot)) + "' is only read by the call: set_input");
  }
  ptr_[index(slot)] = p;
  return *this;
}

void* Operands::output(Operand slot) const {
  if (!kOperandSlots[index(slot)].written) {
    throw Error("engine: an operation writes to the read-only operand '" + std::string(name(slot)) +
                "'");
  }
  return ptr_[index(slot)];
}

}  // namespace cgemm
