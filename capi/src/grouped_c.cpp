// The C API's grouped plans (cgemm_grouped_plan_* in cgemm/cgemm.h) over GroupedGemmPlan
// (cgemm/runtime/grouped_plan.hpp). Local to a rank, so no rank agreement: each entry point
// converts its arguments and calls the runtime under guarded() (boundary.hpp).

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "boundary.hpp"
#include "cgemm/cgemm.h"
#include "cgemm/core/dtype.hpp"
#include "cgemm/runtime/grouped_plan.hpp"
#include "cgemm/runtime/quantization_names.hpp"
#include "descriptors.hpp"
#include "graphs.hpp"

namespace {

using namespace cgemm::capi;

struct GroupedPlanObject {
  ContextObject* owner = nullptr;
  std::unique_ptr<cgemm::GroupedGemmPlan> plan;
};

// Tag 3: contexts are 1 and GEMM plans 2 (Handles), so no handle passes for another kind.
Handles<GroupedPlanObject>& grouped_plans() {
  static auto* h = new Handles<GroupedPlanObject>(3, "cgemm_grouped_plan");
  return *h;
}

GroupedPlanObject& grouped_plan_of(const cgemm_grouped_plan* plan) {
  if (plan == nullptr) throw ArgumentError("plan is NULL");
  return grouped_plans().get(reinterpret_cast<uintptr_t>(plan), "plan");
}

// One of `names` (the enum's values in order); NULL: the first.
template <typename E, size_t N>
E word_arg(const char* value, const char* what, const std::pair<const char*, E> (&names)[N]) {
  if (value == nullptr) return names[0].second;
  std::string choices;
  for (const auto& [name, e] : names) {
    if (std::string(value) == name) return e;
    choices += std::string(choices.empty() ? "" : ", ") + "\"" + name + "\"";
  }
  throw ArgumentError(std::string(what) + " \"" + value + "\": not one of " + choices);
}

std::vector<int64_t> contracting_arg(int ndim, const int* dims, const char* what) {
  const std::vector<int> d = dims_arg(ndim, dims, what);
  return {d.begin(), d.end()};
}

cgemm::GroupedGemmDesc grouped_desc(const cgemm_grouped_plan_desc& d) {
  static constexpr std::pair<const char*, cgemm::GroupedForm> kForms[] = {
      {"ragged_rows", cgemm::GroupedForm::kRaggedRows},
      {"ragged_contracting", cgemm::GroupedForm::kRaggedContracting}};
  static constexpr std::pair<const char*, cgemm::GroupedPath> kPaths[] = {
      {"auto", cgemm::GroupedPath::kAuto},
      {"loop", cgemm::GroupedPath::kLoop},
      {"cublas_grouped", cgemm::GroupedPath::kCublasGrouped},
      {"cublaslt_tiles", cgemm::GroupedPath::kCublasLtTiles},
      {"cublaslt_device_tiles", cgemm::GroupedPath::kCublasLtDeviceTiles}};
  cgemm::GroupedGemmDesc g;
  g.name = d.name ? d.name : "grouped_gemm";
  g.form = word_arg(d.form, "form", kForms);
  if (d.num_groups < 1) {
    throw ArgumentError("num_groups " + std::to_string(d.num_groups) + ": must be at least 1");
  }
  g.num_groups = d.num_groups;
  g.lhs_shape = shape_arg(d.lhs_ndim, d.lhs_shape, "lhs_ndim");
  g.rhs_shape = shape_arg(d.rhs_ndim, d.rhs_shape, "rhs_ndim");
  if (d.bias_ndim != 0 && d.bias_ndim != 2) {
    throw ArgumentError("bias_ndim " + std::to_string(d.bias_ndim) +
                        ": 0 (no bias) or 2 (bias [G, N])");
  }
  if (d.bias_ndim == 2) g.bias_shape = shape_arg(d.bias_ndim, d.bias_shape, "bias_ndim");
  g.dtype = parse_arg(d.dtype, "bfloat16", "dtype", cgemm::parse_dtype);
  if (d.rhs_dtype) g.rhs_dtype = parse_arg(d.rhs_dtype, "", "rhs_dtype", cgemm::parse_dtype);
  if (d.out_dtype) {
    g.preferred_element_type = parse_arg(d.out_dtype, "", "out_dtype", cgemm::parse_dtype);
  }
  g.lhs_contracting_dims =
      contracting_arg(d.lhs_contracting_ndim, d.lhs_contracting, "lhs_contracting_ndim");
  g.rhs_contracting_dims =
      contracting_arg(d.rhs_contracting_ndim, d.rhs_contracting, "rhs_contracting_ndim");
  g.path = word_arg(d.path, "path", kPaths);
  g.scaling = parse_arg(d.scaling, "none", "scaling", cgemm::parse_scaling_option);
  return g;
}

cgemm_status create(cgemm_context* ctx, const cgemm_grouped_plan_desc* desc,
                    cgemm_grouped_plan** out) {
  ContextObject& c = context_of(ctx);
  require(desc, "desc");
  require(out, "out");
  auto p = std::make_unique<GroupedPlanObject>();
  p->plan = std::make_unique<cgemm::GroupedGemmPlan>(*c.ctx, grouped_desc(*desc));
  p->owner = &c;
  ++c.plans;
  *out = reinterpret_cast<cgemm_grouped_plan*>(grouped_plans().add(std::move(p)));
  return CGEMM_SUCCESS;
}

// cgemm_grouped_plan_execute and _capture: the same checks, then the call's operands.
cgemm::Operands operands_of(const GroupedPlanObject& p, const int32_t* group_sizes, const void* lhs,
                            const void* rhs, const void* bias, void* out,
                            const float* lhs_scale_inv, const float* rhs_scale_inv) {
  require(group_sizes, "group_sizes");
  require(lhs, "lhs");
  require(rhs, "rhs");
  require(out, "out");
  const cgemm::GroupedGemmPlan& g = *p.plan;
  if (g.shape().bias && bias == nullptr)
    throw ArgumentError("bias is NULL but the plan has a bias");
  if (!g.shape().bias && bias != nullptr) {
    throw ArgumentError("bias is given but the plan has none (bias_ndim 0)");
  }
  for (const auto& [s, name] :
       {std::pair{lhs_scale_inv, "lhs_scale_inv"}, std::pair{rhs_scale_inv, "rhs_scale_inv"}}) {
    if (g.shape().scaled && s == nullptr) {
      throw ArgumentError(std::string(name) + " is NULL but the plan has FP8 inputs (G float32)");
    }
    if (!g.shape().scaled && s != nullptr) {
      throw ArgumentError(std::string(name) + " is given but the plan's inputs are " +
                          std::string(cgemm::dtype_name(g.desc().dtype)) + ", not FP8");
    }
  }
  cgemm::Operands x(lhs, rhs, bias, out);
  x.set_input(cgemm::Operand::kGroupSizes, group_sizes);
  x.set_input(cgemm::Operand::kLhsScaleInv, lhs_scale_inv);
  x.set_input(cgemm::Operand::kRhsScaleInv, rhs_scale_inv);
  return x;
}

cgemm_status execute(cgemm_grouped_plan* plan, const int32_t* group_sizes, const void* lhs,
                     const void* rhs, const void* bias, void* out, const float* lhs_scale_inv,
                     const float* rhs_scale_inv, void* stream) {
  GroupedPlanObject& p = grouped_plan_of(plan);
  p.plan->execute(operands_of(p, group_sizes, lhs, rhs, bias, out, lhs_scale_inv, rhs_scale_inv),
                  stream);
  return CGEMM_SUCCESS;
}

cgemm_status tensor_info(const cgemm_grouped_plan* plan, cgemm_operand operand,
                         cgemm_tensor_info* out) {
  const GroupedPlanObject& p = grouped_plan_of(plan);
  require(out, "out");
  const cgemm::GroupedGemmPlan& g = *p.plan;
  const cgemm::GroupedGemmDesc& d = g.desc();
  cgemm_tensor_info info{};
  const cgemm::Shape* shape = nullptr;
  cgemm::DType dtype = d.dtype;
  switch (raw_value(operand)) {
    case CGEMM_LHS:
      shape = &d.lhs_shape;
      break;
    case CGEMM_RHS:
      shape = &d.rhs_shape;
      dtype = d.rhs_dtype.value_or(d.dtype);
      break;
    case CGEMM_BIAS:
      dtype = g.out_dtype();
      if (d.bias_shape) shape = &*d.bias_shape;
      break;
    case CGEMM_OUT:
      dtype = g.out_dtype();
      shape = &g.out_shape();
      break;
    default:
      throw ArgumentError("operand " + std::to_string(raw_value(operand)) +
                          ": not CGEMM_LHS, CGEMM_RHS, CGEMM_BIAS or CGEMM_OUT");
  }
  // Static storage for the name: the dtype tables' string_views point at literals.
  info.dtype = cgemm::dtype_name(dtype).data();
  if (shape != nullptr) {
    if (shape->size() > CGEMM_MAX_NDIM) {
      throw cgemm::Error("the operand has " + std::to_string(shape->size()) +
                         " dims, more than CGEMM_MAX_NDIM");
    }
    info.ndim = static_cast<int>(shape->size());
    for (size_t i = 0; i < shape->size(); ++i) {
      info.global_shape[i] = info.local_shape[i] = (*shape)[i];
    }
    info.bytes = cgemm::num_elements(*shape) * static_cast<int64_t>(cgemm::dtype_size(dtype));
  }
  *out = info;
  return CGEMM_SUCCESS;
}

}  // namespace

