// The CUDA backend's graphs (see graphs.hpp).

#include "graphs.hpp"

#include <utility>

#include "cgemm/core/cuda_check.hpp"
#include "cgemm/core/error.hpp"

namespace cgemm::cuda {

Graphs::~Graphs() {
  // Errors are ignored: a destructor cannot report them.
  for (auto& [id, exec] : graphs_) cudaGraphExecDestroy(exec);
}

void Graphs::check(cudaError_t rc, const std::string& call) const { check_cuda(rc, call, where_); }

int64_t Graphs::capture(cudaStream_t stream, const std::function<void()>& issue) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
    throw Error(where_ +
                ": a capture needs a created stream (cudaStreamCreate), not the default stream");
  }
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing");
  if (status != cudaStreamCaptureStatusNone) {
    throw Error(where_ +
                ": the stream is already being captured: issue the call inside that "
                "capture (execute on the stream) instead of capturing it again");
  }
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  try {
    issue();
  } catch (...) {
    // End the capture so the stream is usable again; the partial graph is dropped.
    if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph != nullptr) {
      cudaGraphDestroy(graph);
    }
    static_cast<void>(cudaGetLastError());  // the exception in flight is the error to report
    throw;
  }
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t rc = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check(rc, "cudaGraphInstantiate");
  graphs_.emplace(next_, exec);
  return next_++;
}

void Graphs::replay(int64_t id, cudaStream_t stream) {
  auto it = graphs_.find(id);
  if (it == graphs_.end()) {
    throw Error(where_ + ": replay of graph " + std::to_string(id) +
                ", which this backend never captured or already released");
  }
  check(cudaGraphLaunch(it->second, stream), "cudaGraphLaunch");
}

void Graphs::release(int64_t id) noexcept {
  auto it = graphs_.find(id);
  if (it == graphs_.end()) return;
  cudaGraphExecDestroy(it->second);
  graphs_.erase(it);
}

}  // namespace cgemm::cuda
