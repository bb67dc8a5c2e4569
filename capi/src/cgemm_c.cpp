// The C API (cgemm/cgemm.h) over the C++ runtime: each function converts its C arguments,
// calls the runtime and turns every exception into a status and the thread's last error, so
// that nothing thrown crosses into a C caller (for which unwinding is undefined).
#include "cgemm/cgemm.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "boundary.hpp"
#include "capi_errors.hpp"
#include "cgemm/core/collective_op.hpp"
#include "cgemm/core/dtype.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/launch_env.hpp"
#include "cgemm/core/process_timer.hpp"
#include "cgemm/core/shape.hpp"
#include "cgemm/core/watchdog.hpp"
#include "cgemm/gemm/quantize_task.hpp"
#include "cgemm/gemm/scaling_recipe.hpp"
#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/memory_check.hpp"
#include "cgemm/runtime/plan.hpp"
#include "cgemm/runtime/plan_description.hpp"
#include "cgemm/runtime/quantization_names.hpp"
#include "cgemm/sharding/partition_spec.hpp"
#include "descriptors.hpp"
#include "graphs.hpp"
#include "handles.hpp"
#include "plan_memory.hpp"
#include "printable_text.hpp"
#include "rank_agreement.hpp"

#ifndef CGEMM_VERSION_STRING
#error "CGEMM_VERSION_STRING must be defined by the build (the project's version)"
#endif

namespace cgemm::capi {

// Never destroyed: a caller may destroy its handles from an exit handler that runs after the
// library's static destructors would have.
Handles<ContextObject>& contexts() {
  static auto* h = new Handles<ContextObject>(1, "cgemm_context");
  return *h;
}

ContextObject& context_of(const cgemm_context* ctx) {
  if (ctx == nullptr) throw ArgumentError("ctx is NULL");
  return contexts().get(reinterpret_cast<uintptr_t>(ctx), "ctx");
}

namespace {
thread_local std::string last_error;
}  // namespace

// Records the message as this thread's last error. noexcept: when even the message cannot be
// allocated, a short one that fits std::string's inline buffer is kept instead.
cgemm_status fail(cgemm_status status, const char* function, const char* what) noexcept {
  try {
    // As cgemm-run prints its messages: a caller's string echoed in one (a name, a spec) may
    // hold control bytes that would drive a terminal or cut a log line.
    last_error = cgemm::launcher::printable(std::string(function) + ": " + what);
  } catch (...) {
    last_error.clear();
    last_error = "out of memory";
  }
  return status;
}

}  // namespace cgemm::capi

