#pragma once
// What the C API's entry points share across its files (cgemm_c.cpp: contexts and GEMM plans;
// grouped_c.cpp: grouped GEMM plans): the live contexts behind the caller's handles, and the
// guard that turns every exception into a status and the thread's last error, so that nothing
// thrown crosses into a C caller (for which unwinding is undefined).

#include <atomic>
#include <exception>
#include <memory>
#include <new>

#include "capi_errors.hpp"
#include "cgemm/cgemm.h"
#include "cgemm/core/error.hpp"
#include "cgemm/runtime/context.hpp"
#include "handles.hpp"

namespace cgemm::capi {

// What a cgemm_context handle stands for. The handles the caller holds are not addresses of
// these (see Handles).
struct ContextObject {
  std::unique_ptr<cgemm::Context> ctx;
  std::atomic<int> plans{0};  // live plans (GEMM, grouped) and quantized tensors: they hold ctx
};

Handles<ContextObject>& contexts();
/// The context of a live handle; ArgumentError naming ctx otherwise.
ContextObject& context_of(const cgemm_context* ctx);

/// Records `what` (prefixed by `function`) as this thread's last error; returns `status`.
cgemm_status fail(cgemm_status status, const char* function, const char* what) noexcept;

/// Runs f, mapping what it throws to a status; the most derived type first.
template <typename F>
cgemm_status guarded(const char* function, F&& f) noexcept {
  try {
    return f();
  } catch (const ArgumentError& e) {
    return fail(CGEMM_ERROR_INVALID_ARGUMENT, function, e.what());
  } catch (const MpiInitError& e) {
    return fail(CGEMM_ERROR_MPI, function, e.what());
  } catch (const OutOfMemoryError& e) {
    return fail(CGEMM_ERROR_OUT_OF_MEMORY, function, e.what());
  } catch (const cgemm::PlanError& e) {
    return fail(CGEMM_ERROR_PLAN, function, e.what());
  } catch (const cgemm::BackendRuleError& e) {
    return fail(CGEMM_ERROR_BACKEND, function, e.what());
  } catch (const cgemm::Error& e) {
    return fail(CGEMM_ERROR_RUNTIME, function, e.what());
  } catch (const std::bad_alloc&) {
    return fail(CGEMM_ERROR_OUT_OF_MEMORY, function, "out of memory");
  } catch (const std::exception& e) {
    return fail(CGEMM_ERROR_INTERNAL, function, e.what());
  } catch (...) {
    return fail(CGEMM_ERROR_INTERNAL, function, "an exception of unknown type");
  }
}

}  // namespace cgemm::capi
