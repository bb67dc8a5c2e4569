#include "plan_schema.hpp"

#include <cstdint>
#include <exception>
#include <iterator>
#include <utility>
#include <vector>

#include "case_fields.hpp"
#include "json_release.hpp"

namespace cgemm::plan {

namespace {

OperandSpec as_operand_spec(const Json& j, const std::string& what) {
  OperandSpec op;
  const int64_t ndim = as_nonneg(field(j, "ndim", what), path(what, "ndim"));
  if (ndim > kMaxNdim) {
    throw CaseError("'" + path(what, "ndim") + "' is " + std::to_string(ndim) + ", more than " +
                    cap_name("ndim", kMaxNdim));
  }
  op.ndim = static_cast<size_t>(ndim);
  op.spec = spec_from_json(field(j, "spec", what), path(what, "spec"));
  return op;
}

TensorDesc as_tensor(const Json& j, const std::string& what) {
  TensorDesc t;
  t.shape = as_shape(field(j, "shape", what), path(what, "shape"));
  t.dtype = parse_name(field(j, "dtype", what), path(what, "dtype"), parse_dtype);
  return t;
}

// obj[key] when present and not null, else nullptr: the optional fields of grouped_gemm.
const Json* optional_field(const Json& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// A group-size array (null or [sizes...]): only its length matters.
int64_t group_sizes_length(const Json& j, const std::string& what) {
  if (j.is_null()) return 0;
  if (!j.is_array()) {
    throw CaseError("'" + what + "' must be null or an array of group sizes, got " + brief(j));
  }
  for (size_t i = 0; i < j.size(); ++i) as_int64(j[i], what + "[" + std::to_string(i) + "]");
  return static_cast<int64_t>(j.size());
}

GroupedOperand as_grouped_operand(const Json& j, const std::string& what) {
  GroupedOperand op;
  const std::string& kind = as_string(field(j, "kind", what), path(what, "kind"));
  if (kind == "scaled") {
    op.scaled = true;
  } else if (kind != "no_scale") {
    throw CaseError("unknown '" + path(what, "kind") + "' '" + kind +
                    "' (known: no_scale, scaled)");
  }
  op.original_shape = as_shape(field(j, "original_shape", what), path(what, "original_shape"));
  op.dtype = parse_name(field(j, "dtype", what), path(what, "dtype"), parse_dtype);
  op.first_dims_size = group_sizes_length(field(j, "first_dims", what), path(what, "first_dims"));
  op.last_dims_size = group_sizes_length(field(j, "last_dims", what), path(what, "last_dims"));
  if (op.scaled) {
    op.scaling_mode =
        parse_name(field(j, "scaling_mode", what), path(what, "scaling_mode"), parse_scaling_mode);
    op.dq_dtype = parse_name(field(j, "dq_dtype", what), path(what, "dq_dtype"), parse_dtype);
    const std::string& layout = as_string(field(j, "data_layout", what), path(what, "data_layout"));
    if (layout != "N" && layout != "T") {
      throw CaseError("'" + path(what, "data_layout") + "' must be \"N\" or \"T\", got '" + layout +
                      "'");
    }
    op.layout_is_t = layout == "T";
    op.scale_inv_size = as_nonneg(field(j, "scale_inv_size", what), path(what, "scale_inv_size"));
  }
  return op;
}

std::vector<int64_t> as_dims64(const Json& j, const std::string& what) {
  if (!j.is_array()) throw CaseError("'" + what + "' must be an array of integers");
  check_rank(j, what);
  std::vector<int64_t> dims;
  for (size_t i = 0; i < j.size(); ++i) {
    dims.push_back(as_int64(j[i], what + "[" + std::to_string(i) + "]"));
  }
  return dims;
}

Json shape_to_json(const Shape& s) {
  Json j = Json::array();
  for (int64_t d : s) j.push_back(d);
  return j;
}

// gemm_abstract's arithmetic is 64-bit (gemm.py's is unbounded): a case whose element
// counts, all-gathered dim or workspace size would overflow is refused.
int64_t checked_elements(const Shape& s, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (__builtin_mul_overflow(n, d, &n)) {
      throw CaseError("the element count of '" + what + "' " + shape_str(s) + " overflows 64 bits");
    }
  }
  return n;
}

void check_abstract_arithmetic(const GemmAbstractInput& in) {
  const int64_t lhs_scale = checked_elements(in.lhs_scale_shape, "lhs_scale_shape");
  const int64_t rhs_scale = checked_elements(in.rhs_scale_shape, "rhs_scale_shape");
  if (in.bias) checked_elements(in.bias->shape, "bias.shape");
  if (in.collective_op == CollectiveOp::kAllGather && !in.is_outer) {
    // Output dim 1 is multiplied by tpsp_size; it can be any dim of either operand.
    for (const Shape* s : {&in.lhs.shape, &in.rhs.shape}) {
      for (int64_t d : *s) {
        if (int64_t p; __builtin_mul_overflow(d, in.tpsp_size, &p)) {
          throw CaseError("all-gathered output dim " + std::to_string(d) + " x tpsp_size " +
                          std::to_string(in.tpsp_size) + " overflows 64 bits");
        }
      }
    }
  }
  int64_t w = cublas_workspace_bytes(in.compute_capability);
  if ((is_nvfp4(in.scaling_mode) &&
       (__builtin_add_overflow(w, lhs_scale, &w) || __builtin_add_overflow(w, rhs_scale, &w))) ||
      (in.collective_op != CollectiveOp::kNone &&
       __builtin_mul_overflow(w, in.num_max_streams, &w)) ||
      __builtin_add_overflow(w, 256, &w)) {
    throw CaseError("the workspace size overflows 64 bits");
  }
}

// The planner multiplies dims, dp_size and tpsp_size in 64 bits: every product of the
// non-zero dims and the two sizes must fit. The permutation is listed in full, so its
// length is capped too.
void check_reorder_arithmetic(const ReorderCase& r) {
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : r.shape) {
    if (d == 0) {
      empty = true;
    } else if (__builtin_mul_overflow(nonzero, d, &nonzero)) {
      throw CaseError("reorder shape " + shape_str(r.shape) + ": its dims multiply past 64 bits");
    }
  }
  int64_t scaled = nonzero;
  if (r.dp_size >= 1 && r.tpsp_size >= 1 &&
      (__builtin_mul_overflow(scaled, r.dp_size, &scaled) ||
       __builtin_mul_overflow(scaled, r.tpsp_size, &scaled))) {
    throw CaseError("reorder shape " + shape_str(r.shape) + " with dp_size " +
                    std::to_string(r.dp_size) + " and tpsp_size " + std::to_string(r.tpsp_size) +
                    ": the sizes multiply past 64 bits");
  }
  if (!empty && nonzero > kMaxPermutationElements) {
    throw CaseError("reorder shape " + shape_str(r.shape) + " has " + std::to_string(nonzero) +
                    " elements, too many to list a permutation: more than " +
                    cap_name("reorder element", kMaxPermutationElements));
  }
}

}  // namespace