namespace {

using namespace cgemm::capi;

struct PlanObject {
  ContextObject* owner = nullptr;
  std::unique_ptr<cgemm::GemmPlan> plan;
};

Handles<PlanObject>& plans() {
  static auto* h = new Handles<PlanObject>(2, "cgemm_plan");
  return *h;
}

PlanObject& plan_of(const cgemm_plan* plan) {
  if (plan == nullptr) throw ArgumentError("plan is NULL");
  return plans().get(reinterpret_cast<uintptr_t>(plan), "plan");
}

// Set when cgemm_context_create_world initialized MPI, so that cgemm_mpi_finalize finalizes
// only what it started.
std::atomic<bool> initialized_mpi{false};

Fields context_fields(const cgemm_context_desc& d, const cgemm_context_options& o) {
  return {
      {"dp", std::to_string(d.dp)},
      {"tp", std::to_string(d.tp)},
      {"dp_axis", text_field(d.dp_axis)},
      {"tpsp_axis", text_field(d.tpsp_axis)},
      {"backend", text_field(d.backend)},
      {"overlap", text_field(d.overlap)},
      {"num_max_streams", std::to_string(d.num_max_streams)},
      {"chunks_per_rank", std::to_string(d.chunks_per_rank)},
      {"aggregate_all_gather", std::to_string(d.aggregate_all_gather)},
      {"options->gpu_sharing", std::to_string(o.gpu_sharing)},
      {"options->timeout_s", std::to_string(o.timeout_s)},
      {"options->fsdp", std::to_string(o.fsdp)},
      {"options->fsdp_axis", text_field(o.fsdp_axis)},
      {"options->compute_stream_priority", std::to_string(o.compute_stream_priority)},
      {"options->communication_stream_priority", std::to_string(o.communication_stream_priority)},
      {"options->no_ce", std::to_string(o.no_ce)},
      {"options->num_sm_for_communication", std::to_string(o.num_sm_for_communication)}};
}

cgemm_status create_context(MPI_Comm comm, const cgemm_context_options& options,
                            const cgemm_context_desc* desc, cgemm_context** out,
                            const std::string& comm_name = "comm") {
  require(desc, "desc");
  require(out, "out");
  if (comm == MPI_COMM_NULL) throw ArgumentError(comm_name + " is MPI_COMM_NULL");
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    throw ArgumentError(finalized ? "MPI is finalized" : "MPI is not initialized (MPI_Init)");
  }
  // A process of a torchrun-style launch is an MPI world of its own: refused rather than
  // computing alone (cgemm/core/launch_env.hpp).
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (const std::optional<std::string> problem = cgemm::foreign_launcher_problem(world)) {
    throw MpiInitError(*problem);
  }
  const ReturningErrors returning_on_world(MPI_COMM_WORLD);
  require_communicator(comm, comm_name);
  // The communicators the context makes (MPI_Comm_dup, _split) inherit this handler.
  const ReturningErrors returning_on_comm(comm);
  int world_rank = 0;
  check_mpi_call(MPI_Comm_rank(comm, &world_rank), "MPI_Comm_rank");
  // The deadline covers the agreement below: the Context would start the watchdog only after.
  const double timeout_s = options.timeout_s > 0.0      ? options.timeout_s
                           : cgemm::watchdog::running() ? cgemm::watchdog::timeout_s()
                                                        : kDefaultTimeoutS;
  cgemm::watchdog::start(timeout_s, world_rank, "",
                         [] { cgemm::abort_world(cgemm::watchdog::kExitTimeout); });
  agree(comm, context_fields(*desc, options));
  cgemm::MeshConfig mesh;
  mesh.dp = desc->dp;
  mesh.tp = desc->tp;
  if (desc->dp_axis) mesh.dp_axis = desc->dp_axis;
  if (desc->tpsp_axis) mesh.tpsp_axis = desc->tpsp_axis;
  mesh.fsdp = options.fsdp > 1 ? options.fsdp : 1;
  if (options.fsdp_axis) mesh.fsdp_axis = options.fsdp_axis;
  cgemm::OverlapOptions overlap;
  overlap.policy = parse_arg(desc->overlap, "auto", "overlap", cgemm::parse_overlap_policy);
  overlap.num_max_streams = desc->num_max_streams;
  overlap.chunks_per_rank = desc->chunks_per_rank;
  overlap.aggregate_all_gather = desc->aggregate_all_gather != 0;
  overlap.compute_stream_priority = options.compute_stream_priority;
  overlap.communication_stream_priority = options.communication_stream_priority;
  overlap.use_ce = options.no_ce == 0;
  if (options.num_sm_for_communication > 0) {
    overlap.num_sm_for_communication = options.num_sm_for_communication;
  }
  if (overlap.num_max_streams < 1 || overlap.chunks_per_rank < 1) {
    throw ArgumentError("num_max_streams " + std::to_string(overlap.num_max_streams) +
                        " and chunks_per_rank " + std::to_string(overlap.chunks_per_rank) +
                        ": each must be at least 1");
  }
  const auto kind = parse_arg(desc->backend, "auto", "backend", cgemm::parse_backend);
  // As Context's BackendKind constructor, plus the options: the borrowed communicator
  // (checked there, collectively: every rank lends one or none, the CUDA backend only) and
  // gpu_sharing (which the backend rule ignores on the CPU backend).
  cgemm::BackendOptions backend;
  backend.kind = kind;
  backend.timeout_s = timeout_s;
  backend.nccl_comm = options.nccl_comm;
  backend.gpu_sharing = options.gpu_sharing != 0;
  auto c = std::make_unique<ContextObject>();
  c->ctx = std::make_unique<cgemm::Context>(comm, mesh, backend, overlap);
  *out = reinterpret_cast<cgemm_context*>(contexts().add(std::move(c)));
  return CGEMM_SUCCESS;
}

