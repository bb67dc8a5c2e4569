// A plan's call captured into a CUDA graph (see captured_call.hpp): the handle of one of the
// backend's graphs.

#include "cgemm/runtime/captured_call.hpp"

#include "cgemm/runtime/backend.hpp"

namespace cgemm {

CapturedCall& CapturedCall::operator=(CapturedCall&& o) noexcept {
  if (this != &o) {
    if (be_ != nullptr) be_->release_graph(id_);
    be_ = o.be_;
    id_ = o.id_;
    stream_ = o.stream_;
    grouped_ = o.grouped_;
    o.be_ = nullptr;
  }
  return *this;
}

CapturedCall::~CapturedCall() {
  if (be_ != nullptr) be_->release_graph(id_);
}

void CapturedCall::replay(void* stream) {
  if (be_ == nullptr) throw Error("replay of a CapturedCall that was moved from");
  if (grouped_ != 0) be_->check_grouped_gemm(grouped_);
  be_->replay_graph(id_, stream != nullptr ? stream : stream_);
}

}  // namespace cgemm
