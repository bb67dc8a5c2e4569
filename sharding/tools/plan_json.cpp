#include "plan_json.hpp"

#include <cstdint>
#include <istream>
#include <limits>
#include <ostream>
#include <string>

namespace cgemm::plan {

namespace {

// Permutations are printed in full; beyond this many elements the answer would be
// gigabytes of text, so such a case is refused instead.
constexpr int64_t kMaxPermutationElements = int64_t{1} << 26;

std::string type_of(const Json& j) { return j.type_name(); }

const Json& field(const Json& obj, const char* key, const std::string& where) {
  if (!obj.is_object()) {
    throw CaseError(where + " must be an object, got " + type_of(obj));
  }
  const auto it = obj.find(key);
  if (it == obj.end()) {
    throw CaseError("missing field '" + (where.empty() ? "" : where + ".") + key + "'");
  }
  return *it;
}

std::string path(const std::string& where, const char* key) {
  return where.empty() ? std::string(key) : where + "." + key;
}

int64_t as_int64(const Json& j, const std::string& what) {
  if (j.is_number_unsigned()) {
    if (j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw CaseError("'" + what + "' is out of range: " + j.dump());
    }
    return static_cast<int64_t>(j.get<uint64_t>());
  }
  if (!j.is_number_integer()) {
    throw CaseError("'" + what + "' must be an integer, got " + type_of(j) + " " + j.dump());
  }
  return j.get<int64_t>();
}

int as_int(const Json& j, const std::string& what) {
  const int64_t v = as_int64(j, what);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    throw CaseError("'" + what + "' is out of range: " + j.dump());
  }
  return static_cast<int>(v);
}

int64_t as_nonneg(const Json& j, const std::string& what) {
  const int64_t v = as_int64(j, what);
  if (v < 0) throw CaseError("'" + what + "' must be non-negative, got " + std::to_string(v));
  return v;
}

bool as_bool(const Json& j, const std::string& what) {
  if (!j.is_boolean()) {
    throw CaseError("'" + what + "' must be a boolean, got " + type_of(j) + " " + j.dump());
  }
  return j.get<bool>();
}

const std::string& as_string(const Json& j, const std::string& what) {
  if (!j.is_string()) {
    throw CaseError("'" + what + "' must be a string, got " + type_of(j) + " " + j.dump());
  }
  return j.get_ref<const std::string&>();
}

// The name parsers throw cgemm::Error; a bad name is a bad case, not a planning error.
template <typename Parse>
auto parse_name(const Json& j, const std::string& what, Parse parse) {
  const std::string& s = as_string(j, what);
  try {
    return parse(s);
  } catch (const Error& e) {
    throw CaseError("'" + what + "': " + e.what());
  }
}

Shape as_shape(const Json& j, const std::string& what) {
  if (!j.is_array()) {
    throw CaseError("'" + what + "' must be an array of non-negative integers, got " + type_of(j));
  }
  Shape s;
  for (size_t i = 0; i < j.size(); ++i) {
    s.push_back(as_nonneg(j[i], what + "[" + std::to_string(i) + "]"));
  }
  return s;
}

std::vector<int> as_dims(const Json& j, const std::string& what) {
  if (!j.is_array()) throw CaseError("'" + what + "' must be an array of integers");
  std::vector<int> dims;
  for (size_t i = 0; i < j.size(); ++i) {
    dims.push_back(as_int(j[i], what + "[" + std::to_string(i) + "]"));
  }
  return dims;
}

ContractingDims as_contracting_dims(const Json& j) {
  if (!j.is_array() || j.size() != 2) {
    throw CaseError("'contracting_dims' must be [[lhs dims...], [rhs dims...]], got " + j.dump());
  }
  return {as_dims(j[0], "contracting_dims[0]"), as_dims(j[1], "contracting_dims[1]")};
}

std::optional<std::string> as_resource(const Json& j, const std::string& what) {
  if (j.is_null()) return std::nullopt;
  return as_string(j, what);
}

OperandSpec as_operand_spec(const Json& j, const std::string& what) {
  OperandSpec op;
  op.ndim = static_cast<size_t>(as_nonneg(field(j, "ndim", what), path(what, "ndim")));
  op.spec = spec_from_json(field(j, "spec", what), path(what, "spec"));
  return op;
}

TensorDesc as_tensor(const Json& j, const std::string& what) {
  TensorDesc t;
  t.shape = as_shape(field(j, "shape", what), path(what, "shape"));
  t.dtype = parse_name(field(j, "dtype", what), path(what, "dtype"), parse_dtype);
  return t;
}

Json shape_to_json(const Shape& s) {
  Json j = Json::array();
  for (int64_t d : s) j.push_back(d);
  return j;
}

Json answer_op(const Json& c) {
  const std::string& op = as_string(field(c, "op", ""), "op");
  if (op == "gemm_sharding") return to_json(infer_gemm_sharding(sharding_input_from_json(c)));
  if (op == "gemm_abstract") return to_json(gemm_abstract(abstract_input_from_json(c)));
  if (op == "reorder") {
    const ReorderCase r = reorder_case_from_json(c);
    Json perm = Json::array();
    for (int64_t v : reorder_permutation(r.kind, r.shape, r.dp_size, r.tpsp_size)) {
      perm.push_back(v);
    }
    return Json{{"permutation", std::move(perm)}};
  }
  throw CaseError("unknown op '" + op + "' (known: gemm_sharding, gemm_abstract, reorder)");
}

}  // namespace