Fields plan_fields(const cgemm_plan_desc& d, const cgemm_plan_options* given) {
  // The name is left out: it only labels messages and traces, and may name the rank.
  Fields f = {{"lhs_shape", dims_field(d.lhs_ndim, d.lhs_shape)},
              {"rhs_shape", dims_field(d.rhs_ndim, d.rhs_shape)},
              {"bias_shape", dims_field(d.bias_ndim, d.bias_shape)},
              {"dtype", text_field(d.dtype)},
              {"out_dtype", text_field(d.out_dtype)},
              {"lhs_spec", text_field(d.lhs_spec)},
              {"rhs_spec", text_field(d.rhs_spec)},
              {"bias_spec", text_field(d.bias_spec)},
              {"lhs_contracting", dims_field(d.lhs_contracting_ndim, d.lhs_contracting)},
              {"rhs_contracting", dims_field(d.rhs_contracting_ndim, d.rhs_contracting)},
              {"collective", text_field(d.collective)},
              {"transpose_batch_sequence", std::to_string(d.transpose_batch_sequence)}};
  if (given == nullptr) return f;
  cgemm_plan_options o{};
  try {
    o = read_struct(given, kPlanOptionsV1);
  } catch (const cgemm::Error& e) {
    // Refused after the agreement, alike on every rank that passes the same.
    f.emplace_back("options", std::string("refused (") + e.what() + ")");
    return f;
  }
  f.insert(f.end(), {{"options->scaling", text_field(o.scaling)},
                     {"options->lhs_format", text_field(o.lhs_format)},
                     {"options->rhs_format", text_field(o.rhs_format)},
                     {"options->margin", std::to_string(o.margin)},
                     {"options->amax_history_len", std::to_string(o.amax_history_len)},
                     {"options->amax_compute_algo", text_field(o.amax_compute_algo)},
                     {"options->lhs_quantized", std::to_string(o.lhs_quantized)},
                     {"options->rhs_quantized", std::to_string(o.rhs_quantized)}});
  return f;
}

// cgemm_plan_create[_ex]: the arguments, then the planner (collective).
cgemm_status create_plan(cgemm_context* ctx, const cgemm_plan_desc* desc,
                         const cgemm_plan_options* options, cgemm_plan** out) {
  ContextObject& c = context_of(ctx);
  require(desc, "desc");
  require(out, "out");
  agree(c.ctx->comms().world(), plan_fields(*desc, options));
  cgemm::GemmDesc g = gemm_desc(*desc);
  g.quantization = quantization_arg(options);
  check_plan_memory(*c.ctx, g);
  auto p = std::make_unique<PlanObject>();
  p->plan = std::make_unique<cgemm::GemmPlan>(*c.ctx, g);
  p->owner = &c;
  ++c.plans;
  *out = reinterpret_cast<cgemm_plan*>(plans().add(std::move(p)));
  return CGEMM_SUCCESS;
}

// cgemm_plan_execute* and cgemm_plan_capture: the same checks, then the call's operands.
cgemm::Operands operands_of(const PlanObject& p, const void* lhs, const void* rhs, const void* bias,
                            void* out, void* gathered_lhs) {
  require(lhs, "lhs");
  require(rhs, "rhs");
  require(out, "out");
  const bool has_bias = p.plan->desc().bias_shape.has_value();
  if (has_bias && bias == nullptr) throw ArgumentError("bias is NULL but the plan has a bias");
  if (!has_bias && bias != nullptr) {
    throw ArgumentError("bias is given but the plan has none (bias_ndim 0)");
  }
  cgemm::Operands operands(lhs, rhs, bias, out);
  if (gathered_lhs != nullptr) operands.set_output(cgemm::Operand::kGatheredLhs, gathered_lhs);
  return operands;
}

