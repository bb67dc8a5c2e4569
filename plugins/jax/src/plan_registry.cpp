// The plan registry of the JAX plugin: descriptions (JSON) -> C API plans, made once each.
#include "plan_registry.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

namespace cgemm_jax {
namespace {

using nlohmann::json;

struct Registry {
  std::mutex mutex;
  cgemm_context* ctx = nullptr;
  std::string backend;
  // Keyed by the canonical description (the parsed JSON dumped with sorted keys), so two
  // spellings of one description are one plan. node-based maps: references stay valid.
  std::map<std::string, DensePlan> dense;
  std::map<std::string, GroupedPlan> grouped;
  std::vector<std::string> dense_order;  // creation order: destruction is collective
};

Registry& registry() {
  static Registry r;
  return r;
}

[[noreturn]] void invalid(const std::string& what) {
  throw Failure{CGEMM_ERROR_INVALID_ARGUMENT, "cgemm_jax: plan description: " + what};
}

// The C API's status and message as a Failure.
void check(cgemm_status status, const char* call) {
  if (status != CGEMM_SUCCESS) {
    throw Failure{status, std::string(call) + ": " + cgemm_last_error()};
  }
}

json parse(const std::string& text, const std::set<std::string>& fields) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    invalid(std::string("not JSON (") + e.what() + ")");
  }
  if (!j.is_object()) invalid("not a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (fields.count(key) == 0) invalid("unknown field '" + key + "'");
  }
  return j;
}

// A string field kept alive in `keep` while the descriptor points at it; absent or null: NULL.
const char* text(const json& j, const char* field,
                 std::vector<std::unique_ptr<std::string>>& keep) {
  if (!j.contains(field) || j[field].is_null()) return nullptr;
  if (!j[field].is_string()) invalid(std::string(field) + ": a string is needed");
  keep.push_back(std::make_unique<std::string>(j[field].get<std::string>()));
  return keep.back()->c_str();
}

template <typename T>
int dims(const json& j, const char* field, T* out) {
  if (!j.contains(field) || j[field].is_null()) return 0;
  const json& v = j[field];
  if (!v.is_array() || v.size() > CGEMM_MAX_NDIM) {
    invalid(std::string(field) + ": a list of at most " + std::to_string(CGEMM_MAX_NDIM) +
            " ints is needed");
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer()) invalid(std::string(field) + ": a list of ints is needed");
    out[i] = v[i].get<T>();
  }
  return static_cast<int>(v.size());
}

int integer(const json& j, const char* field, int fallback) {
  if (!j.contains(field) || j[field].is_null()) return fallback;
  if (j[field].is_boolean()) return j[field].get<bool>() ? 1 : 0;
  if (!j[field].is_number_integer()) invalid(std::string(field) + ": an int is needed");
  return j[field].get<int>();
}

// A contracting-dims field, set only when given (absent keeps the _init default).
template <typename T>
void optional_dims(const json& j, const char* field, int& ndim, T* out) {
  if (j.contains(field)) ndim = dims(j, field, out);
}

// One operand as a plan reports it (cgemm_plan_tensor_info or its grouped twin).
template <typename Plan>
OperandInfo operand_info(const Plan* plan, cgemm_operand operand,
                         cgemm_status (*query)(const Plan*, cgemm_operand, cgemm_tensor_info*)) {
  cgemm_tensor_info t;
  check(query(plan, operand, &t), "cgemm tensor info");
  OperandInfo o;
  o.present = t.ndim > 0;
  o.shape.assign(t.local_shape, t.local_shape + t.ndim);
  o.dtype = t.dtype;
  return o;
}

