#pragma once
// The C API's captured calls (cgemm_graph in cgemm/cgemm.h): each a CapturedCall of a GEMM or
// grouped plan, by handle. A plan's graphs go when the plan goes (release_graphs_of), so a
// graph never outlives the workspaces it names: its handle then answers "destroyed already".

#include <cstdint>
#include <memory>

#include "cgemm/cgemm.h"
#include "cgemm/runtime/captured_call.hpp"
#include "handles.hpp"

namespace cgemm::capi {

struct GraphObject {
  uintptr_t plan = 0;  // the handle of the plan it was captured from (either kind)
  CapturedCall call;
};

/// The live graphs (tag 0: contexts are 1, plans 2, grouped plans 3).
Handles<GraphObject>& graphs();
/// A new handle for `call`, captured from the plan whose handle is `plan`.
cgemm_graph* add_graph(const void* plan, CapturedCall call);
/// Destroys every graph captured from the plan whose handle is `plan` (before the plan goes).
void release_graphs_of(const void* plan);

}  // namespace cgemm::capi
