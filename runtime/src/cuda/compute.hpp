#pragma once
// The CUDA backend's work on the compute streams: cuBLASLt GEMMs, copies, and the backend's own
// kernels (cuda_kernels.hpp) for reorders, partial sums and fills, (quantize_kernels.hpp) for
// amaxes, scale updates and FP8 casts, and (train_kernels.hpp) for the training step's
// elementwise tasks, each with the argument checks and the error text that name the call, and
// each traced but the elementwise tasks.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "cgemm/core/dtype.hpp"
#include "cgemm/core/shape.hpp"
#include "cgemm/gemm/cublaslt_gemm.hpp"
#include "cgemm/gemm/gemm_task.hpp"
#include "cgemm/gemm/quantize_task.hpp"
#include "cgemm/runtime/elementwise.hpp"
#include "cgemm/sharding/reorder.hpp"
#include "streams.hpp"
#include "trace.hpp"

namespace cgemm::cuda {

/// The calls have the Backend calls' meaning (cgemm/runtime/backend.hpp); `s` is a compute
/// stream of `streams`.
class Compute {
 public:
  Compute(Streams& streams, Trace& trace, std::string where);

  /// One line: cuBLASLt's workspace, FP8 accumulation and how algorithms are chosen.
  std::string describe() const;

  void copy(void* dst, const void* src, size_t bytes, int s, const char* label);
  void gemm(const GemmTask& task, int s);
  void reorder(ReorderKind kind, const Shape& shape, int dp_size, int tpsp_size, const void* src,
               void* dst, DType dtype, int s);
  void sum_partials(std::span<const void* const> parts, DType part_dtype, int64_t count,
                    const void* bias, int64_t bias_len, void* out, DType out_dtype, int s);
  /// out[i] = the max over the parts of parts[p][i] (fp32; NaNs skipped), on stream s.
  void max_partials(std::span<const float* const> parts, int64_t count, float* out, int s);
  /// Fills are setup, not part of a schedule: ordered after everything issued so far on every
  /// stream, and everything issued later after them.
  void fill_normal(void* dst, DType dtype, const Shape& global, const Shape& local,
                   const Shape& offset, uint64_t seed, float std);
  void fill_nan(void* dst, DType dtype, int64_t count);

  /// Quantization, traced in category "quantize". Block scaling (MXFP8, NVFP4) throws: it needs
  /// compute capability 10.0 and has no kernels here (the CPU backend emulates it).
  void amax(const void* src, DType dtype, int64_t count, float* amax, int s);
  void update_scale(const ScaleUpdate& u, int s);
  void quantize(const QuantizeTask& t, int s);

  /// The training step's elementwise tasks (elementwise.cpp; not traced).
  void elementwise(const ElementwiseTask& task, int s);

 private:
  void check(cudaError_t rc, const std::string& call) const;
  [[noreturn]] void fail(const std::string& why) const;

  Streams& streams_;
  Trace& trace_;
  std::string where_;
  std::string device_;  // "NVIDIA H200, compute capability 9.0", for refusals
  int cc_ = 0;          // compute capability, e.g. 90
  std::unique_ptr<CublasLtGemm> gemm_;
};

}  // namespace cgemm::cuda
