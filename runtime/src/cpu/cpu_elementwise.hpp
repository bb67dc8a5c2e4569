#pragma once
// The CPU backend's elementwise tasks (cgemm/runtime/elementwise.hpp): host loops over host
// memory, in double, in element order (so the loss's sum has a fixed order).

#include "cgemm/runtime/elementwise.hpp"

namespace cgemm::cpu {

/// Runs `t` now (its arguments checked with check_elementwise first).
void run_elementwise(const ElementwiseTask& t);

}  // namespace cgemm::cpu