// The scale_invs of a plan's pre-quantized operands: given exactly for those.
cgemm::Operands scaled(const PlanObject& p, cgemm::Operands x, const float* lhs_scale_inv,
                       const float* rhs_scale_inv) {
  const cgemm::QuantizationDesc& q = p.plan->desc().quantization;
  for (const auto& [given, s, slot, name] :
       {std::tuple{q.lhs_quantized, lhs_scale_inv, cgemm::Operand::kLhsScaleInv, "lhs"},
        std::tuple{q.rhs_quantized, rhs_scale_inv, cgemm::Operand::kRhsScaleInv, "rhs"}}) {
    if (given && s == nullptr) {
      throw ArgumentError(std::string(name) + "_scale_inv is NULL but the plan's " + name +
                          " is pre-quantized (options->" + name + "_quantized)");
    }
    if (!given && s != nullptr) {
      throw ArgumentError(std::string(name) + "_scale_inv is given but the plan quantizes its " +
                          name + " itself");
    }
    if (s != nullptr) x.set_input(slot, s);
  }
  return x;
}

cgemm_status execute(cgemm_plan* plan, const void* lhs, const void* rhs, const void* bias,
                     void* out, void* gathered_lhs, void* stream,
                     const float* lhs_scale_inv = nullptr, const float* rhs_scale_inv = nullptr) {
  PlanObject& p = plan_of(plan);
  p.plan->execute(
      scaled(p, operands_of(p, lhs, rhs, bias, out, gathered_lhs), lhs_scale_inv, rhs_scale_inv),
      stream);
  return CGEMM_SUCCESS;
}

// MPI_Comm_f2c before MPI_Init is undefined: create_context's check comes too late. What it
// gives is checked there (require_communicator): an index that names no communicator gives
// no MPI_COMM_NULL.
MPI_Comm comm_from_fortran(MPI_Fint comm) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) throw ArgumentError("MPI is not initialized (MPI_Init)");
  return MPI_Comm_f2c(comm);
}

std::string fortran_name(MPI_Fint comm) {
  return "comm (Fortran handle " + std::to_string(comm) + ")";
}

// MPI_COMM_WORLD, initializing MPI when nobody has (cgemm_context_create_world[_ex]).
MPI_Comm world_comm() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) throw ArgumentError("MPI is finalized");
  if (!initialized) {
    // As the launcher: the watchdog's thread talks MPI beside the caller's.
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      throw MpiInitError("MPI_Init_thread failed");
    }
    initialized_mpi = true;
  }
  return MPI_COMM_WORLD;
}

}  // namespace

