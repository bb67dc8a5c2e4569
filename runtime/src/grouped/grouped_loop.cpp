// run_grouped_loop (grouped_loop.hpp), and the names and the size check of grouped_task.hpp.

#include "grouped_loop.hpp"

#include <string>

#include "cgemm/core/error.hpp"

namespace cgemm {

const char* grouped_form_name(GroupedForm f) {
  return f == GroupedForm::kRaggedRows ? "ragged_rows" : "ragged_contracting";
}

const char* grouped_path_name(GroupedPath p) {
  switch (p) {
    case GroupedPath::kLoop:
      return "loop";
    case GroupedPath::kCublasGrouped:
      return "cublas_grouped";
    case GroupedPath::kCublasLtTiles:
      return "cublaslt_tiles";
    case GroupedPath::kCublasLtDeviceTiles:
      return "cublaslt_device_tiles";
    case GroupedPath::kAuto:
      break;
  }
  return "auto";
}

int64_t check_group_sizes(const GroupedGemmShape& shape, const std::string& name,
                          std::span<const int32_t> sizes) {
  const std::string what = "grouped GEMM '" + name + "'";
  const std::string dim = shape.form == GroupedForm::kRaggedRows
                              ? "the ragged dim M (lhs rows) = " + std::to_string(shape.extent)
                              : "the ragged contracting dim K = " + std::to_string(shape.extent);
  if (static_cast<int64_t>(sizes.size()) != shape.groups) {
    throw Error(what + ": got " + std::to_string(sizes.size()) +
                " group sizes, the plan has num_groups " + std::to_string(shape.groups));
  }
  int64_t sum = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    if (sizes[g] < 0) {
      throw Error(what + ": group " + std::to_string(g) + " has a negative size " +
                  std::to_string(sizes[g]));
    }
    // FP8's ragged contraction: each group's K is its size, and cuBLASLt's FP8 GEMMs read
    // K-major operands whose group columns start on 16 bytes. Refused alike on every backend.
    if (shape.scaled && shape.form == GroupedForm::kRaggedContracting && sizes[g] % 16 != 0) {
      throw Error(what + ": group " + std::to_string(g) + " has size " + std::to_string(sizes[g]) +
                  ", not a multiple of 16 (an FP8 ragged contraction's groups are FP8 GEMMs' K, "
                  "which cuBLASLt needs in multiples of 16)");
    }
    sum += sizes[g];  // at most 2^31 * G: no overflow
  }
  // gemm.py's rule: the sizes need not fill the ragged dim (the plan's capacity: padding is
  // allowed, gemm.py checks only how many sizes there are), but they cannot pass it.
  if (sum > shape.extent) {
    throw Error(what + ": the group sizes sum to " + std::to_string(sum) + ", but " + dim +
                " (they may sum to less, the rest being padding, not to more)");
  }
  return sum;
}

void zero_padding_rows(Backend& be, const GroupedGemmTask& t, int64_t sum, int stream) {
  const GroupedGemmShape& s = t.shape;
  if (s.form != GroupedForm::kRaggedRows || sum >= s.extent || s.n == 0) return;
  const auto out_size = static_cast<int64_t>(dtype_size(s.out_dtype));
  // No parts and no bias: sum_partials writes zeros.
  be.sum_partials({}, s.out_dtype, (s.extent - sum) * s.n, nullptr, s.n,
                  static_cast<char*>(t.out) + sum * s.n * out_size, s.out_dtype, stream);
}

void run_grouped_loop(Backend& be, const GroupedGemmTask& task, int stream) {
  const GroupedGemmShape& s = task.shape;
  const auto in_size = static_cast<int64_t>(dtype_size(s.in_dtype));
  const auto rhs_size = static_cast<int64_t>(dtype_size(s.rhs_dtype));
  const auto out_size = static_cast<int64_t>(dtype_size(s.out_dtype));
  const auto* a = static_cast<const char*>(task.lhs);
  const auto* b = static_cast<const char*>(task.rhs);
  const auto* c = static_cast<const char*>(task.bias);
  auto* o = static_cast<char*>(task.out);
  const auto scale = [&](const float* base, int64_t g) {
    return reinterpret_cast<const float*>(reinterpret_cast<const char*>(base) +
                                          g * task.scale_stride);
  };
  const bool rows = s.form == GroupedForm::kRaggedRows;
  int64_t off = 0;  // the group's first row (kRaggedRows) or contracting index
  for (int64_t g = 0; g < s.groups; ++g) {
    const int64_t size = task.host_sizes[g];
    GemmTask t;
    t.in_dtype = s.in_dtype;
    t.out_dtype = s.out_dtype;
    if (s.scaled) {  // FP8: group g's scale_inv of each operand
      t.rhs_dtype = s.rhs_dtype;
      t.lhs_scale_inv = scale(task.lhs_scale_inv, g);
      t.rhs_scale_inv = scale(task.rhs_scale_inv, g);
      t.fast_accumulation = s.fast_accumulation;
    }
    t.lhs_transposed = s.lhs_trans;
    t.rhs_transposed = s.rhs_trans;
    t.n = s.n;
    t.ldc = s.n;
    t.bias = c != nullptr ? c + g * s.n * out_size : nullptr;
    t.label =
        task.group_labels.empty() ? task.label : task.group_labels[static_cast<size_t>(g)].c_str();
    if (rows) {
      // lhs rows [off, off + size) of [M, K] (or those columns of [K, M]); rhs[g]; out rows.
      t.m = size;
      t.k = s.k;
      t.lhs = a + (s.lhs_trans ? off : off * s.k) * in_size;
      t.lda = s.lhs_trans ? s.extent : s.k;
      t.rhs = b + g * s.k * s.n * rhs_size;
      t.ldb = s.rhs_trans ? s.k : s.n;
      t.out = o + off * s.n * out_size;
    } else {
      // Contracting indices [off, off + size): those rows of [K, M] / [K, N], or columns of
      // [M, K] / [N, K]; out[g].
      t.m = s.m;
      t.k = size;
      t.lhs = a + (s.lhs_trans ? off * s.m : off) * in_size;
      t.lda = s.lhs_trans ? s.m : s.extent;
      t.rhs = b + (s.rhs_trans ? off : off * s.n) * rhs_size;
      t.ldb = s.rhs_trans ? s.extent : s.n;
      t.out = o + g * s.m * s.n * out_size;
    }
    off += size;
    if (t.m == 0 || t.n == 0) continue;  // nothing to write
    if (t.k == 0) {
      // An empty contraction: out = 0 (+ bias), the block dense (ldc = n). cuBLASLt refuses
      // k = 0, so no GEMM.
      be.sum_partials({}, t.out_dtype, t.m * t.n, t.bias, s.n, t.out, t.out_dtype, stream);
      continue;
    }
    be.gemm(t, stream);
  }
}

}  // namespace cgemm
