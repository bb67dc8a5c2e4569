#pragma once
// The C API's memory check of a plan before it is made (plan_memory.cpp).

#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/plan_description.hpp"

namespace cgemm::capi {

/// The memory check cgemm-run makes before it allocates, for the plan's own buffers (its
/// workspaces and the scale state; the operands are the caller's): collective over ctx's world;
/// every rank throws OutOfMemoryError alike, with the message of the lowest rank whose memory
/// cannot hold them.
void check_plan_memory(const cgemm::Context& ctx, const cgemm::GemmDesc& g);

}  // namespace cgemm::capi