extern "C" {

const char* cgemm_version_string(void) { return CGEMM_VERSION_STRING; }

void cgemm_version(int* major, int* minor, int* patch) {
  if (major) *major = CGEMM_VERSION_MAJOR;
  if (minor) *minor = CGEMM_VERSION_MINOR;
  if (patch) *patch = CGEMM_VERSION_PATCH;
}

const char* cgemm_status_name(cgemm_status status) {
  switch (raw_value(status)) {
    case CGEMM_SUCCESS:
      return "CGEMM_SUCCESS";
    case CGEMM_ERROR_INVALID_ARGUMENT:
      return "CGEMM_ERROR_INVALID_ARGUMENT";
    case CGEMM_ERROR_PLAN:
      return "CGEMM_ERROR_PLAN";
    case CGEMM_ERROR_BACKEND:
      return "CGEMM_ERROR_BACKEND";
    case CGEMM_ERROR_RUNTIME:
      return "CGEMM_ERROR_RUNTIME";
    case CGEMM_ERROR_OUT_OF_MEMORY:
      return "CGEMM_ERROR_OUT_OF_MEMORY";
    case CGEMM_ERROR_MPI:
      return "CGEMM_ERROR_MPI";
    case CGEMM_ERROR_INTERNAL:
      return "CGEMM_ERROR_INTERNAL";
    case CGEMM_ERROR_STATE:
      return "CGEMM_ERROR_STATE";
  }
  return "unknown status";
}

const char* cgemm_last_error(void) { return last_error.c_str(); }

void cgemm_context_desc_init(cgemm_context_desc* desc) {
  if (desc == nullptr) return;
  std::memset(desc, 0, sizeof(*desc));
  const cgemm::OverlapOptions defaults;
  desc->dp = 1;
  desc->tp = 0;
  desc->num_max_streams = defaults.num_max_streams;
  desc->chunks_per_rank = defaults.chunks_per_rank;
  desc->aggregate_all_gather = defaults.aggregate_all_gather ? 1 : 0;
}

cgemm_status cgemm_context_options_init(cgemm_context_options* options, size_t struct_size) {
  return guarded(__func__, [&] {
    require(options, "options");
    check_options_size(struct_size, kContextOptionsV1, "options");
    // Every default is zero bytes, those of fields this library does not know too.
    std::memset(options, 0, struct_size);
    options->struct_size = struct_size;
    return CGEMM_SUCCESS;
  });
}

cgemm_status cgemm_context_create(MPI_Comm comm, const cgemm_context_desc* desc,
                                  cgemm_context** out) {
  return guarded(__func__, [&] { return create_context(comm, read_options(nullptr), desc, out); });
}

cgemm_status cgemm_context_create_nccl(MPI_Comm comm, void* nccl_comm,
                                       const cgemm_context_desc* desc, cgemm_context** out) {
  return guarded(__func__, [&] {
    cgemm_context_options o = read_options(nullptr);
    o.nccl_comm = nccl_comm;
    return create_context(comm, o, desc, out);
  });
}

cgemm_status cgemm_context_create_ex(MPI_Comm comm, const cgemm_context_desc* desc,
                                     const cgemm_context_options* options, cgemm_context** out) {
  return guarded(__func__, [&] { return create_context(comm, read_options(options), desc, out); });
}

cgemm_status cgemm_context_create_fortran(MPI_Fint comm, const cgemm_context_desc* desc,
                                          cgemm_context** out) {
  return guarded(__func__, [&] {
    return create_context(comm_from_fortran(comm), read_options(nullptr), desc, out,
                          fortran_name(comm));
  });
}

cgemm_status cgemm_context_create_nccl_fortran(MPI_Fint comm, void* nccl_comm,
                                               const cgemm_context_desc* desc,
                                               cgemm_context** out) {
  return guarded(__func__, [&] {
    cgemm_context_options o = read_options(nullptr);
    o.nccl_comm = nccl_comm;
    return create_context(comm_from_fortran(comm), o, desc, out, fortran_name(comm));
  });
}

cgemm_status cgemm_context_create_ex_fortran(MPI_Fint comm, const cgemm_context_desc* desc,
                                             const cgemm_context_options* options,
                                             cgemm_context** out) {
  return guarded(__func__, [&] {
    // The arguments before MPI: their errors are the same with or without MPI.
    const cgemm_context_options o = read_options(options);
    return create_context(comm_from_fortran(comm), o, desc, out, fortran_name(comm));
  });
}

cgemm_status cgemm_context_create_world(const cgemm_context_desc* desc, cgemm_context** out) {
  return guarded(__func__,
                 [&] { return create_context(world_comm(), read_options(nullptr), desc, out); });
}

cgemm_status cgemm_context_create_world_ex(const cgemm_context_desc* desc,
                                           const cgemm_context_options* options,
                                           cgemm_context** out) {
  return guarded(__func__, [&] {
    const cgemm_context_options o = read_options(options);
    return create_context(world_comm(), o, desc, out);
  });
}

cgemm_status cgemm_mpi_finalize(void) {
  return guarded(__func__, [&] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (initialized_mpi.exchange(false) && !finalized && MPI_Finalize() != MPI_SUCCESS) {
      return fail(CGEMM_ERROR_MPI, "cgemm_mpi_finalize", "MPI_Finalize failed");
    }
    return CGEMM_SUCCESS;
  });
}

cgemm_status cgemm_context_get_info(const cgemm_context* ctx, cgemm_context_info* out) {
  return guarded(__func__, [&] {
    const ContextObject& c = context_of(ctx);
    require(out, "out");
    const auto& comms = c.ctx->comms();
    cgemm_context_info info{};
    info.world_rank = comms.world_rank();
    info.world_size = comms.world_size();
    info.dp = comms.dp();
    info.tp = comms.tp();
    info.dp_rank = comms.dp_rank();
    info.tp_rank = comms.tp_rank();
    info.backend = c.ctx->backend().kind() == cgemm::BackendKind::kCuda ? "cuda" : "cpu";
    *out = info;
    return CGEMM_SUCCESS;
  });
}

