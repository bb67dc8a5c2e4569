#pragma once
// A buffer of a test's backend (device memory on CUDA, host memory on the CPU backend), freed with
// the test: made from values in a dtype, or poisoned (0xff bytes: NaN in fp32, bf16 and fp16, so
// an element nobody wrote cannot pass as a value). Included by path from the tests' folders:
// "../support/backend_buffer.hpp".

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/dtype.hpp"
#include "cgemm/runtime/backend.hpp"

namespace cgemm::test {

class BackendBuffer {
 public:
  /// `bytes` poisoned bytes.
  BackendBuffer(Backend& be, size_t bytes)
      : be_(be), bytes_(bytes), p_(be.allocate(std::max<size_t>(bytes, 1))) {
    poison();
  }
  /// `v` converted to `dtype` (float32, bfloat16 or float16).
  BackendBuffer(Backend& be, const std::vector<double>& v, DType dtype)
      : be_(be),
        bytes_(v.size() * dtype_size(dtype)),
        p_(be.allocate(std::max<size_t>(bytes_, 1))) {
    const std::vector<float> f(v.begin(), v.end());
    std::vector<char> host(std::max<size_t>(bytes_, 1));
    convert_from_float(f.data(), host.data(), dtype, static_cast<int64_t>(f.size()));
    be_.copy_from_host(p_, host.data(), bytes_);
  }
  ~BackendBuffer() { be_.release(p_); }
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;

  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }
  void poison() {
    const std::vector<uint8_t> nan(bytes_, 0xff);
    be_.synchronize();
    be_.copy_from_host(p_, nan.data(), bytes_);
  }
  /// The bytes now, after the backend's queued work.
  std::vector<uint8_t> bytes_back() const { return bytes_at(be_, p_, bytes_); }
  /// The values now, read as `dtype` (float32, bfloat16 or float16).
  std::vector<double> values_back(DType dtype) const {
    const std::vector<uint8_t> b = bytes_back();
    const auto n = static_cast<int64_t>(b.size() / dtype_size(dtype));
    std::vector<float> f(static_cast<size_t>(n));
    convert_to_float(b.data(), dtype, f.data(), n);
    return {f.begin(), f.end()};
  }
  /// `bytes` of backend memory at `p`, after the backend's queued work.
  static std::vector<uint8_t> bytes_at(Backend& be, const void* p, size_t bytes) {
    std::vector<uint8_t> h(bytes);
    be.synchronize();
    be.copy_to_host(h.data(), p, bytes);
    return h;
  }

 private:
  Backend& be_;
  size_t bytes_;
  void* p_;
};

}  // namespace cgemm::test
