#pragma once
// The process's cgemm context and plans for the JAX plugin (libcgemm_jax.so).
//
// Each MPI rank runs its own single-device JAX program; python/cgemm_jax.py makes one cgemm
// context per process (collective_gemm_bootstrap) and hands its handle here. A plan is named
// by its description, a JSON object that python/cgemm_jax.py writes (the XLA FFI attribute
// "plan" of every cgemm call carries the same text), and made once per process: the first
// lookup of a description makes the plan through the C API (collective over the context for a
// dense plan: every rank looks up the same descriptions in the same order, as every rank traces
// and compiles the same program), later lookups return it. Plans live until release_all
// (cgemm_jax.shutdown() and the module's exit hook); their records live for the process, so an
// XLA executable compiled earlier still points at a record, whose plan is null once released
// (its execute refuses to run) and made again when the description is looked up again.
//
// The description's fields are cgemm_plan_desc's and cgemm_plan_options' (dense) or
// cgemm_grouped_plan_desc's (grouped), under the same names; shapes are global (dense) or local
// (grouped) lists of ints; absent fields take the C API's defaults. Unknown fields are refused.

#include <cstdint>
#include <string>
#include <vector>

#include "cgemm/cgemm.h"

namespace cgemm_jax {

/// One operand as the plan expects it: this rank's shape and dtype name; ndim 0: absent.
struct OperandInfo {
  std::vector<int64_t> shape;
  std::string dtype;
  bool present = false;
};

struct DensePlan {
  cgemm_plan* plan = nullptr;  // null: released (release_all)
  OperandInfo lhs, rhs, bias, out, gathered_lhs;
};

struct GroupedPlan {
  cgemm_grouped_plan* plan = nullptr;  // null: released
  int64_t num_groups = 0;
  OperandInfo lhs, rhs, bias, out;
};

/// A failure of this layer or of the C API below it, with its C API status.
struct Failure {
  cgemm_status status;
  std::string message;
};

/// Sets the process's context (a handle of libcgemm.so's C API, made by the caller) and its
/// backend name ("cpu" or "cuda"). Throws Failure when plans of another context remain.
void set_context(cgemm_context* ctx);
cgemm_context* context();
/// "cpu" or "cuda": the backend of the context set; throws Failure when none is set.
const std::string& context_backend();

/// The plan for `description`, made on first use. Throws Failure (the C API's status and
/// message, or CGEMM_ERROR_INVALID_ARGUMENT naming the malformed field).
const DensePlan& dense_plan(const std::string& description);
const GroupedPlan& grouped_plan(const std::string& description);

/// Destroys every plan, in the order they were made (dense plans: collective, the same order on
/// every rank), keeping the records, and forgets the context (which the caller destroys).
void release_all();

}  // namespace cgemm_jax