cgemm_status cgemm_context_get_fsdp(const cgemm_context* ctx, int* fsdp, int* fsdp_rank) {
  return guarded(__func__, [&] {
    const auto& comms = context_of(ctx).ctx->comms();
    if (fsdp != nullptr) *fsdp = comms.fsdp();
    if (fsdp_rank != nullptr) *fsdp_rank = comms.fsdp_rank();
    return CGEMM_SUCCESS;
  });
}

cgemm_status cgemm_context_destroy(cgemm_context* ctx) {
  return guarded(__func__, [&] {
    if (ctx == nullptr) return CGEMM_SUCCESS;
    if (const int n = context_of(ctx).plans.load(); n > 0) {
      const std::string what = std::to_string(n) + " plan(s) or quantized tensor(s) of this " +
                               "context remain: destroy them first";
      return fail(CGEMM_ERROR_STATE, "cgemm_context_destroy", what.c_str());
    }
    contexts().take(reinterpret_cast<uintptr_t>(ctx), "ctx").reset();
    return CGEMM_SUCCESS;
  });
}

void cgemm_plan_desc_init(cgemm_plan_desc* desc) {
  if (desc == nullptr) return;
  std::memset(desc, 0, sizeof(*desc));
  desc->lhs_contracting_ndim = 1;
  desc->lhs_contracting[0] = -1;
  desc->rhs_contracting_ndim = 1;
  desc->rhs_contracting[0] = 0;
}

cgemm_status cgemm_plan_options_init(cgemm_plan_options* options, size_t struct_size) {
  return guarded(__func__, [&] {
    require(options, "options");
    check_options_size(struct_size, kPlanOptionsV1, "options");
    std::memset(options, 0, struct_size);  // every default is zero bytes
    options->struct_size = struct_size;
    return CGEMM_SUCCESS;
  });
}

cgemm_status cgemm_plan_create(cgemm_context* ctx, const cgemm_plan_desc* desc, cgemm_plan** out) {
  return guarded(__func__, [&] { return create_plan(ctx, desc, nullptr, out); });
}

cgemm_status cgemm_plan_create_ex(cgemm_context* ctx, const cgemm_plan_desc* desc,
                                  const cgemm_plan_options* options, cgemm_plan** out) {
  return guarded(__func__, [&] { return create_plan(ctx, desc, options, out); });
}

void cgemm_plan_destroy(cgemm_plan* plan) {
  if (plan == nullptr) return;
  // A destructor that throws would end the process (noexcept); the status is dropped, as
  // free() drops none.
  (void)guarded(__func__, [&] {
    std::unique_ptr<PlanObject> p = plans().take(reinterpret_cast<uintptr_t>(plan), "plan");
    release_graphs_of(plan);  // they name the plan's workspaces
    ContextObject* owner = p->owner;
    p.reset();
    --owner->plans;
    return CGEMM_SUCCESS;
  });
}

