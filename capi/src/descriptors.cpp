// The C API's descriptors and options as the runtime's (descriptors.hpp).

#include "descriptors.hpp"

#include <algorithm>

#include "cgemm/core/collective_op.hpp"
#include "cgemm/core/dtype.hpp"
#include "cgemm/core/process_timer.hpp"  // kMaxTimeoutSeconds
#include "cgemm/gemm/quantize_task.hpp"
#include "cgemm/gemm/scaling_recipe.hpp"
#include "cgemm/runtime/quantization_names.hpp"
#include "cgemm/sharding/partition_spec.hpp"

namespace cgemm::capi {

void require(const void* p, const char* what) {
  if (p == nullptr) throw ArgumentError(std::string(what) + " is NULL");
}

cgemm::Shape shape_arg(int ndim, const int64_t* dims, const char* what) {
  if (ndim < 0 || ndim > CGEMM_MAX_NDIM) {
    throw ArgumentError(std::string(what) + " " + std::to_string(ndim) + ": must be 0.." +
                        std::to_string(CGEMM_MAX_NDIM));
  }
  cgemm::Shape s(dims, dims + ndim);
  for (int d = 0; d < ndim; ++d) {
    if (s[static_cast<size_t>(d)] <= 0) {
      throw ArgumentError(std::string(what) + ": dim " + std::to_string(d) + " is " +
                          std::to_string(s[static_cast<size_t>(d)]) + ", must be positive");
    }
  }
  return s;
}

std::vector<int> dims_arg(int ndim, const int* dims, const char* what) {
  if (ndim < 1 || ndim > CGEMM_MAX_NDIM) {
    throw ArgumentError(std::string(what) + " " + std::to_string(ndim) + ": must be 1.." +
                        std::to_string(CGEMM_MAX_NDIM));
  }
  return std::vector<int>(dims, dims + ndim);
}

cgemm::PartitionSpec spec_arg(const char* text, const char* what) {
  if (text == nullptr) return {};
  try {
    return cgemm::parse_spec(text);
  } catch (const cgemm::Error& e) {
    throw ArgumentError(std::string(what) + ": " + e.what());
  }
}

cgemm::GemmDesc gemm_desc(const cgemm_plan_desc& d) {
  cgemm::GemmDesc g;
  g.name = d.name ? d.name : "gemm";
  g.lhs_shape = shape_arg(d.lhs_ndim, d.lhs_shape, "lhs_ndim");
  g.rhs_shape = shape_arg(d.rhs_ndim, d.rhs_shape, "rhs_ndim");
  if (d.bias_ndim != 0) g.bias_shape = shape_arg(d.bias_ndim, d.bias_shape, "bias_ndim");
  g.dtype = parse_arg(d.dtype, "bfloat16", "dtype", cgemm::parse_dtype);
  g.out_dtype = d.out_dtype ? parse_arg(d.out_dtype, "", "out_dtype", cgemm::parse_dtype) : g.dtype;
  g.lhs_spec = spec_arg(d.lhs_spec, "lhs_spec");
  g.rhs_spec = spec_arg(d.rhs_spec, "rhs_spec");
  if (d.bias_ndim == 0 && d.bias_spec != nullptr) {
    // Planned without a bias, the spec would be dropped without a word.
    throw ArgumentError(std::string("bias_spec \"") + d.bias_spec +
                        "\" is given but the plan has no bias (bias_ndim 0): set bias_ndim and "
                        "bias_shape, or leave bias_spec NULL");
  }
  g.bias_spec = spec_arg(d.bias_spec, "bias_spec");
  g.contracting_dims = {
      dims_arg(d.lhs_contracting_ndim, d.lhs_contracting, "lhs_contracting_ndim"),
      dims_arg(d.rhs_contracting_ndim, d.rhs_contracting, "rhs_contracting_ndim")};
  g.collective = parse_arg(d.collective, "none", "collective", cgemm::parse_collective);
  g.transpose_batch_sequence = d.transpose_batch_sequence != 0;
  return g;
}

void check_options_size(size_t struct_size, size_t first_version, const char* what) {
  if (struct_size < first_version || struct_size > kMaxOptionsSize) {
    throw ArgumentError(std::string(what) + "->struct_size " + std::to_string(struct_size) +
                        ": must be " + std::to_string(first_version) + ".." +
                        std::to_string(kMaxOptionsSize) +
                        " bytes (set it with the struct's _init and sizeof)");
  }
}

cgemm_context_options read_options(const cgemm_context_options* given) {
  cgemm_context_options o = read_struct(given, kContextOptionsV1);
  if (o.gpu_sharing != 0 && o.gpu_sharing != 1) {
    throw ArgumentError("options->gpu_sharing " + std::to_string(o.gpu_sharing) +
                        ": must be 0 or 1");
  }
  for (const auto& [v, name] :
       {std::pair{o.compute_stream_priority, "compute_stream_priority"},
        std::pair{o.communication_stream_priority, "communication_stream_priority"},
        std::pair{o.num_sm_for_communication, "num_sm_for_communication"}}) {
    if (v < 0) {
      throw ArgumentError("options->" + std::string(name) + " " + std::to_string(v) +
                          ": must be 0 or more");
    }
  }
  if (o.no_ce != 0 && o.no_ce != 1) {
    throw ArgumentError("options->no_ce " + std::to_string(o.no_ce) + ": must be 0 or 1");
  }
  if (o.fsdp < 0) {
    throw ArgumentError("options->fsdp " + std::to_string(o.fsdp) +
                        ": must be 0 or 1 (no fsdp axis) or the fsdp size");
  }
  if (!(o.timeout_s == 0.0 || (o.timeout_s > 0.0 && o.timeout_s <= cgemm::kMaxTimeoutSeconds))) {
    throw ArgumentError("options->timeout_s " + std::to_string(o.timeout_s) +
                        ": must be 0 (the default) or more than 0 up to " +
                        std::to_string(static_cast<int64_t>(cgemm::kMaxTimeoutSeconds)) +
                        " seconds");
  }
  return o;
}

cgemm::ScalingRecipe recipe_arg(const char* amax_compute_algo, int margin, int amax_history_len,
                                const std::string& prefix) {
  cgemm::ScalingRecipe r;
  r.algo = parse_arg(amax_compute_algo, "max", (prefix + "amax_compute_algo").c_str(),
                     [](const std::string& t) { return cgemm::quant::parse_amax_compute_algo(t); });
  if (margin < 0 || margin > 127) {
    throw ArgumentError(prefix + "margin " + std::to_string(margin) +
                        ": must be 0..127 (powers of 2)");
  }
  r.margin = margin;
  if (amax_history_len < 0 || amax_history_len > cgemm::kMaxAmaxHistoryLen) {
    throw ArgumentError(prefix + "amax_history_len " + std::to_string(amax_history_len) +
                        ": must be 1.." + std::to_string(cgemm::kMaxAmaxHistoryLen) +
                        " (2^23; 0: 1024)");
  }
  if (amax_history_len > 0) r.amax_history_len = amax_history_len;
  return r;
}

cgemm::QuantizationDesc quantization_arg(const cgemm_plan_options* given) {
  const cgemm_plan_options o = read_struct(given, kPlanOptionsV1);
  cgemm::QuantizationDesc q;
  q.mode = parse_arg(o.scaling, "none", "options->scaling", cgemm::parse_scaling_option);
  q.lhs_format = parse_arg(o.lhs_format, "e4m3", "options->lhs_format", cgemm::parse_fp8_format);
  q.rhs_format = parse_arg(o.rhs_format, "e4m3", "options->rhs_format", cgemm::parse_fp8_format);
  q.recipe = recipe_arg(o.amax_compute_algo, o.margin, o.amax_history_len, "options->");
  for (const auto& [v, name] :
       {std::pair{o.lhs_quantized, "lhs_quantized"}, std::pair{o.rhs_quantized, "rhs_quantized"}}) {
    if (v != 0 && v != 1) {
      throw ArgumentError("options->" + std::string(name) + " " + std::to_string(v) +
                          ": must be 0 or 1");
    }
  }
  q.lhs_quantized = o.lhs_quantized != 0;
  q.rhs_quantized = o.rhs_quantized != 0;
  return q;
}

}  // namespace cgemm::capi