DensePlan make_dense(cgemm_context* ctx, const json& j) {
  std::vector<std::unique_ptr<std::string>> keep;
  cgemm_plan_desc d;
  cgemm_plan_desc_init(&d);
  d.name = text(j, "name", keep);
  d.lhs_ndim = dims(j, "lhs_shape", d.lhs_shape);
  d.rhs_ndim = dims(j, "rhs_shape", d.rhs_shape);
  d.bias_ndim = dims(j, "bias_shape", d.bias_shape);
  d.dtype = text(j, "dtype", keep);
  d.out_dtype = text(j, "out_dtype", keep);
  d.lhs_spec = text(j, "lhs_spec", keep);
  d.rhs_spec = text(j, "rhs_spec", keep);
  d.bias_spec = text(j, "bias_spec", keep);
  optional_dims(j, "lhs_contracting", d.lhs_contracting_ndim, d.lhs_contracting);
  optional_dims(j, "rhs_contracting", d.rhs_contracting_ndim, d.rhs_contracting);
  d.collective = text(j, "collective", keep);
  d.transpose_batch_sequence = integer(j, "transpose_batch_sequence", 0);
  cgemm_plan_options o;
  check(cgemm_plan_options_init(&o, sizeof o), "cgemm_plan_options_init");
  o.scaling = text(j, "scaling", keep);
  o.lhs_format = text(j, "lhs_format", keep);
  o.rhs_format = text(j, "rhs_format", keep);
  o.margin = integer(j, "margin", 0);
  o.amax_history_len = integer(j, "amax_history_len", 0);
  o.amax_compute_algo = text(j, "amax_compute_algo", keep);
  DensePlan p;
  check(cgemm_plan_create_ex(ctx, &d, &o, &p.plan), "cgemm_plan_create_ex");
  try {
    const auto info = [&](cgemm_operand op) {
      return operand_info(p.plan, op, cgemm_plan_tensor_info);
    };
    p.lhs = info(CGEMM_LHS), p.rhs = info(CGEMM_RHS), p.bias = info(CGEMM_BIAS);
    p.out = info(CGEMM_OUT), p.gathered_lhs = info(CGEMM_GATHERED_LHS);
  } catch (...) {
    cgemm_plan_destroy(p.plan);
    throw;
  }
  return p;
}

GroupedPlan make_grouped(cgemm_context* ctx, const json& j) {
  std::vector<std::unique_ptr<std::string>> keep;
  cgemm_grouped_plan_desc d;
  cgemm_grouped_plan_desc_init(&d);
  d.name = text(j, "name", keep);
  d.form = text(j, "form", keep);
  if (!j.contains("num_groups") || !j["num_groups"].is_number_integer()) {
    invalid("num_groups: an int is needed");
  }
  d.num_groups = j["num_groups"].get<int64_t>();
  d.lhs_ndim = dims(j, "lhs_shape", d.lhs_shape);
  d.rhs_ndim = dims(j, "rhs_shape", d.rhs_shape);
  d.bias_ndim = dims(j, "bias_shape", d.bias_shape);
  d.dtype = text(j, "dtype", keep);
  d.rhs_dtype = text(j, "rhs_dtype", keep);
  d.out_dtype = text(j, "out_dtype", keep);
  optional_dims(j, "lhs_contracting", d.lhs_contracting_ndim, d.lhs_contracting);
  optional_dims(j, "rhs_contracting", d.rhs_contracting_ndim, d.rhs_contracting);
  d.path = text(j, "path", keep);
  d.scaling = text(j, "scaling", keep);
  GroupedPlan p;
  p.num_groups = d.num_groups;
  check(cgemm_grouped_plan_create(ctx, &d, &p.plan), "cgemm_grouped_plan_create");
  try {
    const auto info = [&](cgemm_operand op) {
      return operand_info(p.plan, op, cgemm_grouped_plan_tensor_info);
    };
    p.lhs = info(CGEMM_LHS), p.rhs = info(CGEMM_RHS), p.bias = info(CGEMM_BIAS);
    p.out = info(CGEMM_OUT);
  } catch (...) {
    cgemm_grouped_plan_destroy(p.plan);
    throw;
  }
  return p;
}