cgemm_status cgemm_plan_tensor_info(const cgemm_plan* plan, cgemm_operand operand,
                                    cgemm_tensor_info* out) {
  return guarded(__func__, [&] {
    const PlanObject& p = plan_of(plan);
    require(out, "out");
    const auto& d = p.plan->description();
    cgemm_tensor_info info{};
    const cgemm::Shape *global = nullptr, *local = nullptr, *offset = nullptr;
    cgemm::Shape gathered_offset;
    cgemm::DType dtype = d.desc.dtype;
    switch (raw_value(operand)) {
      case CGEMM_LHS:
        dtype = cgemm::lhs_input_dtype(d.desc);
        global = &d.desc.lhs_shape, local = &d.lhs_local, offset = &d.lhs_offset;
        break;
      case CGEMM_RHS:
        dtype = cgemm::rhs_input_dtype(d.desc);
        global = &d.desc.rhs_shape, local = &d.rhs_local, offset = &d.rhs_offset;
        break;
      case CGEMM_BIAS:
        dtype = d.desc.out_dtype;
        if (d.desc.bias_shape) {
          global = &*d.desc.bias_shape, local = &d.bias_local, offset = &d.bias_offset;
        }
        break;
      case CGEMM_OUT:
        dtype = d.desc.out_dtype;
        global = &d.out_global, local = &d.out_local, offset = &d.out_offset;
        break;
      case CGEMM_GATHERED_LHS:
        dtype = cgemm::lhs_input_dtype(d.desc);
        if (!p.plan->gathered_lhs_local().empty()) {
          gathered_offset = d.lhs_offset;
          gathered_offset[d.desc.transpose_batch_sequence ? 0 : 1] = 0;
          global = &d.desc.lhs_shape, local = &p.plan->gathered_lhs_local();
          offset = &gathered_offset;
        }
        break;
      default:
        throw ArgumentError("operand " + std::to_string(raw_value(operand)) +
                            ": not CGEMM_LHS, CGEMM_RHS, CGEMM_BIAS, CGEMM_OUT or "
                            "CGEMM_GATHERED_LHS");
    }
    // Static storage for the name: the dtype tables' string_views point at literals.
    info.dtype = cgemm::dtype_name(dtype).data();
    if (global != nullptr) {
      if (global->size() > CGEMM_MAX_NDIM) {
        throw cgemm::Error("the operand has " + std::to_string(global->size()) +
                           " dims, more than CGEMM_MAX_NDIM");
      }
      info.ndim = static_cast<int>(global->size());
      for (size_t i = 0; i < global->size(); ++i) {
        info.global_shape[i] = (*global)[i];
        info.local_shape[i] = (*local)[i];
        info.offset[i] = (*offset)[i];
      }
      info.bytes = cgemm::num_elements(*local) * static_cast<int64_t>(cgemm::dtype_size(dtype));
    }
    *out = info;
    return CGEMM_SUCCESS;
  });
}

cgemm_status cgemm_plan_execute(cgemm_plan* plan, const void* lhs, const void* rhs,
                                const void* bias, void* out) {
  return guarded(__func__, [&] { return execute(plan, lhs, rhs, bias, out, nullptr, nullptr); });
}

cgemm_status cgemm_plan_execute_on_stream(cgemm_plan* plan, const void* lhs, const void* rhs,
                                          const void* bias, void* out, void* stream) {
  return guarded(__func__, [&] { return execute(plan, lhs, rhs, bias, out, nullptr, stream); });
}

cgemm_status cgemm_plan_execute_gathered(cgemm_plan* plan, const void* lhs, const void* rhs,
                                         const void* bias, void* out, void* gathered_lhs,
                                         void* stream) {
  return guarded(__func__,
                 [&] { return execute(plan, lhs, rhs, bias, out, gathered_lhs, stream); });
}

cgemm_status cgemm_plan_execute_scaled(cgemm_plan* plan, const void* lhs, const void* rhs,
                                       const void* bias, void* out, const float* lhs_scale_inv,
                                       const float* rhs_scale_inv, void* gathered_lhs,
                                       void* stream) {
  return guarded(__func__, [&] {
    return execute(plan, lhs, rhs, bias, out, gathered_lhs, stream, lhs_scale_inv, rhs_scale_inv);
  });
}

cgemm_status cgemm_plan_capture(cgemm_plan* plan, const void* lhs, const void* rhs,
                                const void* bias, void* out, void* gathered_lhs, void* stream,
                                cgemm_graph** graph) {
  return guarded(__func__, [&] {
    require(graph, "graph");
    *graph = nullptr;
    PlanObject& p = plan_of(plan);
    const cgemm::QuantizationDesc& q = p.plan->desc().quantization;
    if (q.lhs_quantized || q.rhs_quantized) {
      throw ArgumentError(
          "the plan takes pre-quantized operands, whose scale_inv this call has "
          "no argument for: capturing it is not supported yet (execute it with "
          "cgemm_plan_execute_scaled)");
    }
    *graph =
        add_graph(plan, p.plan->capture(operands_of(p, lhs, rhs, bias, out, gathered_lhs), stream));
    return CGEMM_SUCCESS;
  });
}

}  // extern "C"
