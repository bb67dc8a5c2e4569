#include "plan_json.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <istream>
#include <limits>
#include <new>
#include <optional>
#include <ostream>
#include <string>
#include <utility>

namespace cgemm::plan {

namespace {

std::string type_of(const Json& j) { return j.type_name(); }

// A value as quoted in a message: its JSON text, cut short when long.
std::string brief(const Json& j) {
  std::string text = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  constexpr size_t kMax = 80;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

// "the ndim limit (1024)", "the depth limit (256 levels)": how a message names a limit.
std::string cap_name(const char* what, uint64_t limit, const char* unit = "") {
  return std::string("the ") + what + " limit (" + std::to_string(limit) + (unit[0] ? " " : "") +
         unit + ")";
}

// Arrays that hold one item per dimension are refused beyond kMaxNdim items.
void check_rank(const Json& j, const std::string& what) {
  if (j.is_array() && j.size() > static_cast<size_t>(kMaxNdim)) {
    throw CaseError("'" + what + "' has " + std::to_string(j.size()) + " entries, more than " +
                    cap_name("ndim", kMaxNdim));
  }
}

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
      throw CaseError("'" + what + "' is out of range: " + brief(j));
    }
    return static_cast<int64_t>(j.get<uint64_t>());
  }
  if (!j.is_number_integer()) {
    throw CaseError("'" + what + "' must be an integer, got " + type_of(j) + " " + brief(j));
  }
  return j.get<int64_t>();
}

int as_int(const Json& j, const std::string& what) {
  const int64_t v = as_int64(j, what);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    throw CaseError("'" + what + "' is out of range: " + brief(j));
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
    throw CaseError("'" + what + "' must be a boolean, got " + type_of(j) + " " + brief(j));
  }
  return j.get<bool>();
}

const std::string& as_string(const Json& j, const std::string& what) {
  if (!j.is_string()) {
    throw CaseError("'" + what + "' must be a string, got " + type_of(j) + " " + brief(j));
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
  check_rank(j, what);
  Shape s;
  for (size_t i = 0; i < j.size(); ++i) {
    s.push_back(as_nonneg(j[i], what + "[" + std::to_string(i) + "]"));
  }
  return s;
}

std::vector<int> as_dims(const Json& j, const std::string& what) {
  if (!j.is_array()) throw CaseError("'" + what + "' must be an array of integers");
  check_rank(j, what);
  std::vector<int> dims;
  for (size_t i = 0; i < j.size(); ++i) {
    dims.push_back(as_int(j[i], what + "[" + std::to_string(i) + "]"));
  }
  return dims;
}

ContractingDims as_contracting_dims(const Json& j) {
  if (!j.is_array() || j.size() != 2) {
    throw CaseError("'contracting_dims' must be [[lhs dims...], [rhs dims...]], got " + brief(j));
  }
  return {as_dims(j[0], "contracting_dims[0]"), as_dims(j[1], "contracting_dims[1]")};
}

std::optional<std::string> as_resource(const Json& j, const std::string& what) {
  if (j.is_null()) return std::nullopt;
  return as_string(j, what);
}

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

Json answer_op(const Json& c) {
  const std::string& op = as_string(field(c, "op", ""), "op");
  if (op == "gemm_sharding") return to_json(infer_gemm_sharding(sharding_input_from_json(c)));
  if (op == "gemm_abstract") {
    const GemmAbstractInput in = abstract_input_from_json(c);
    check_abstract_arithmetic(in);
    return to_json(gemm_abstract(in));
  }
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
  check_rank(j, what);
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
                      brief(e));
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
  // The planner multiplies dims, dp_size and tpsp_size in 64 bits: every product of the
  // non-zero dims and the two sizes must fit.
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
    answer.erase(std::next(answer.begin()), answer.end());
    std::string msg = e.what()[0] ? e.what() : "unknown error";
    if (msg.size() > 1000) msg = msg.substr(0, 1000) + "...";
    answer["error"] = std::move(msg);
  }
  return answer;
}

