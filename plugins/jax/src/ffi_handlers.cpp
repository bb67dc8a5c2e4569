// The XLA FFI handlers of the JAX plugin (api_version 1): the dense GEMM (collective none,
// all-gather, reduce-scatter; bias; cgemm's FP8 scaling inside) and the grouped GEMM, each
// with an instantiate stage and an execute stage per platform.
//
// instantiate: the "plan" attribute (plan_registry.hpp's JSON description) -> the process's plan
//   for it, made on first use (collective for a dense plan), kept as the handler's state. The
//   plan and its workspaces exist before the first execute.
// execute: checks each buffer against the plan (shape and XLA dtype, naming the operand; no
//   allocation unless a check fails), then one C API call on XLA's buffers: host memory and the CPU
//   backend on the "cpu" platform; device memory, XLA's stream and the CUDA backend on "CUDA"
//   (events on the stream, no host wait, no allocation). An absent operand (no bias, no gathered
//   lhs asked for) is a buffer of no elements.
// The handlers do not declare XLA's command-buffer trait, though a dense plan's call can be
// captured (docs/CUDA_GRAPHS.md): XLA would replay a recorded command buffer after
// cgemm_jax.shutdown() released the plan's memory, without calling the handler that refuses
// released plans, and a plan that cannot be captured (a dp group through the host, a trace)
// would fail inside a command buffer where it runs today. XLA runs the calls on its stream.
#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "plan_registry.hpp"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace cgemm_jax {
namespace {

struct DenseState {
  static ffi::TypeId id;
  const DensePlan* plan;
};
struct GroupedState {
  static ffi::TypeId id;
  const GroupedPlan* plan;
};
ffi::TypeId DenseState::id = {};
ffi::TypeId GroupedState::id = {};

ffi::ErrorCode error_code(cgemm_status status) {
  switch (status) {
    case CGEMM_ERROR_INVALID_ARGUMENT:
    case CGEMM_ERROR_PLAN:
      return ffi::ErrorCode::kInvalidArgument;
    case CGEMM_ERROR_OUT_OF_MEMORY:
      return ffi::ErrorCode::kResourceExhausted;
    case CGEMM_ERROR_STATE:
    case CGEMM_ERROR_BACKEND:
      return ffi::ErrorCode::kFailedPrecondition;
    default:
      return ffi::ErrorCode::kInternal;
  }
}

ffi::Error from_status(cgemm_status status, const char* call) {
  if (status == CGEMM_SUCCESS) return ffi::Error::Success();
  return ffi::Error(error_code(status), std::string("cgemm: ") + call + ": " + cgemm_last_error());
}

ffi::Error from_failure(const Failure& f) {
  return ffi::Error(error_code(f.status), "cgemm: " + f.message);
}

std::string_view xla_dtype_name(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::F32:
      return "float32";
    case ffi::DataType::BF16:
      return "bfloat16";
    case ffi::DataType::F16:
      return "float16";
    case ffi::DataType::F8E4M3FN:
      return "float8_e4m3fn";
    case ffi::DataType::F8E5M2:
      return "float8_e5m2";
    case ffi::DataType::S32:
      return "int32";
    default:
      return "another dtype";
  }
}

std::string dims_text(ffi::AnyBuffer::Dimensions d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// The buffer XLA passes for `name` against the plan's operand: its data, or nullptr for an
// absent operand (a buffer of no elements). Sets `error` when they differ.
void* bind(const char* name, const ffi::AnyBuffer& buf, const OperandInfo& want,
           ffi::Error& error) {
  if (!error.success()) return nullptr;
  const auto d = buf.dimensions();
  if (!want.present) {
    if (buf.element_count() != 0) {
      error =
          ffi::Error::InvalidArgument(std::string("cgemm: ") + name + ": the plan has no " + name +
                                      " but a buffer of " + dims_text(d) + " was passed");
    }
    return nullptr;
  }
  const bool same_shape =
      d.size() == want.shape.size() && std::equal(d.begin(), d.end(), want.shape.begin());
  if (!same_shape || xla_dtype_name(buf.element_type()) != want.dtype) {
    error = ffi::Error::InvalidArgument(std::string("cgemm: ") + name + ": " +
                                        std::string(xla_dtype_name(buf.element_type())) + " " +
                                        dims_text(d) + " given, the plan needs " + want.dtype +
                                        " " + dims_text(want.shape) + " (this rank's shard)");
  }
  return buf.untyped_data();
}

ffi::Error require_backend(const char* platform, const char* backend) {
  try {
    if (context_backend() != backend) {
      return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                        std::string("cgemm: a call on JAX's ") + platform +
                            " platform needs a context on cgemm's " + backend +
                            " backend; this process's context is on the " + context_backend() +
                            " backend (collective_gemm_bootstrap's backend)");
    }
  } catch (const Failure& f) {
    return from_failure(f);
  }
  return ffi::Error::Success();
}

// The CPU platform runs a call on XLA's threads, which may run independent thunks at once;
// cgemm's collectives must run in the same order on every rank, so two at once are refused
// (one message) rather than left to deadlock.
std::atomic<int> cpu_calls_in_flight{0};

