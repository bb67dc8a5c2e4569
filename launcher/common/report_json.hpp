#pragma once
// What cgemm-run's JSON report says in JSON's own terms: partition specs as arrays, the
// resolved options as an object of typed values, and where the numbers came from (version,
// commit, time), so that a reader needs no Python or INI parser.

#include <nlohmann/json.hpp>

#include "cgemm/sharding/partition_spec.hpp"
#include "run_config.hpp"

namespace cgemm::launcher {

/// ["dp", null, "tpsp"]: one entry per dim, null unsharded, a tuple entry a nested array
/// (the encoding of tests/data/PLANNER_SCHEMA.md).
nlohmann::json spec_json(const PartitionSpec& spec);

/// Every option as to_ini writes it, as a number, a boolean, a string or null (a file not
/// given); "gemm": the block, [{"name", "collective", "hidden_in", "hidden_out"}, ...];
/// "config": the --config file or null.
nlohmann::json config_json(const RunConfig& cfg);

/// {"version", "commit", "time"}: the build (as --version says it) and now, in UTC
/// ("2026-12-02T18:13:06Z").
nlohmann::json provenance_json();

}  // namespace cgemm::launcher