Json entry_to_json(const SpecEntry& e) {
  if (e.is_tuple) {
    Json names = Json::array();
    for (const auto& a : e.axes) names.push_back(a);
    return names;
  }
  if (e.axes.empty()) return nullptr;
  return e.axes[0];
}

Json spec_to_json(const PartitionSpec& spec) {
  Json j = Json::array();
  for (const auto& e : spec) j.push_back(entry_to_json(e));
  return j;
}

GemmShardingInput sharding_input_from_json(const Json& c) {
  GemmShardingInput in;
  const Json& mr = field(c, "mesh_resource", "");
  in.mesh_resource.dp_resource =
      as_resource(field(mr, "dp_resource", "mesh_resource"), "mesh_resource.dp_resource");
  in.mesh_resource.tp_resource =
      as_resource(field(mr, "tp_resource", "mesh_resource"), "mesh_resource.tp_resource");
  in.mesh_resource.tpsp_resource =
      as_resource(field(mr, "tpsp_resource", "mesh_resource"), "mesh_resource.tpsp_resource");
  in.mesh_resource.fsdp_resource =
      as_resource(field(mr, "fsdp_resource", "mesh_resource"), "mesh_resource.fsdp_resource");
  in.lhs = as_operand_spec(field(c, "lhs", ""), "lhs");
  in.rhs = as_operand_spec(field(c, "rhs", ""), "rhs");
  const Json& bias = field(c, "bias", "");
  if (!bias.is_null()) in.bias = as_operand_spec(bias, "bias");
  in.contracting_dims = as_contracting_dims(field(c, "contracting_dims", ""));
  in.collective_op = parse_name(field(c, "collective_op", ""), "collective_op", parse_collective);
  in.scaling_mode = parse_name(field(c, "scaling_mode", ""), "scaling_mode", parse_scaling_mode);
  in.transpose_batch_sequence =
      as_bool(field(c, "transpose_batch_sequence", ""), "transpose_batch_sequence");
  return in;
}

