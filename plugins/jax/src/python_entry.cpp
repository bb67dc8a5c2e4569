// What python/cgemm_jax.py calls through ctypes (besides the FFI handlers): the context to plan
// on, plans made at trace time (so a planning error is a Python exception at the user's call,
// and the result shapes are the planner's), and the release at exit.
#include <string>

#include "plan_registry.hpp"

#define CGEMM_JAX_API extern "C" __attribute__((visibility("default")))

namespace {

thread_local std::string last_error;

int failed(const cgemm_jax::Failure& f) {
  last_error = f.message;
  return static_cast<int>(f.status);
}

}  // namespace

/// The message of this thread's last failed call ("" when none failed).
CGEMM_JAX_API const char* cgemm_jax_last_error() { return last_error.c_str(); }

/// The context plans are made on (a live cgemm_context handle). Returns a cgemm_status.
CGEMM_JAX_API int cgemm_jax_set_context(cgemm_context* ctx) {
  try {
    cgemm_jax::set_context(ctx);
    return CGEMM_SUCCESS;
  } catch (const cgemm_jax::Failure& f) {
    return failed(f);
  }
}

/// The process's plan for a dense description (made on first use: collective), as a C API
/// handle the caller may query (cgemm_plan_tensor_info) but must not destroy.
CGEMM_JAX_API int cgemm_jax_dense_plan(const char* description, cgemm_plan** out) {
  try {
    *out = cgemm_jax::dense_plan(description ? description : "").plan;
    return CGEMM_SUCCESS;
  } catch (const cgemm_jax::Failure& f) {
    return failed(f);
  }
}

/// The same for a grouped description (not collective).
CGEMM_JAX_API int cgemm_jax_grouped_plan(const char* description, cgemm_grouped_plan** out) {
  try {
    *out = cgemm_jax::grouped_plan(description ? description : "").plan;
    return CGEMM_SUCCESS;
  } catch (const cgemm_jax::Failure& f) {
    return failed(f);
  }
}

/// Destroys every plan (collective) and forgets the context.
CGEMM_JAX_API void cgemm_jax_release() { cgemm_jax::release_all(); }
