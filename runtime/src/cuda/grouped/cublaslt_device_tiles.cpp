// The cuBLASLt device tiles runner (ragged_rows_runner.hpp, path cublaslt_device_tiles): a
// ragged-rows call whose sizes are read on the device, as one pointer-array matmul of fixed
// shape (device_tiles.hpp says which entries compute what). Nothing of a call depends on the
// host's view of the sizes, so it can be captured into a CUDA graph and replayed with sizes
// that change between replays (docs/CUDA_GRAPHS.md); the price is rows computed for nothing:
// (M / T + G) T rows a call, against about M for the host-driven tiles (cublaslt_tiles.cpp).
//
// Everything is made when the plan is prepared: the matmul's algorithm (for its one shape),
// the pointer arrays and per-call state at fixed addresses (a graph names them), the scratch
// tiles, and the status the plan kernel writes when the sizes are bad. One set of per-call
// state serves every call: a plan's grouped calls all run on the backend's stream 0 (the
// engine's op), in order, eager and replayed alike.
//
// Bad sizes (a negative size, a sum over M) cannot be refused before the call: the host
// never sees them. The call fills out with NaN and the mapped status tells the host; the first
// call of the plan (or replay) issued after the device ran it throws the message, once, and
// does not run (take_error); one left unreported is printed when the runner is destroyed.

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "cgemm/core/cuda_check.hpp"
#include "cgemm/core/error.hpp"
#include "device_tiles.hpp"
#include "lt_pointer_array.hpp"
#include "ragged_rows_runner.hpp"
#include "staging_ring.hpp"