Json to_json(const GemmSharding& s) {
  Json j;
  j["lhs"] = spec_to_json(s.lhs);
  j["lhs_scale"] = spec_to_json(s.lhs_scale);
  j["rhs"] = spec_to_json(s.rhs);
  j["rhs_scale"] = spec_to_json(s.rhs_scale);
  j["bias"] = spec_to_json(s.bias);
  j["out"] = spec_to_json(s.out);
  j["reduce_spec"] = s.reduce_spec ? entry_to_json(*s.reduce_spec) : Json(nullptr);
  j["sequence_dim"] = s.sequence_dim ? Json(*s.sequence_dim) : Json(nullptr);
  j["warnings"] = s.warnings;
  return j;
}

GemmAbstractInput abstract_input_from_json(const Json& c) {
  GemmAbstractInput in;
  in.lhs = as_tensor(field(c, "lhs", ""), "lhs");
  in.rhs = as_tensor(field(c, "rhs", ""), "rhs");
  in.lhs_scale_shape = as_shape(field(c, "lhs_scale_shape", ""), "lhs_scale_shape");
  in.rhs_scale_shape = as_shape(field(c, "rhs_scale_shape", ""), "rhs_scale_shape");
  const Json& bias = field(c, "bias", "");
  if (!bias.is_null()) in.bias = as_tensor(bias, "bias");
  const Json& alpha = field(c, "alpha", "");
  in.alpha_size = as_nonneg(field(alpha, "size", "alpha"), "alpha.size");
  in.alpha_dtype = parse_name(field(alpha, "dtype", "alpha"), "alpha.dtype", parse_dtype);
  const Json& beta = field(c, "beta", "");
  in.beta_size = as_nonneg(field(beta, "size", "beta"), "beta.size");
  in.beta_dtype = parse_name(field(beta, "dtype", "beta"), "beta.dtype", parse_dtype);
  in.out_dtype = parse_name(field(c, "out_dtype", ""), "out_dtype", parse_dtype);
  in.contracting_dims = as_contracting_dims(field(c, "contracting_dims", ""));
  in.scaling_mode = parse_name(field(c, "scaling_mode", ""), "scaling_mode", parse_scaling_mode);
  in.collective_op = parse_name(field(c, "collective_op", ""), "collective_op", parse_collective);
  in.is_outer = as_bool(field(c, "is_outer", ""), "is_outer");
  in.sequence_dim = as_int(field(c, "sequence_dim", ""), "sequence_dim");
  in.tpsp_size = as_int(field(c, "tpsp_size", ""), "tpsp_size");
  in.compute_capability = as_int(field(c, "compute_capability", ""), "compute_capability");
  in.num_max_streams = as_int(field(c, "num_max_streams", ""), "num_max_streams");
  return in;
}