namespace {

// --- a lenient scan of a line's text, without building values ---------------------------

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skip_ws(std::string_view s, size_t i) {
  while (i < s.size() && is_ws(s[i])) ++i;
  return i;
}

// s[i] is '"': the index just past the closing quote, or npos.
size_t skip_string(std::string_view s, size_t i) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// The index just past the value starting at s[i] (strings, arrays and objects matched by
// brackets only; a scalar must be followed by something), or npos.
size_t skip_value(std::string_view s, size_t i) {
  if (i >= s.size()) return std::string_view::npos;
  if (s[i] == '"') return skip_string(s, i);
  if (s[i] == '{' || s[i] == '[') {
    size_t depth = 0;
    while (i < s.size()) {
      const char c = s[i];
      if (c == '"') {
        i = skip_string(s, i);
        if (i == std::string_view::npos) return i;
        continue;
      }
      if (c == '{' || c == '[') ++depth;
      if ((c == '}' || c == ']') && --depth == 0) return i + 1;
      ++i;
    }
    return std::string_view::npos;
  }
  while (i < s.size() && !is_ws(s[i]) && s[i] != ',' && s[i] != '}' && s[i] != ']') ++i;
  return i < s.size() ? i : std::string_view::npos;
}

// The deepest nesting of arrays and objects, counting brackets outside strings.
int nesting_depth(std::string_view s) {
  int depth = 0, deepest = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') {
      i = skip_string(s, i);
      if (i == std::string_view::npos) break;
      --i;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

bool key_is_id(std::string_view key) {
  if (key == "\"id\"") return true;
  if (key.find('\\') == std::string_view::npos) return false;
  try {
    const Json k = Json::parse(key);
    return k.is_string() && k.get_ref<const std::string&>() == "id";
  } catch (const std::exception&) {
    return false;
  }
}

// The text of the value of the top-level "id" key (the last one, as the parser keeps it)
// when the line is an object; scanned as far as the line allows.
std::optional<std::string_view> id_text(std::string_view s) {
  std::optional<std::string_view> found;
  size_t i = skip_ws(s, 0);
  if (i >= s.size() || s[i] != '{') return found;
  for (i = skip_ws(s, i + 1); i < s.size() && s[i] == '"'; i = skip_ws(s, i + 1)) {
    const size_t key_end = skip_string(s, i);
    if (key_end == std::string_view::npos) break;
    const std::string_view key = s.substr(i, key_end - i);
    i = skip_ws(s, key_end);
    if (i >= s.size() || s[i] != ':') break;
    i = skip_ws(s, i + 1);
    const size_t value_end = skip_value(s, i);
    if (value_end == std::string_view::npos) break;
    if (key_is_id(key)) found = s.substr(i, value_end - i);
    i = skip_ws(s, value_end);
    if (i >= s.size() || s[i] != ',') break;
  }
  return found;
}

// RFC 8259's number grammar.
bool is_json_number(std::string_view t) {
  size_t i = 0;
  const auto digits = [&] {
    const size_t start = i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    return i > start;
  };
  if (i < t.size() && t[i] == '-') ++i;
  if (i < t.size() && t[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < t.size() && t[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == t.size();
}

// What goes after "id": in an answer: a number's input text; another scalar as JSON text;
// nullopt when the id cannot be recovered (or is an array or object: then the parsed
// value serves).
std::optional<std::string> recovered_id(std::string_view line) {
  const std::optional<std::string_view> text = id_text(line);
  if (!text) return std::nullopt;
  if (is_json_number(*text)) return std::string(*text);
  if (text->empty() || text->front() == '{' || text->front() == '[') return std::nullopt;
  try {
    return Json::parse(*text).dump(-1, ' ', false, Json::error_handler_t::replace);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Only checks the syntax (iteratively, at any depth); records how it fails.
struct SyntaxCheck : nlohmann::json_sax<Json> {
  int error_id = 0;  // 0: valid; 406: a number out of range; other: not JSON
  std::string message;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    error_id = ex.id;
    message = ex.what();
    return false;
  }
};

// The reserve of install_memory_reserve(): mapped, never touched. When an allocation fails,
// the new-handler unmaps it and lets the allocation retry (it may be in a destructor, where
// throwing would terminate); memory_checkpoint() then throws bad_alloc from a place where
// unwinding is safe, with the reserve's room to unwind in.
void* g_reserve = nullptr;
bool g_reserve_installed = false;
bool g_memory_short = false;

void map_reserve() {
  if (g_reserve) return;
  void* p = mmap(nullptr, kMemoryReserveBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  g_reserve = p == MAP_FAILED ? nullptr : p;
}

void on_allocation_failure() {
  if (!g_reserve) throw std::bad_alloc();
  munmap(g_reserve, kMemoryReserveBytes);
  g_reserve = nullptr;
  g_memory_short = true;
}

void memory_checkpoint() {
  if (g_memory_short) {
    g_memory_short = false;
    throw std::bad_alloc();
  }
}

// {"id": <id>, "error": msg}, with the id's text spliced in when given.
std::string error_text(const std::optional<std::string>& id, std::string msg) {
  if (msg.size() > 1000) msg = msg.substr(0, 1000) + "...";
  std::string text = Json{{"id", nullptr}, {"error", std::move(msg)}}.dump(
      -1, ' ', false, Json::error_handler_t::replace);
  if (id) text.replace(0, 10, "{\"id\":" + *id);  // after {"id":null
  return text;
}

std::string line_name(size_t lineno) {
  return lineno ? "line " + std::to_string(lineno) : std::string("the line");
}

LineAnswer answer_line_or_throw(std::string_view line, size_t lineno) {
  if (line.size() > kMaxLineBytes) {
    const std::string msg = line_name(lineno) + " is longer than " +
                            cap_name("line length", kMaxLineBytes, "bytes") + "; not read";
    return {error_text(recovered_id(line), msg), msg};
  }
  if (nesting_depth(line) > kMaxDepth) {
    SyntaxCheck check;
    Json::sax_parse(line, &check);
    if (check.error_id != 0 && check.error_id != 406) {
      const std::string msg = line_name(lineno) + " is not JSON: " + check.message;
      return {error_text(std::nullopt, msg), msg};
    }
    return {error_text(recovered_id(line), "the case nests arrays and objects deeper than " +
                                               cap_name("depth", kMaxDepth, "levels")),
            ""};
  }
  Json c;
  try {
    c = Json::parse(line, [](int, Json::parse_event_t, Json&) {
      memory_checkpoint();
      return true;
    });
  } catch (const Json::parse_error& e) {
    const std::string msg = line_name(lineno) + " is not JSON: " + e.what();
    return {error_text(std::nullopt, msg), msg};
  } catch (const Json::out_of_range& e) {
    // Valid JSON, but a number beyond a double's range (nlohmann refuses it).
    return {error_text(recovered_id(line),
                       std::string("a number is out of the range of a double: ") + e.what()),
            ""};
  }
  memory_checkpoint();
  const Json answer = answer_case(c);
  memory_checkpoint();
  std::string text = answer.dump(-1, ' ', false, Json::error_handler_t::replace);
  memory_checkpoint();
  std::optional<std::string> id;
  if (c.is_object() && c.contains("id") && c.at("id").is_number()) {
    // Numbers keep their input text: nlohmann would print 1e2 as 100.0, and integers past
    // 64 bits as doubles.
    id = recovered_id(line);
    if (id) {
      const size_t id_len = c.at("id").dump().size();
      text.replace(0, 6 + id_len, "{\"id\":" + *id);
    }
  }
  if (text.size() > kMaxAnswerBytes) {
    if (!id && answer.at("id").is_primitive()) id = answer.at("id").dump();
    return {
        error_text(id, "the answer is " + std::to_string(text.size()) + " bytes long, more than " +
                           cap_name("answer size", kMaxAnswerBytes, "bytes")),
        ""};
  }
  return {std::move(text), ""};
}

// Reads one line (without its newline) into `line`, keeping at most kMaxLineBytes + 1
// bytes of it; false at the end of the input.
bool read_line(std::istream& in, std::string& line) {
  line.clear();
  std::streambuf* buf = in.rdbuf();
  bool any = false;
  for (;;) {
    const int c = buf->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      return any;
    }
    any = true;
    if (c == '\n') return true;
    if (line.size() <= kMaxLineBytes) line.push_back(static_cast<char>(c));
  }
}

// The answer when answering threw. Memory may be short: first with the id, then without,
// then a fixed text.
LineAnswer error_answer(std::string_view line, const char* why) noexcept {
  try {
    return {error_text(recovered_id(line), why), ""};
  } catch (...) {
  }
  try {
    return {error_text(std::nullopt, why), ""};
  } catch (...) {
  }
  LineAnswer last;
  try {
    last.text = R"({"id":null,"error":"out of memory"})";
  } catch (...) {
  }
  return last;
}

}  // namespace

void install_memory_reserve() {
  map_reserve();
  std::set_new_handler(on_allocation_failure);
  g_reserve_installed = true;
}

LineAnswer answer_line(std::string_view line, size_t lineno) noexcept {
  try {
    return answer_line_or_throw(line, lineno);
  } catch (const std::bad_alloc&) {
    return error_answer(line, "out of memory while answering the case");
  } catch (const std::exception& e) {
    return error_answer(line, e.what());
  } catch (...) {
    return error_answer(line, "unknown error");
  }
}

int run_plan_lines(std::istream& in, std::ostream& out, std::ostream& err) {
  int status = 0;
  std::string line;
  line.reserve(kMaxLineBytes + 1);  // read_line never allocates
  for (size_t lineno = 1; read_line(in, line); ++lineno) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t\f\v") == std::string::npos) continue;
    if (g_reserve_installed) {  // again, after a case that ran out of memory
      map_reserve();
      g_memory_short = false;
    }
    const LineAnswer answer = answer_line(line, lineno);
    if (!answer.not_json.empty()) {
      err << "cgemm-plan: " << answer.not_json << '\n';
      status = 1;
    }
    out << answer.text << '\n';
    out.flush();
  }
  return status;
}

}  // namespace cgemm::plan
