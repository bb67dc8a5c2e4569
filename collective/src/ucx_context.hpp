#pragma once
// The UCP context helpers shared by UcxTransport (ucx_transport.cpp) and its context query
// (ucx_context.cpp): a context with RMA, UCX status text, and the flag ordering the running
// library gives.

#include <ucp/api/ucp.h>

#include <string>

namespace cgemm::ucx {

/// "Input/output error (-3)": ucs_status_string and the number.
std::string status_text(ucs_status_t s);
/// A context with RMA (and nothing else), its config read from the environment (UCX_TLS, ...).
ucs_status_t make_context(ucp_context_h* context);
/// Whether ucp_worker_fence of the running library is a strong fence, ordering operations
/// across all lanes of an endpoint (multi-rail RMA): from UCX 1.14 (openucx/ucx PR 8596).
/// Before, it orders only within a lane, so a flag put could overtake data put on another lane.
bool fence_is_strong();
/// How a flag put is ordered after its data, in words, for describe() and query_context().
const char* flag_ordering(bool strong_fence);

}  // namespace cgemm::ucx