Json to_json(const GemmAbstract& a) {
  Json j;
  j["out_shape"] = shape_to_json(a.out_shape);
  j["out_dtype"] = std::string(dtype_name(a.out_dtype));
  j["workspace_bytes"] = a.workspace_bytes;
  return j;
}

GroupedGemmInput grouped_input_from_json(const Json& c) {
  GroupedGemmInput in;
  in.lhs = as_grouped_operand(field(c, "lhs", ""), "lhs");
  in.rhs = as_grouped_operand(field(c, "rhs", ""), "rhs");
  const Json& cd = field(c, "contracting_dims", "");
  if (!cd.is_array() || cd.size() != 2) {
    throw CaseError("'contracting_dims' must be [[lhs dims...], [rhs dims...]], got " + brief(cd));
  }
  in.lhs_contracting_dims = as_dims64(cd[0], "contracting_dims[0]");
  in.rhs_contracting_dims = as_dims64(cd[1], "contracting_dims[1]");
  if (const Json* bias = optional_field(c, "bias")) {
    in.bias_shape = as_shape(field(*bias, "shape", "bias"), "bias.shape");
  }
  if (const Json* t = optional_field(c, "preferred_element_type")) {
    in.preferred_element_type = parse_name(*t, "preferred_element_type", parse_dtype);
  }
  in.group_offset_given = optional_field(c, "group_offset") != nullptr;
  if (const Json* cc = optional_field(c, "compute_capability")) {
    in.compute_capability = as_int(*cc, "compute_capability");
  }
  if (const Json* n = optional_field(c, "num_compute_streams")) {
    in.num_compute_streams = as_int64(*n, "num_compute_streams");
  }
  if (const Json* v2 = optional_field(c, "v2_available")) {
    in.v2_available = as_bool(*v2, "v2_available");
  }
  if (const Json* env = optional_field(c, "enforce_v2_env")) {
    in.enforce_v2_env = as_string(*env, "enforce_v2_env");
  }
  in.setup_workspace_size = as_int64(field(c, "setup_workspace_size", ""), "setup_workspace_size");
  return in;
}

Json to_json(const GroupedGemm& g) {
  const auto dims_json = [](const std::vector<int64_t>& dims) {
    Json j = Json::array();
    for (int64_t d : dims) j.push_back(d);
    return j;
  };
  const auto optional_json = [](const std::optional<int64_t>& v) {
    return v ? Json(*v) : Json(nullptr);
  };
  Json j;
  j["out_shape"] = shape_to_json(g.out_shape);
  j["out_dtype"] = std::string(dtype_name(g.out_dtype));
  j["scaling_mode"] = std::string(scaling_mode_name(g.scaling_mode));
  j["lhs_is_trans"] = g.lhs_is_trans;
  j["rhs_is_trans"] = g.rhs_is_trans;
  j["lhs_flatten_axis"] = g.lhs_flatten_axis;
  j["rhs_flatten_axis"] = g.rhs_flatten_axis;
  j["lhs_contracting_dims"] = dims_json(g.lhs_contracting_dims);
  j["rhs_contracting_dims"] = dims_json(g.rhs_contracting_dims);
  j["lhs_axis_boundary"] = g.lhs_axis_boundary;
  j["rhs_axis_boundary"] = g.rhs_axis_boundary;
  j["lhs_left_size"] = g.lhs_left_size;
  j["lhs_right_size"] = g.lhs_right_size;
  j["rhs_left_size"] = g.rhs_left_size;
  j["rhs_right_size"] = g.rhs_right_size;
  j["num_gemms"] = g.num_gemms;
  j["out_first_dims_size"] = g.out_first_dims_size;
  j["out_last_dims_size"] = g.out_last_dims_size;
  j["has_bias"] = g.has_bias;
  j["use_v2_ffi"] = g.use_v2_ffi;
  j["cublas_workspace_bytes"] = g.cublas_workspace_bytes;
  j["setup_workspace_bytes"] = optional_json(g.setup_workspace_bytes);
  j["int64_workspace_bytes"] = optional_json(g.int64_workspace_bytes);
  return j;
}

