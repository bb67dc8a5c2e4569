#include "shared_ring.hpp"

#include <string>

#include "cgemm/core/error.hpp"

namespace cgemm {

SharedRing::~SharedRing() {
  if (buf_.local != nullptr) be_->release_symmetric(buf_);
}

void SharedRing::reserve(Backend& be, int64_t bytes) {
  if (bytes <= this->bytes()) return;
  if (be_ != nullptr && be_ != &be) {
    throw Error("the " + name_ + " of a context was asked for by a plan of another backend " +
                "(an internal error)");
  }
  be_ = &be;
  if (captured_) {
    throw Error("a plan needs the " + name_ + " to grow to " + std::to_string(bytes) +
                " bytes, but a call captured into a CUDA graph uses it at " +
                std::to_string(this->bytes()) + " bytes (its graph holds that buffer's address): " +
                "make the plan with the largest weight before capturing");
  }
  if (buf_.local != nullptr) be.synchronize();  // calls queued with the old buffer are done
  SymmetricBuffer grown = be.allocate_symmetric(static_cast<size_t>(bytes), group_);
  if (buf_.local != nullptr) be.release_symmetric(buf_);
  buf_ = grown;
}

void SharedRing::drop_user() noexcept {
  if (--users_ > 0) return;
  captured_ = false;  // the graphs of its calls went with their plans
  if (buf_.local == nullptr) return;
  be_->release_symmetric(buf_);  // waits for the work that uses it (Backend::release_symmetric)
  buf_ = {};
}

}  // namespace cgemm