const std::set<std::string> kDenseFields = {"name",
                                            "lhs_shape",
                                            "rhs_shape",
                                            "bias_shape",
                                            "dtype",
                                            "out_dtype",
                                            "lhs_spec",
                                            "rhs_spec",
                                            "bias_spec",
                                            "lhs_contracting",
                                            "rhs_contracting",
                                            "collective",
                                            "transpose_batch_sequence",
                                            "scaling",
                                            "lhs_format",
                                            "rhs_format",
                                            "margin",
                                            "amax_history_len",
                                            "amax_compute_algo"};
const std::set<std::string> kGroupedFields = {
    "name",   "form",      "num_groups", "lhs_shape",       "rhs_shape",       "bias_shape",
    "dtype",  "rhs_dtype", "out_dtype",  "lhs_contracting", "rhs_contracting", "path",
    "scaling"};

cgemm_context* require_context(Registry& r) {
  if (r.ctx == nullptr) {
    throw Failure{CGEMM_ERROR_STATE,
                  "cgemm_jax: no cgemm context: call cgemm_jax.collective_gemm_bootstrap first"};
  }
  return r.ctx;
}

}  // namespace

void set_context(cgemm_context* ctx) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const bool live = std::any_of(r.dense.begin(), r.dense.end(),
                                [](const auto& e) { return e.second.plan != nullptr; }) ||
                    std::any_of(r.grouped.begin(), r.grouped.end(),
                                [](const auto& e) { return e.second.plan != nullptr; });
  if (ctx != r.ctx && live) {
    throw Failure{CGEMM_ERROR_STATE,
                  "cgemm_jax: plans of the earlier context remain: call cgemm_jax.shutdown() "
                  "before bootstrapping again"};
  }
  cgemm_context_info info;
  check(cgemm_context_get_info(ctx, &info), "cgemm_context_get_info");
  r.ctx = ctx;
  r.backend = info.backend;
}

cgemm_context* context() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return require_context(r);
}

const std::string& context_backend() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  require_context(r);
  return r.backend;
}

const DensePlan& dense_plan(const std::string& description) {
  Registry& r = registry();
  const json j = parse(description, kDenseFields);
  const std::string key = j.dump();
  std::lock_guard<std::mutex> lock(r.mutex);
  cgemm_context* ctx = require_context(r);
  auto it = r.dense.find(key);
  if (it != r.dense.end() && it->second.plan != nullptr) return it->second;
  DensePlan p = make_dense(ctx, j);
  r.dense_order.push_back(key);
  if (it != r.dense.end()) {  // released by release_all: the same record, made again
    it->second = std::move(p);
    return it->second;
  }
  return r.dense.emplace(key, std::move(p)).first->second;
}

const GroupedPlan& grouped_plan(const std::string& description) {
  Registry& r = registry();
  const json j = parse(description, kGroupedFields);
  const std::string key = j.dump();
  std::lock_guard<std::mutex> lock(r.mutex);
  cgemm_context* ctx = require_context(r);
  auto it = r.grouped.find(key);
  if (it != r.grouped.end() && it->second.plan != nullptr) return it->second;
  GroupedPlan p = make_grouped(ctx, j);
  if (it != r.grouped.end()) {
    it->second = std::move(p);
    return it->second;
  }
  return r.grouped.emplace(key, std::move(p)).first->second;
}

void release_all() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  // The records stay (an XLA executable's state points at them, and JAX may keep executables
  // compiled before a shutdown): only their plans go, and execute refuses a record without one.
  for (const std::string& key : r.dense_order) {
    DensePlan& p = r.dense.at(key);
    cgemm_plan_destroy(p.plan);
    p.plan = nullptr;
  }
  for (auto& [key, p] : r.grouped) {
    cgemm_grouped_plan_destroy(p.plan);
    p.plan = nullptr;
  }
  r.dense_order.clear();
  r.ctx = nullptr;
  r.backend.clear();
}

}  // namespace cgemm_jax
