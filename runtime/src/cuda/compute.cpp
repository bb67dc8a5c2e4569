// The CUDA backend's work on the compute streams (see compute.hpp).

#include "compute.hpp"

#include <utility>

#include "cgemm/core/cuda_check.hpp"
#include "cgemm/core/scaling_modes.hpp"
#include "cgemm/runtime/backend.hpp"
#include "cuda_kernels.hpp"
#include "device_memory.hpp"
#include "quantize_kernels.hpp"

namespace cgemm::cuda {

Compute::Compute(Streams& streams, Trace& trace, std::string where)
    : streams_(streams), trace_(trace), where_(std::move(where)) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp props{};
  check(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties");
  cc_ = props.major * 10 + props.minor;
  device_ = std::string(props.name) + ", compute capability " + std::to_string(props.major) + "." +
            std::to_string(props.minor);
  gemm_ = std::make_unique<CublasLtGemm>(where_);
  for (cudaStream_t s : streams_.compute()) gemm_->add_stream(s);
}

std::string Compute::describe() const {
  return "cuBLASLt workspace: " + std::to_string(gemm_->workspace_bytes() / (size_t{1} << 20)) +
         " MiB per stream; FP8 fast accumulation " +
         (gemm_->fp8_fast_accumulation() ? "on"
                                         : "off (NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION)") +
         "; algorithms: " +
         (gemm_->autotune() ? "timed, best of the heuristic's first " : "heuristic's first of ") +
         std::to_string(gemm_->candidates()) + " (CGEMM_GEMM_AUTOTUNE, CGEMM_GEMM_CANDIDATES)\n";
}

void Compute::check(cudaError_t rc, const std::string& call) const { check_cuda(rc, call, where_); }

void Compute::fail(const std::string& why) const { throw Error(where_ + ": " + why); }

void Compute::copy(void* dst, const void* src, size_t bytes, int s, const char* label) {
  cudaStream_t st = streams_.at(s, "copy");
  const char* what = label != nullptr ? label : "copy";
  if (ranges_overlap(dst, src, bytes)) fail(std::string(what) + ": source and destination overlap");
  trace_.span(
      "transfer", [&] { return std::string(what); }, s, st,
      [&] { copy_async(dst, src, bytes, st, what, where_); }, static_cast<int64_t>(bytes));
}

void Compute::gemm(const GemmTask& task, int s) {
  cudaStream_t st = streams_.at(s, "gemm");
  trace_.span(
      "gemm", [&] { return std::string(task.label ? task.label : "gemm"); }, s, st,
      [&] { gemm_->run(task, st); }, trace_gemm_bytes(task), trace_gemm_flops(task));
}

void Compute::reorder(ReorderKind kind, const Shape& shape, int dp_size, int tpsp_size,
                      const void* src, void* dst, DType dtype, int s) {
  cudaStream_t st = streams_.at(s, "reorder");
  const int tp = tpsp_size;
  check_reorder(kind, shape, dp_size, tp);  // gemm.py's assertions, with its messages
  const std::string what = std::string("reorder(") +
                           (kind == ReorderKind::kTpspLeading ? "tpsp-leading" : "dp-leading") +
                           ", shape " + shape_str(shape) + ", dp " + std::to_string(dp_size) +
                           ", tpsp " + std::to_string(tp) + ")";
  if (shape.size() < 2) fail(what + ": needs at least 2 dimensions");
  if (num_elements(shape) == 0) return;
  if (src == dst) fail(what + ": source and destination must not overlap");
  int64_t rest = 1;
  for (size_t d = 2; d < shape.size(); ++d) rest *= shape[d];
  const int64_t m = shape[1] / tp;
  const size_t block_bytes = static_cast<size_t>(m * rest) * dtype_size(dtype);
  // Read once, written once.
  const int64_t bytes = 2 * num_elements(shape) * static_cast<int64_t>(dtype_size(dtype));
  trace_.span(
      "reorder", [&] { return what; }, s, st,
      [&] { check(launch_reorder(kind, shape[0], tp, block_bytes, src, dst, st), what); }, bytes);
}

void Compute::sum_partials(std::span<const void* const> parts, DType part_dtype, int64_t count,
                           const void* bias, int64_t bias_len, void* out, DType out_dtype, int s) {
  cudaStream_t st = streams_.at(s, "sum_partials");
  const std::string what = "sum_partials(" + std::to_string(parts.size()) + " parts of " +
                           std::string(dtype_name(part_dtype)) + ", " + std::to_string(count) +
                           " elements -> " + std::string(dtype_name(out_dtype)) +
                           (bias != nullptr ? ", bias of " + std::to_string(bias_len) : "") + ")";
  const auto supported = [](DType t) {
    return t == DType::kFloat32 || t == DType::kBFloat16 || t == DType::kFloat16;
  };
  if (!supported(part_dtype) || !supported(out_dtype)) {
    fail(what + ": only float32, bfloat16 and float16 are supported");
  }
  if (parts.size() > static_cast<size_t>(kMaxParts)) {
    fail(what + ": at most " + std::to_string(kMaxParts) + " parts");
  }
  if (bias != nullptr && bias_len <= 0) fail(what + ": bias length must be positive");
  if (count < 0) fail(what + ": negative count");
  for (const void* p : parts) {
    if (p == nullptr && count > 0) fail(what + ": null part");
  }
  // Every part read, the output written, the bias read.
  const int64_t bytes =
      count * static_cast<int64_t>(parts.size() * dtype_size(part_dtype) + dtype_size(out_dtype)) +
      (bias != nullptr ? bias_len * static_cast<int64_t>(dtype_size(out_dtype)) : 0);
  trace_.span(
      "reduce", [&] { return what; }, s, st,
      [&] {
        check(launch_sum_partials(parts.data(), static_cast<int>(parts.size()), part_dtype, count,
                                  bias, bias_len, out, out_dtype, st),
              what);
      },
      bytes);
}

void Compute::max_partials(std::span<const float* const> parts, int64_t count, float* out, int s) {
  cudaStream_t st = streams_.at(s, "max_partials");
  const std::string what = "max_partials(" + std::to_string(parts.size()) + " parts of " +
                           std::to_string(count) + " float32)";
  if (parts.empty() || parts.size() > static_cast<size_t>(kMaxParts)) {
    fail(what + ": 1 to " + std::to_string(kMaxParts) + " parts");
  }
  if (count < 0) fail(what + ": negative count");
  for (const float* p : parts) {
    if (p == nullptr && count > 0) fail(what + ": null part");
  }
  trace_.span(
      "reduce", [&] { return what; }, s, st,
      [&] {
        check(launch_max_partials(parts.data(), static_cast<int>(parts.size()), count, out, st),
              what);
      },
      count * static_cast<int64_t>((parts.size() + 1) * sizeof(float)));
}

void Compute::fill_normal(void* dst, DType dtype, const Shape& global, const Shape& local,
                          const Shape& offset, uint64_t seed, float std) {
  const std::string what = "fill_normal(" + std::string(dtype_name(dtype)) + ", global " +
                           shape_str(global) + ", local " + shape_str(local) + ", offset " +
                           shape_str(offset) + ")";
  if (dtype != DType::kFloat32 && dtype != DType::kBFloat16 && dtype != DType::kFloat16) {
    fail(what + ": only float32, bfloat16 and float16 can be filled");
  }
  if (local.size() != global.size() || offset.size() != global.size()) {
    fail(what + ": global, local and offset must have the same rank");
  }
  if (local.size() > static_cast<size_t>(kMaxFillDims)) {
    fail(what + ": at most " + std::to_string(kMaxFillDims) + " dimensions");
  }
  for (size_t d = 0; d < local.size(); ++d) {
    if (local[d] < 0 || offset[d] < 0 || offset[d] + local[d] > global[d]) {
      fail(what + ": the shard does not lie inside the global tensor along dim " +
           std::to_string(d));
    }
  }
  if (num_elements(local) == 0) return;
  streams_.gather_into_main();
  check(launch_fill_normal(dst, dtype, global, local, offset, seed, std, streams_.main()), what);
  streams_.fork_from_main();
}

void Compute::fill_nan(void* dst, DType dtype, int64_t count) {
  uint32_t pattern = 0;
  switch (dtype) {
    case DType::kFloat32:
      pattern = 0x7fc00000u;
      break;
    case DType::kBFloat16:
      pattern = 0x7fc0u;
      break;
    case DType::kFloat16:
      pattern = 0x7e00u;
      break;
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
      pattern = 0x7fu;  // a NaN in both FP8 formats
      break;
    default:
      fail("fill_nan: dtype " + std::string(dtype_name(dtype)) + " has no NaN");
  }
  if (count < 0) fail("fill_nan: negative count " + std::to_string(count));
  if (count == 0) return;
  streams_.gather_into_main();
  check(launch_fill_pattern(dst, dtype_size(dtype), pattern, count, streams_.main()),
        "fill_nan(" + std::string(dtype_name(dtype)) + ", " + std::to_string(count) + " elements)");
  streams_.fork_from_main();
}

namespace {

bool high_precision(DType t) {
  return t == DType::kFloat32 || t == DType::kBFloat16 || t == DType::kFloat16;
}

}  // namespace

void Compute::amax(const void* src, DType dtype, int64_t count, float* amax, int s) {
  cudaStream_t st = streams_.at(s, "amax");
  const std::string what =
      "amax(" + std::string(dtype_name(dtype)) + ", " + std::to_string(count) + " elements)";
  if (!high_precision(dtype)) fail(what + ": only float32, bfloat16 and float16 are supported");
  if (count < 0) fail(what + ": negative count");
  if (amax == nullptr || (src == nullptr && count > 0)) fail(what + ": null pointer");
  const int64_t bytes = count * static_cast<int64_t>(dtype_size(dtype)) + 4;
  trace_.span(
      "quantize", [&] { return what; }, s, st,
      [&] { check(launch_amax(src, dtype, count, amax, st), what); }, bytes);
}

void Compute::update_scale(const ScaleUpdate& u, int s) {
  cudaStream_t st = streams_.at(s, "update_scale");
  const int len = u.recipe.amax_history_len;
  const std::string what = std::string("update_scale(") +
                           (u.rule == ScaleRule::kDelayed
                                ? "delayed, amax history " + std::to_string(len) +
                                      (u.recipe.algo == AmaxAlgo::kMax ? ", max" : ", most_recent")
                                : std::string("current")) +
                           ", margin " + std::to_string(u.recipe.margin) + ")";
  if (u.state == nullptr || u.amax == nullptr) fail(what + ": null pointer");
  if (u.rule == ScaleRule::kDelayed && len < 1)
    fail(what + ": the amax history needs at least 1 entry");
  if (u.recipe.margin < 0 || u.recipe.margin > 127) fail(what + ": margin must be 0..127");
  if (!(u.fp8_max > 0.0f)) fail(what + ": fp8_max must be positive");
  // The amax and the state read (delayed: the whole history at most), scale, scale_inv and
  // the step written (delayed: and one history entry).
  const int64_t bytes =
      4 + (u.rule == ScaleRule::kDelayed ? 4 * ScaleStateLayout::floats(len) + 16 : 8);
  trace_.span(
      "quantize", [&] { return what; }, s, st, [&] { check(launch_update_scale(u, st), what); },
      bytes);
}

void Compute::quantize(const QuantizeTask& t, int s) {
  cudaStream_t st = streams_.at(s, "quantize");
  const std::string what = "quantize(" + std::string(t.label != nullptr ? t.label : "unnamed") +
                           ": " + std::to_string(t.rows) + " x " + std::to_string(t.cols) + " " +
                           std::string(dtype_name(t.src_dtype)) + " -> " +
                           std::string(dtype_name(t.format)) + (t.transpose ? ", transposed" : "") +
                           ")";
  if (const ScalingModeRow& row = block_scaling_row(t.scaling); !row.cuda_kernels) {
    const std::string mode(row.label);
    const int need = row.cuda_min_compute_capability;
    // Hopper's cuBLASLt has no block-scaled GEMM, so there is nothing to quantize for.
    if (cc_ < need) {
      fail(what + ": " + mode + " block scaling needs compute capability " +
           std::to_string(need / 10) + "." + std::to_string(need % 10) + "; this GPU is " +
           device_);
    }
    fail(what + ": " + mode + " block scaling has no CUDA kernels yet (the CPU backend runs it)");
  }
  const bool fp8_codes = t.src_dtype == DType::kFloat8E4M3 || t.src_dtype == DType::kFloat8E5M2;
  if (fp8_codes && (t.format != t.src_dtype || !t.transpose)) {
    fail(what + ": an FP8 source is only transposed into its own format");
  }
  if (!high_precision(t.src_dtype) && !fp8_codes) {
    fail(what + ": the source must be float32, bfloat16 or float16 (or FP8 codes to transpose)");
  }
  if (t.format != DType::kFloat8E4M3 && t.format != DType::kFloat8E5M2) {
    fail(what + ": per-tensor scaling casts to float8_e4m3fn or float8_e5m2 only");
  }
  if (fp8_codes && t.amax != nullptr) fail(what + ": FP8 codes moved as they are have no amax");
  if (t.rows < 0 || t.cols < 0) fail(what + ": negative size");
  const int64_t count = t.rows * t.cols;
  if (count == 0) {
    // An empty source's amax is 0, as Backend::amax gives it (the launcher only zeroes it).
    if (t.amax != nullptr) {
      check(launch_quantize_tensor(nullptr, t.src_dtype, t.rows, t.cols, nullptr, t.format,
                                   t.transpose, t.state, t.amax, st),
            what);
    }
    return;
  }
  if (t.src == nullptr || t.dst == nullptr || (t.state == nullptr && !fp8_codes)) {
    fail(what + ": null pointer");
  }
  const size_t src_bytes = static_cast<size_t>(count) * dtype_size(t.src_dtype);
  const auto* from = static_cast<const char*>(t.src);
  const auto* to = static_cast<const char*>(t.dst);
  if (from < to + count && to < from + src_bytes) fail(what + ": source and destination overlap");
  // Every element read and its code written, the scale read.
  const int64_t bytes = static_cast<int64_t>(src_bytes) + count + 4;
  trace_.span(
      "quantize", [&] { return what; }, s, st,
      [&] {
        check(launch_quantize_tensor(t.src, t.src_dtype, t.rows, t.cols, t.dst, t.format,
                                     t.transpose, t.state, t.amax, st),
              what);
      },
      bytes);
}

}  // namespace cgemm::cuda
