#pragma once
// The C API's descriptors and options as the runtime's: each C argument checked and converted
// (cgemm_plan_desc to GemmDesc, cgemm_plan_options to QuantizationDesc), refusing with one
// ArgumentError that names the field; and the versioned options structs read by their
// struct_size.

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "capi_errors.hpp"
#include "cgemm/cgemm.h"
#include "cgemm/runtime/plan_description.hpp"

namespace cgemm::capi {

// A C caller may pass any int as an enum; in C++ a value outside the enumerators' range is
// undefined once loaded as the enum (UBSan's -fsanitize=enum reports it). Its bytes, read as
// the int the C ABI passes, are always defined.
template <typename E>
int raw_value(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are passed as int");
  int v = 0;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

/// Throws ArgumentError "WHAT is NULL" when p is null.
void require(const void* p, const char* what);

// A name parsed by one of the planner's parse functions; its cgemm::Error becomes the
// caller's argument error.
template <typename Parse>
auto parse_arg(const char* value, const char* fallback, const char* what, Parse parse) {
  try {
    return parse(value ? value : fallback);
  } catch (const cgemm::Error& e) {
    throw ArgumentError(std::string(what) + ": " + e.what());
  }
}

/// A shape of ndim positive dims (ndim 0..CGEMM_MAX_NDIM).
cgemm::Shape shape_arg(int ndim, const int64_t* dims, const char* what);
/// A contracting-dims list of ndim entries (1..CGEMM_MAX_NDIM).
std::vector<int> dims_arg(int ndim, const int* dims, const char* what);
/// A spec string ("('dp', None, 'tpsp')"); NULL: the empty spec.
cgemm::PartitionSpec spec_arg(const char* text, const char* what);
/// The plan descriptor as the runtime's GemmDesc (its quantization left to quantization_arg).
cgemm::GemmDesc gemm_desc(const cgemm_plan_desc& d);

// cgemm_context_options as this library knows it: the first version's fields end at
// nccl_comm; a struct may not be larger than kMaxOptionsSize (a garbage size is not read).
constexpr size_t kContextOptionsV1 =
    offsetof(cgemm_context_options, nccl_comm) + sizeof(cgemm_context_options::nccl_comm);
constexpr size_t kMaxOptionsSize = 4096;

// The deadline of a context's waits when the options give none and no watchdog runs yet (the
// tools' --timeout default).
constexpr double kDefaultTimeoutS = 300.0;

/// Throws ArgumentError unless struct_size is first_version..kMaxOptionsSize.
void check_options_size(size_t struct_size, size_t first_version, const char* what);

// The caller's options struct copied into this library's: the fields beyond the caller's
// struct_size keep their defaults (zeros), and the caller's bytes beyond this library's struct
// must be zero (fields of a newer header at their defaults), else they would be dropped.
template <typename Options>
Options read_struct(const Options* given, size_t first_version) {
  Options o{};
  o.struct_size = sizeof o;
  if (given == nullptr) return o;
  const size_t n = given->struct_size;
  check_options_size(n, first_version, "options");
  const auto* bytes = reinterpret_cast<const unsigned char*>(given);
  for (size_t i = sizeof o; i < n; ++i) {
    if (bytes[i] != 0) {
      throw ArgumentError("options->struct_size " + std::to_string(n) + ": byte " +
                          std::to_string(i) + " is set, but this library's options struct has " +
                          std::to_string(sizeof o) +
                          " bytes (a field of a newer cgemm.h it cannot honour)");
    }
  }
  std::memcpy(&o, given, std::min(n, sizeof o));
  o.struct_size = sizeof o;
  return o;
}

/// The context options, checked (gpu_sharing 0 or 1, timeout_s in its bounds); NULL: defaults.
cgemm_context_options read_options(const cgemm_context_options* given);

// cgemm_plan_options' first version ends at amax_compute_algo.
constexpr size_t kPlanOptionsV1 =
    offsetof(cgemm_plan_options, amax_compute_algo) + sizeof(cgemm_plan_options::amax_compute_algo);

/// A per-tensor scaling recipe's fields (amax_compute_algo NULL: "max"; amax_history_len 0:
/// 1024), each refused by name (prefix + field) out of its range.
cgemm::ScalingRecipe recipe_arg(const char* amax_compute_algo, int margin, int amax_history_len,
                                const std::string& prefix);

// The plan options as the runtime's QuantizationDesc, in cgemm-run's words.
cgemm::QuantizationDesc quantization_arg(const cgemm_plan_options* given);

}  // namespace cgemm::capi