struct CpuCallGuard {
  bool alone;
  CpuCallGuard() : alone(cpu_calls_in_flight.fetch_add(1) == 0) {}
  ~CpuCallGuard() { cpu_calls_in_flight.fetch_sub(1); }
};

ffi::Error concurrent_error() {
  return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                    "cgemm: two cgemm calls ran at once on JAX's CPU platform; every rank must "
                    "run them in one order (cgemm_jax marks its calls as side-effecting so XLA "
                    "orders them; do not call cgemm from several Python threads at once)");
}

ffi::ErrorOr<std::unique_ptr<DenseState>> dense_instantiate(std::string_view plan) {
  try {
    auto s = std::make_unique<DenseState>();
    s->plan = &dense_plan(std::string(plan));
    return s;
  } catch (const Failure& f) {
    return ffi::Unexpected<ffi::Error>(from_failure(f));
  }
}

ffi::ErrorOr<std::unique_ptr<GroupedState>> grouped_instantiate(std::string_view plan) {
  try {
    auto s = std::make_unique<GroupedState>();
    s->plan = &grouped_plan(std::string(plan));
    return s;
  } catch (const Failure& f) {
    return ffi::Unexpected<ffi::Error>(from_failure(f));
  }
}

ffi::Error released_error() {
  return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                    "cgemm: this call's plan was released by cgemm_jax.shutdown(); a function "
                    "compiled before it must be traced again (jax.clear_caches())");
}

ffi::Error dense_execute(const DensePlan& p, ffi::AnyBuffer lhs, ffi::AnyBuffer rhs,
                         ffi::AnyBuffer bias, ffi::Result<ffi::AnyBuffer> out,
                         ffi::Result<ffi::AnyBuffer> gathered, void* stream) {
  if (p.plan == nullptr) return released_error();
  ffi::Error error;
  const void* l = bind("lhs", lhs, p.lhs, error);
  const void* r = bind("rhs", rhs, p.rhs, error);
  const void* b = bind("bias", bias, p.bias, error);
  void* o = bind("out", *out, p.out, error);
  // The gathered lhs is asked for by a buffer of its shape; none: no elements.
  static const OperandInfo kNotAsked;
  void* g = bind("gathered_lhs", *gathered,
                 gathered->element_count() == 0 ? kNotAsked : p.gathered_lhs, error);
  if (!error.success()) return error;
  return from_status(cgemm_plan_execute_gathered(p.plan, l, r, b, o, g, stream),
                     "cgemm_plan_execute_gathered");
}

ffi::Error dense_cpu(DenseState* s, ffi::AnyBuffer lhs, ffi::AnyBuffer rhs, ffi::AnyBuffer bias,
                     ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> gathered) {
  if (ffi::Error e = require_backend("cpu", "cpu"); !e.success()) return e;
  CpuCallGuard guard;
  if (!guard.alone) return concurrent_error();
  return dense_execute(*s->plan, lhs, rhs, bias, out, gathered, nullptr);
}

ffi::Error dense_cuda(void* stream, DenseState* s, ffi::AnyBuffer lhs, ffi::AnyBuffer rhs,
                      ffi::AnyBuffer bias, ffi::Result<ffi::AnyBuffer> out,
                      ffi::Result<ffi::AnyBuffer> gathered) {
  if (ffi::Error e = require_backend("CUDA", "cuda"); !e.success()) return e;
  return dense_execute(*s->plan, lhs, rhs, bias, out, gathered, stream);
}

ffi::Error grouped_execute(const GroupedPlan& p, ffi::AnyBuffer sizes, ffi::AnyBuffer lhs,
                           ffi::AnyBuffer rhs, ffi::AnyBuffer bias, ffi::AnyBuffer lhs_scale_inv,
                           ffi::AnyBuffer rhs_scale_inv, ffi::Result<ffi::AnyBuffer> out,
                           void* stream) {
  if (p.plan == nullptr) return released_error();
  ffi::Error error;
  const OperandInfo sizes_want{{p.num_groups}, "int32", true};
  // FP8 plans take a float32 scale_inv per group and operand; others none.
  const bool fp8 = p.lhs.dtype.rfind("float8", 0) == 0;
  const OperandInfo scale_want{{p.num_groups}, "float32", fp8};
  const void* gs = bind("group_sizes", sizes, sizes_want, error);
  const void* l = bind("lhs", lhs, p.lhs, error);
  const void* r = bind("rhs", rhs, p.rhs, error);
  const void* b = bind("bias", bias, p.bias, error);
  const void* ls = bind("lhs_scale_inv", lhs_scale_inv, scale_want, error);
  const void* rs = bind("rhs_scale_inv", rhs_scale_inv, scale_want, error);
  void* o = bind("out", *out, p.out, error);
  if (!error.success()) return error;
  return from_status(cgemm_grouped_plan_execute(p.plan, static_cast<const int32_t*>(gs), l, r, b, o,
                                                static_cast<const float*>(ls),
                                                static_cast<const float*>(rs), stream),
                     "cgemm_grouped_plan_execute");
}