ReorderCase reorder_case_from_json(const Json& c) {
  ReorderCase r;
  const std::string& kind = as_string(field(c, "kind", ""), "kind");
  if (kind == "tpsp_leading") {
    r.kind = ReorderKind::kTpspLeading;
  } else if (kind == "dp_leading") {
    r.kind = ReorderKind::kDpLeading;
  } else {
    throw CaseError("unknown reorder kind '" + kind + "' (known: tpsp_leading, dp_leading)");
  }
  r.shape = as_shape(field(c, "shape", ""), "shape");
  r.dp_size = as_int(field(c, "dp_size", ""), "dp_size");
  r.tpsp_size = as_int(field(c, "tpsp_size", ""), "tpsp_size");
  check_reorder_arithmetic(r);
  return r;
}

namespace {

Json answer_gemm_sharding(const Json& c) {
  return to_json(infer_gemm_sharding(sharding_input_from_json(c)));
}

Json answer_gemm_abstract(const Json& c) {
  const GemmAbstractInput in = abstract_input_from_json(c);
  check_abstract_arithmetic(in);
  return to_json(gemm_abstract(in));
}

Json answer_grouped_gemm(const Json& c) {
  return to_json(grouped_gemm(grouped_input_from_json(c)));
}

Json answer_reorder(const Json& c) {
  const ReorderCase r = reorder_case_from_json(c);
  const std::vector<int64_t> perm = reorder_permutation(r.kind, r.shape, r.dp_size, r.tpsp_size);
  Json answer = {{"permutation", Json::array()}};
  // Reserved in one allocation, so that a case short of memory fails before the list holds
  // anything, and filling it allocates nothing.
  auto& list = answer.at("permutation").get_ref<Json::array_t&>();
  list.reserve(perm.size());
  for (const int64_t v : perm) list.emplace_back(v);
  return answer;
}

// The ops a case may name, in the order the unknown-op message lists them.
struct Op {
  const char* name;
  Json (*answer)(const Json& c);  // the result fields; throws for an unusable case
};
constexpr Op kOps[] = {
    {"gemm_sharding", answer_gemm_sharding},
    {"gemm_abstract", answer_gemm_abstract},
    {"reorder", answer_reorder},
    {"grouped_gemm", answer_grouped_gemm},
};

Json answer_op(const Json& c) {
  const std::string& op = as_string(field(c, "op", ""), "op");
  std::string known;
  for (const Op& o : kOps) {
    if (op == o.name) return o.answer(c);
    known += (known.empty() ? "" : ", ") + std::string(o.name);
  }
  throw CaseError("unknown op '" + op + "' (known: " + known + ")");
}

}  // namespace

Json answer_case(const Json& c) {
  Json answer;
  answer["id"] = (c.is_object() && c.contains("id")) ? c.at("id") : Json(nullptr);
  try {
    if (!c.is_object())
      throw CaseError("a case must be a JSON object, got " + std::string(c.type_name()));
    Json result = answer_op(c);
    const ReleaseOnExit release_result(result);
    for (auto& [key, value] : result.items()) answer[key] = std::move(value);
  } catch (const std::exception& e) {
    // PlanError (gemm.py raised), CaseError (unusable case), or a library failure such as
    // bad_alloc: all are answered, never fatal to the stream.
    for (auto it = std::next(answer.begin()); it != answer.end(); ++it) release(it.value());
    answer.erase(std::next(answer.begin()), answer.end());
    std::string msg = e.what()[0] ? e.what() : "unknown error";
    if (msg.size() > 1000) msg = msg.substr(0, 1000) + "...";
    answer["error"] = std::move(msg);
  }
  return answer;
}

}  // namespace cgemm::plan
