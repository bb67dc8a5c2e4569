// The C API's captured calls (see graphs.hpp): cgemm_graph_replay and cgemm_graph_destroy.

#include "graphs.hpp"

#include <utility>

#include "boundary.hpp"

namespace cgemm::capi {

Handles<GraphObject>& graphs() {
  static auto* h = new Handles<GraphObject>(0, "cgemm_graph");
  return *h;
}

cgemm_graph* add_graph(const void* plan, CapturedCall call) {
  auto g = std::make_unique<GraphObject>(
      GraphObject{reinterpret_cast<uintptr_t>(plan), std::move(call)});
  return reinterpret_cast<cgemm_graph*>(graphs().add(std::move(g)));
}

void release_graphs_of(const void* plan) {
  const auto owner = reinterpret_cast<uintptr_t>(plan);
  graphs().erase_if([owner](const GraphObject& g) { return g.plan == owner; });
}

}  // namespace cgemm::capi

extern "C" {

cgemm_status cgemm_graph_replay(cgemm_graph* graph, void* stream) {
  using namespace cgemm::capi;
  return guarded(__func__, [&] {
    if (graph == nullptr) throw ArgumentError("graph is NULL");
    graphs().get(reinterpret_cast<uintptr_t>(graph), "graph").call.replay(stream);
    return CGEMM_SUCCESS;
  });
}

void cgemm_graph_destroy(cgemm_graph* graph) {
  using namespace cgemm::capi;
  if (graph == nullptr) return;
  (void)guarded(__func__, [&] {
    graphs().take(reinterpret_cast<uintptr_t>(graph), "graph").reset();
    return CGEMM_SUCCESS;
  });
}

}  // extern "C"