extern "C" {

void cgemm_grouped_plan_desc_init(cgemm_grouped_plan_desc* desc) {
  if (desc == nullptr) return;
  *desc = cgemm_grouped_plan_desc{};
  desc->lhs_contracting_ndim = 1;
  desc->lhs_contracting[0] = 1;
  desc->rhs_contracting_ndim = 1;
  desc->rhs_contracting[0] = 2;
}

cgemm_status cgemm_grouped_plan_create(cgemm_context* ctx, const cgemm_grouped_plan_desc* desc,
                                       cgemm_grouped_plan** out) {
  return guarded(__func__, [&] { return create(ctx, desc, out); });
}

void cgemm_grouped_plan_destroy(cgemm_grouped_plan* plan) {
  if (plan == nullptr) return;
  (void)guarded(__func__, [&] {
    std::unique_ptr<GroupedPlanObject> p =
        grouped_plans().take(reinterpret_cast<uintptr_t>(plan), "plan");
    release_graphs_of(plan);  // they name the plan's workspaces
    ContextObject* owner = p->owner;
    p.reset();
    --owner->plans;
    return CGEMM_SUCCESS;
  });
}

cgemm_status cgemm_grouped_plan_tensor_info(const cgemm_grouped_plan* plan, cgemm_operand operand,
                                            cgemm_tensor_info* out) {
  return guarded(__func__, [&] { return tensor_info(plan, operand, out); });
}

cgemm_status cgemm_grouped_plan_get_info(const cgemm_grouped_plan* plan,
                                         cgemm_grouped_plan_info* out) {
  return guarded(__func__, [&] {
    const GroupedPlanObject& p = grouped_plan_of(plan);
    require(out, "out");
    cgemm_grouped_plan_info info{};
    info.num_groups = p.plan->num_groups();
    info.ragged_extent = p.plan->ragged_extent();
    info.path = cgemm::grouped_path_name(p.plan->path());
    info.loop_fallbacks = p.plan->loop_fallbacks();
    *out = info;
    return CGEMM_SUCCESS;
  });
}

cgemm_status cgemm_grouped_plan_check_device_sizes(cgemm_grouped_plan* plan) {
  return guarded(__func__, [&] {
    grouped_plan_of(plan).plan->check_device_sizes();
    return CGEMM_SUCCESS;
  });
}

cgemm_status cgemm_grouped_plan_execute(cgemm_grouped_plan* plan, const int32_t* group_sizes,
                                        const void* lhs, const void* rhs, const void* bias,
                                        void* out, const float* lhs_scale_inv,
                                        const float* rhs_scale_inv, void* stream) {
  return guarded(__func__, [&] {
    return execute(plan, group_sizes, lhs, rhs, bias, out, lhs_scale_inv, rhs_scale_inv, stream);
  });
}

cgemm_status cgemm_grouped_plan_capture(cgemm_grouped_plan* plan, const int32_t* group_sizes,
                                        const void* lhs, const void* rhs, const void* bias,
                                        void* out, const float* lhs_scale_inv,
                                        const float* rhs_scale_inv, void* stream,
                                        cgemm_graph** graph) {
  return guarded(__func__, [&] {
    require(graph, "graph");
    *graph = nullptr;
    GroupedPlanObject& p = grouped_plan_of(plan);
    *graph = add_graph(plan, p.plan->capture(operands_of(p, group_sizes, lhs, rhs, bias, out,
                                                         lhs_scale_inv, rhs_scale_inv),
                                             stream));
    return CGEMM_SUCCESS;
  });
}

}  // extern "C"
