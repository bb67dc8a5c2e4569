#pragma once
// A plan's call captured into a CUDA graph once and replayed (GemmPlan::capture,
// GroupedGemmPlan::capture; docs/CUDA_GRAPHS.md). A replay is one cudaGraphLaunch: the call's
// kernels, copies, the copy-engine flags' waits and writes and NCCL's kernels, on every stream
// of the plan, with no host work per op.
//
// What a replay computes: the captured call on the operands it was captured with (the same
// pointers; their contents as they are when the replay runs). Replays and eager calls of the
// plan may alternate in any order and number and give the same bytes as eager calls: no value
// is baked into the graph that a later call changes (the copy-engine transport's flags return
// to 0 after every exchange; an FP8 plan's scale state lives in device memory and advances at
// every call, replayed or not).
//
// The CPU backend emulates it: a capture records nothing and a replay runs the call again, so
// the refusals and the API are the same without a GPU.

#include <cstdint>

namespace cgemm {

class Backend;

class CapturedCall {
 public:
  CapturedCall(CapturedCall&& o) noexcept
      : be_(o.be_), id_(o.id_), stream_(o.stream_), grouped_(o.grouped_) {
    o.be_ = nullptr;
  }
  CapturedCall& operator=(CapturedCall&& o) noexcept;
  CapturedCall(const CapturedCall&) = delete;
  CapturedCall& operator=(const CapturedCall&) = delete;
  /// Releases the graph (cudaGraphExecDestroy). Must happen before the plan and its Context go.
  ~CapturedCall();

  /// Launches the graph on `stream` (the caller's stream as its native handle, as
  /// GemmPlan::execute takes it: a cudaStream_t of the backend's device; null: the stream the
  /// call was captured from). Asynchronous; work queued on `stream` after it sees the output.
  /// Ordered with the backend's eager calls as they are with each other: it starts after them
  /// and the backend's later work starts after it.
  /// Throws cgemm::Error when the launch fails, or, for a grouped GEMM whose sizes are read on
  /// the device, when an earlier call or replay found them bad (its output was NaN); the
  /// replay is not launched then. The CPU backend runs the call (synchronous).
  void replay(void* stream = nullptr);

 private:
  friend class GemmPlan;
  friend class GroupedGemmPlan;
  CapturedCall(Backend& be, int64_t id, void* stream, int64_t grouped = 0)
      : be_(&be), id_(id), stream_(stream), grouped_(grouped) {}

  Backend* be_ = nullptr;
  int64_t id_ = -1;
  void* stream_ = nullptr;  // the stream of the capture
  int64_t grouped_ = 0;     // a grouped GEMM's backend handle, checked before each replay
};

}  // namespace cgemm