ffi::Error grouped_cpu(GroupedState* s, ffi::AnyBuffer sizes, ffi::AnyBuffer lhs,
                       ffi::AnyBuffer rhs, ffi::AnyBuffer bias, ffi::AnyBuffer lhs_scale_inv,
                       ffi::AnyBuffer rhs_scale_inv, ffi::Result<ffi::AnyBuffer> out) {
  if (ffi::Error e = require_backend("cpu", "cpu"); !e.success()) return e;
  return grouped_execute(*s->plan, sizes, lhs, rhs, bias, lhs_scale_inv, rhs_scale_inv, out,
                         nullptr);
}

ffi::Error grouped_cuda(void* stream, GroupedState* s, ffi::AnyBuffer sizes, ffi::AnyBuffer lhs,
                        ffi::AnyBuffer rhs, ffi::AnyBuffer bias, ffi::AnyBuffer lhs_scale_inv,
                        ffi::AnyBuffer rhs_scale_inv, ffi::Result<ffi::AnyBuffer> out) {
  if (ffi::Error e = require_backend("CUDA", "cuda"); !e.success()) return e;
  return grouped_execute(*s->plan, sizes, lhs, rhs, bias, lhs_scale_inv, rhs_scale_inv, out,
                         stream);
}

XLA_FFI_TypeInfo dense_state_info = ffi::MakeTypeInfo<DenseState>();
XLA_FFI_TypeInfo grouped_state_info = ffi::MakeTypeInfo<GroupedState>();

}  // namespace
}  // namespace cgemm_jax

using cgemm_jax::DenseState;
using cgemm_jax::GroupedState;

// The state types, registered by python/cgemm_jax.py (jax.ffi.register_ffi_type) before the
// handlers that use them.
extern "C" __attribute__((visibility("default"))) void* cgemm_jax_dense_state_type_id() {
  return &DenseState::id;
}
extern "C" __attribute__((visibility("default"))) void* cgemm_jax_dense_state_type_info() {
  return &cgemm_jax::dense_state_info;
}
extern "C" __attribute__((visibility("default"))) void* cgemm_jax_grouped_state_type_id() {
  return &GroupedState::id;
}
extern "C" __attribute__((visibility("default"))) void* cgemm_jax_grouped_state_type_info() {
  return &cgemm_jax::grouped_state_info;
}

// The handlers python/cgemm_jax.py registers (jax.ffi.register_ffi_target); the library is built
// with hidden visibility, so each is declared exported first.
#define CGEMM_JAX_HANDLER(name) \
  extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* name(XLA_FFI_CallFrame*)
CGEMM_JAX_HANDLER(cgemm_jax_gemm_instantiate);
CGEMM_JAX_HANDLER(cgemm_jax_gemm_cpu);
CGEMM_JAX_HANDLER(cgemm_jax_gemm_cuda);
CGEMM_JAX_HANDLER(cgemm_jax_grouped_instantiate);
CGEMM_JAX_HANDLER(cgemm_jax_grouped_cpu);
CGEMM_JAX_HANDLER(cgemm_jax_grouped_cuda);

XLA_FFI_DEFINE_HANDLER_SYMBOL(cgemm_jax_gemm_instantiate, cgemm_jax::dense_instantiate,
                              ffi::Ffi::BindInstantiate().Attr<std::string_view>("plan"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(cgemm_jax_gemm_cpu, cgemm_jax::dense_cpu,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::State<DenseState>>()
                                  .Arg<ffi::AnyBuffer>()    // lhs
                                  .Arg<ffi::AnyBuffer>()    // rhs
                                  .Arg<ffi::AnyBuffer>()    // bias (no elements: none)
                                  .Ret<ffi::AnyBuffer>()    // out
                                  .Ret<ffi::AnyBuffer>());  // gathered lhs (no elements: none)
XLA_FFI_DEFINE_HANDLER_SYMBOL(cgemm_jax_gemm_cuda, cgemm_jax::dense_cuda,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()
                                  .Ctx<ffi::State<DenseState>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>());
XLA_FFI_DEFINE_HANDLER_SYMBOL(cgemm_jax_grouped_instantiate, cgemm_jax::grouped_instantiate,
                              ffi::Ffi::BindInstantiate().Attr<std::string_view>("plan"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(cgemm_jax_grouped_cpu, cgemm_jax::grouped_cpu,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::State<GroupedState>>()
                                  .Arg<ffi::AnyBuffer>()    // group sizes, int32 [G]
                                  .Arg<ffi::AnyBuffer>()    // lhs
                                  .Arg<ffi::AnyBuffer>()    // rhs
                                  .Arg<ffi::AnyBuffer>()    // bias [G, N] (no elements: none)
                                  .Arg<ffi::AnyBuffer>()    // lhs scale_inv [G] (FP8 only)
                                  .Arg<ffi::AnyBuffer>()    // rhs scale_inv [G] (FP8 only)
                                  .Ret<ffi::AnyBuffer>());  // out
XLA_FFI_DEFINE_HANDLER_SYMBOL(cgemm_jax_grouped_cuda, cgemm_jax::grouped_cuda,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()
                                  .Ctx<ffi::State<GroupedState>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>());