std::optional<PartitionSpec> spec_from_json(const Json& j, const std::string& what) {
  if (j.is_null()) return std::nullopt;
  if (!j.is_array()) {
    throw CaseError("'" + what + "' must be null or an array of entries, got " + type_of(j));
  }
  PartitionSpec spec;
  for (size_t i = 0; i < j.size(); ++i) {
    const Json& e = j[i];
    const std::string ewhat = what + "[" + std::to_string(i) + "]";
    if (e.is_null()) {
      spec.push_back(SpecEntry::none());
    } else if (e.is_string()) {
      spec.push_back(SpecEntry::axis(e.get<std::string>()));
    } else if (e.is_array()) {
      // An empty tuple would be indistinguishable from None in this encoding.
      if (e.empty()) throw CaseError("'" + ewhat + "': a tuple entry needs at least one axis");
      std::vector<std::string> names;
      for (size_t k = 0; k < e.size(); ++k) {
        names.push_back(as_string(e[k], ewhat + "[" + std::to_string(k) + "]"));
      }
      spec.push_back(SpecEntry::tuple(std::move(names)));
    } else {
      throw CaseError("'" + ewhat + "' must be null, an axis name or an array of axis names, got " +
                      e.dump());
    }
  }
  return spec;
}

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
  int64_t total = 1;
  for (int64_t d : r.shape) {
    if (d == 0) {
      total = 0;
      break;
    }
    if (__builtin_mul_overflow(total, d, &total) || total > kMaxPermutationElements) {
      throw CaseError("reorder shape " + shape_str(r.shape) +
                      " has too many elements to list a permutation (limit " +
                      std::to_string(kMaxPermutationElements) + ")");
    }
  }
  return r;
}

Json answer_case(const Json& c) {
  Json answer;
  answer["id"] = (c.is_object() && c.contains("id")) ? c.at("id") : Json(nullptr);
  try {
    if (!c.is_object()) throw CaseError("a case must be a JSON object, got " + type_of(c));
    Json result = answer_op(c);
    for (auto& [key, value] : result.items()) answer[key] = std::move(value);
  } catch (const std::exception& e) {
    // PlanError (gemm.py raised), CaseError (unusable case), or a library failure such as
    // bad_alloc: all are answered, never fatal to the stream.
    answer["error"] = e.what()[0] ? e.what() : "unknown error";
  }
  return answer;
}

int run_plan_lines(std::istream& in, std::ostream& out, std::ostream& err) {
  int status = 0;
  std::string line;
  for (size_t lineno = 1; std::getline(in, line); ++lineno) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t\f\v") == std::string::npos) continue;
    Json answer;
    try {
      answer = answer_case(Json::parse(line));
    } catch (const Json::parse_error& e) {
      const std::string msg = "line " + std::to_string(lineno) + " is not JSON: " + e.what();
      err << "cgemm-plan: " << msg << '\n';
      answer = Json{{"id", nullptr}, {"error", msg}};
      status = 1;
    }
    // Replace, not throw, on invalid UTF-8 (it can only come from echoed parser messages).
    out << answer.dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
    out.flush();
  }
  return status;
}

}  // namespace cgemm::plan
