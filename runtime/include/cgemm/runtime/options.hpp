#pragma once
// Overlap knobs, with the meaning of Transformer Engine's collective_gemm_bootstrap.

#include <string>

namespace cgemm {

enum class BackendKind { kAuto, kCpu, kCuda };
std::string backend_name(BackendKind k);  // "auto", "cpu", "cuda"
BackendKind parse_backend(const std::string& name);

/// Whether a collective GEMM overlaps its collective with chunked GEMMs.
/// kAuto: each plan times both paths on its first call and keeps the faster (where chunks
/// are too small to pay, the sequential path wins); kAlways / kNever force one.
enum class OverlapPolicy { kAuto, kAlways, kNever };
std::string overlap_policy_name(OverlapPolicy p);  // "auto", "on", "off"
OverlapPolicy parse_overlap_policy(const std::string& name);

struct OverlapOptions {
  OverlapPolicy policy = OverlapPolicy::kAuto;
  int num_max_streams = 3;                // GEMM (compute) streams a collective GEMM may use
  int compute_stream_priority = 0;        // 0 = highest; CUDA only
  int communication_stream_priority = 0;  // 0 = highest; CUDA only
  int num_sm_for_communication = 2;       // bound on SMs the transport may take; CUDA only
  bool use_ce = true;                     // copy engines over CUDA IPC inside a node; CUDA only
  bool aggregate_all_gather = false;      // all-gather both ways round the ring at once
};

}  // namespace cgemm