namespace cgemm::grouped {

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // as the backend's cuBLASLt GEMMs

class CublasLtDeviceTiles final : public RaggedRowsRunner {
 public:
  CublasLtDeviceTiles(const RaggedRowsGeometry& g, const std::string& name)
      : g_(g), where_("grouped GEMM '" + name + "' (path cublaslt_device_tiles)") {
    const std::string why = cublaslt_device_tiles_refusal(g);
    if (!why.empty()) throw Error(where_ + ": not run: " + why);
    t_rows_ = device_tile_rows(g.m_total);
    full_ = g.m_total / t_rows_;
    const int64_t entries = full_ + g.groups;
    const auto elem = static_cast<int64_t>(dtype_size(g.dtype));
    try {
      check_lt(cublasLtCreate(&handle_), where_, "cublasLtCreate");
      if (!make_pointer_array_matmul(handle_, g_, t_rows_, static_cast<int>(entries),
                                     kWorkspaceBytes, where_, matmul_)) {
        throw Error(where_ + ": cuBLASLt has no algorithm for " + std::to_string(entries) +
                    " tiles of " + std::to_string(t_rows_) + " rows (N " + std::to_string(g.n) +
                    ", K " + std::to_string(g.k) + "); use path cublaslt_tiles or loop");
      }
      check_cuda(cudaMalloc(&workspace_, kWorkspaceBytes), "cudaMalloc(cuBLASLt workspace)",
                 where_);
      // Pointer arrays (3 x entries, each array on 16 bytes), row ends, whole-tile counts,
      // the status, then the scratch tiles (G + 1 of [T, N]).
      const auto pad16 = [](int64_t bytes) { return (bytes + 15) / 16 * 16; };
      const int64_t ptrs = pad16(entries * static_cast<int64_t>(sizeof(void*)));
      const int64_t ends = pad16(g.groups * static_cast<int64_t>(sizeof(int64_t)));
      const int64_t fulls = pad16(g.groups * static_cast<int64_t>(sizeof(int32_t)));
      const int64_t status = pad16(sizeof(DeviceSizesStatus));
      const int64_t scratch = (g.groups + 1) * t_rows_ * g.n * elem;
      const int64_t bytes = 3 * ptrs + ends + fulls + status + scratch;
      check_cuda(cudaMalloc(&state_, static_cast<size_t>(bytes)),
                 "cudaMalloc(" + std::to_string(bytes) + " bytes of pointers and scratch tiles)",
                 where_);
      auto* at = static_cast<char*>(state_);
      call_.a = reinterpret_cast<const void**>(at);
      call_.b = reinterpret_cast<const void**>(at + ptrs);
      call_.d = reinterpret_cast<void**>(at + 2 * ptrs);
      at += 3 * ptrs;
      call_.row_ends = reinterpret_cast<int64_t*>(at);
      call_.full_before = reinterpret_cast<int32_t*>(at + ends);
      call_.status = reinterpret_cast<DeviceSizesStatus*>(at + ends + fulls);
      call_.scratch = at + ends + fulls + status;
      // Zero before any call reads it: on the legacy stream, which the backend's non-blocking
      // streams do not wait for, so waited for here.
      check_cuda(cudaMemsetAsync(call_.status, 0, sizeof(DeviceSizesStatus), nullptr),
                 "cudaMemsetAsync(status)", where_);
      check_cuda(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize(status)", where_);
      void* host = nullptr;
      check_cuda(cudaHostAlloc(&host, sizeof(DeviceSizesStatus), cudaHostAllocMapped),
                 "cudaHostAlloc(status)", where_);
      host_status_ = static_cast<DeviceSizesStatus*>(host);
      *host_status_ = DeviceSizesStatus{};
      void* mapped = nullptr;
      check_cuda(cudaHostGetDevicePointer(&mapped, host_status_, 0), "cudaHostGetDevicePointer",
                 where_);
      call_.host_status = static_cast<DeviceSizesStatus*>(mapped);
      // Sizes given in host memory reach the device through pinned staging.
      ring_ =
          std::make_unique<StagingRing>(static_cast<size_t>(g.groups) * sizeof(int32_t), where_);
    } catch (...) {
      release();
      throw;
    }
    call_.groups = g.groups;
    call_.m_total = g.m_total;
    call_.n = g.n;
    call_.k = g.k;
    call_.tile_rows = t_rows_;
    call_.full_entries = full_;
    call_.elem_bytes = elem;
    call_.rhs_trans = g.rhs_trans;
  }

  ~CublasLtDeviceTiles() override { release(); }
  CublasLtDeviceTiles(const CublasLtDeviceTiles&) = delete;
  CublasLtDeviceTiles& operator=(const CublasLtDeviceTiles&) = delete;

  bool run(std::span<const int32_t> host_sizes, const int32_t* device_sizes, const void* lhs,
           const void* rhs, const void* bias, void* out, const GroupScales& /*scales*/,
           cudaStream_t stream) override {
    throw_earlier_error();
    if (!bases_and_lds_aligned16(g_, lhs, rhs, out)) {
      throw Error(where_ + ": lhs, rhs and out must start on 16 bytes (got " + address(lhs) + ", " +
                  address(rhs) + ", " + address(out) +
                  "): the matmul's pointers are computed on the device, which cannot run the "
                  "loop instead");
    }
    if (device_sizes != nullptr) check_device_readable(device_sizes);
    DeviceTilesCall c = call_;
    c.lhs = lhs;
    c.rhs = rhs;
    c.out = out;
    std::optional<StagingRing::Slot> slot;
    if (device_sizes != nullptr) {
      c.sizes = device_sizes;
    } else {
      slot = ring_->acquire();
      std::copy(host_sizes.begin(), host_sizes.end(), reinterpret_cast<int32_t*>(slot->host));
      ring_->commit(*slot, host_sizes.size() * sizeof(int32_t), stream);
      c.sizes = reinterpret_cast<const int32_t*>(slot->device);
    }
    const std::string shape = "(M " + std::to_string(g_.m_total) + ", N " + std::to_string(g_.n) +
                              ", K " + std::to_string(g_.k) + ", " + std::to_string(g_.groups) +
                              " groups)";
    check_cuda(launch_device_tiles_plan(c, stream), "the device tiles plan kernel " + shape,
               where_);
    if (bias != nullptr) {
      check_cuda(launch_device_tiles_bias(c, bias, g_.dtype, stream),
                 "the device tiles bias kernels " + shape, where_);
    }
    const float alpha = 1.0f;
    const float beta = bias != nullptr ? 1.0f : 0.0f;
    check_lt(cublasLtMatmul(handle_, matmul_.desc, &alpha, c.a, matmul_.a, c.b, matmul_.b, &beta,
                            c.d, matmul_.d, c.d, matmul_.d, &matmul_.algo, workspace_,
                            kWorkspaceBytes, stream),
             where_,
             "cublasLtMatmul(" + std::to_string(full_ + g_.groups) + " tiles of " +
                 std::to_string(t_rows_) + " rows, N " + std::to_string(g_.n) + ", K " +
                 std::to_string(g_.k) + ")");
    check_cuda(launch_device_tiles_scatter(c, g_.dtype, stream),
               "the device tiles copy kernel " + shape, where_);
    if (slot) ring_->done(*slot, stream);
    return true;
  }

  std::string take_error() override {
    // Written by the device through the mapping, at any time, never by the host: the sequence
    // lock of device_tiles.hpp (an even seq read twice around the details).
    const volatile DeviceSizesStatus* v = host_status_;
    DeviceSizesStatus st;
    bool whole = false;
    uint32_t seq = v->seq;
    if (seq / 2 == reported_ && seq % 2 == 0) return "";
    for (int tries = 0; tries < 100000 && !whole; ++tries) {
      seq = v->seq;
      if (seq % 2 != 0) {
        std::this_thread::yield();  // a bad call is being published: microseconds
        continue;
      }
      std::atomic_thread_fence(std::memory_order_acquire);
      st.negative_group = v->negative_group;
      st.negative_size = v->negative_size;
      st.sum = v->sum;
      std::atomic_thread_fence(std::memory_order_acquire);
      whole = v->seq == seq;
    }
    const uint32_t count = (seq + 1) / 2;
    const uint32_t calls = count - reported_;
    reported_ = count;  // reported once
    if (!whole) {
      return where_ + ": " + std::to_string(calls) +
             " earlier call(s)' group sizes in device memory were bad (out filled with NaN; "
             "the details were being rewritten)";
    }
    const std::string what =
        st.negative_group >= 0
            ? "group " + std::to_string(st.negative_group) + " had a negative size " +
                  std::to_string(st.negative_size)
            : "the group sizes summed to " + std::to_string(st.sum) +
                  ", but the ragged dim M (lhs rows) = " + std::to_string(g_.m_total) +
                  " (they may sum to less, the rest being padding, not to more)";
    return where_ + ": " +
           (calls == 1 ? std::string("an earlier call's group sizes")
                       : std::to_string(calls) + " earlier calls' group sizes") +
           " in device memory were bad (" + (calls == 1 ? "its" : "their") +
           " out filled with NaN); " + (calls == 1 ? "" : "the last: ") + what;
  }

 private:
  void throw_earlier_error() {
    const std::string e = take_error();
    if (!e.empty()) throw Error(e);
  }

  // A kernel reads the sizes: pageable host memory (which the other paths copy from) would
  // fault on the device and lose the context, so it is refused first.
  void check_device_readable(const int32_t* sizes) const {
    cudaPointerAttributes a{};
    check_cuda(cudaPointerGetAttributes(&a, sizes), "cudaPointerGetAttributes(group sizes)",
               where_);
    if (a.type == cudaMemoryTypeUnregistered) {
      throw Error(where_ + ": the group sizes at " + address(sizes) +
                  " are pageable host memory, which the device cannot read; give them in device "
                  "memory (or pinned, mapped host memory)");
    }
  }

  static std::string address(const void* p) {
    return "0x" + [](uintptr_t v) {
      static const char* kHex = "0123456789abcdef";
      std::string s;
      do {
        s.insert(s.begin(), kHex[v % 16]);
        v /= 16;
      } while (v != 0);
      return s;
    }(reinterpret_cast<uintptr_t>(p));
  }

  void release() noexcept {
    ring_.reset();  // waits for the calls that staged host sizes
    // The per-call state and the workspace are read by calls still queued, eager or replayed
    // (cudaFree would wait for them too; said here, not left to it).
    if (state_ != nullptr || workspace_ != nullptr) static_cast<void>(cudaDeviceSynchronize());
    // An error no call was left to report: never lost.
    if (host_status_ != nullptr) {
      const std::string e = take_error();
      if (!e.empty()) {
        std::fprintf(stderr, "cgemm: %s (found when the plan was destroyed)\n", e.c_str());
      }
    }
    destroy(matmul_);
    if (handle_ != nullptr) static_cast<void>(cublasLtDestroy(handle_));
    handle_ = nullptr;
    if (workspace_ != nullptr) static_cast<void>(cudaFree(workspace_));
    if (state_ != nullptr) static_cast<void>(cudaFree(state_));
    if (host_status_ != nullptr) static_cast<void>(cudaFreeHost(host_status_));
    workspace_ = state_ = nullptr;
    host_status_ = nullptr;
  }

  RaggedRowsGeometry g_;
  std::string where_;
  int64_t t_rows_ = 0;  // T
  int64_t full_ = 0;    // F = M / T
  cublasLtHandle_t handle_ = nullptr;
  PointerArrayMatmul matmul_;
  void* workspace_ = nullptr;
  void* state_ = nullptr;                     // pointer arrays, per-call state, scratch
  DeviceSizesStatus* host_status_ = nullptr;  // pinned, mapped
  DeviceTilesCall call_;                      // the fixed part of every call
  uint32_t reported_ = 0;                     // bad calls reported so far
  std::unique_ptr<StagingRing> ring_;         // host sizes to the device
};

}  // namespace

std::unique_ptr<RaggedRowsRunner> make_cublaslt_device_tiles(const RaggedRowsGeometry& g,
                                                             const std::string& name) {
  return std::make_unique<CublasLtDeviceTiles>(g, name);
}

}  // namespace cgemm::grouped
