#pragma once
// The options every cgemm job program takes (cgemm-run, cgemm-bench): one row each, read the
// same way and with the same messages by both; a program's own defaults (cgemm-bench's warmup
// and iterations) come from its Config.

#include <cstdint>
#include <string>
#include <vector>

#include "cgemm/runtime/options.hpp"
#include "option_table.hpp"

namespace cgemm::launcher {

struct SharedOptions {
  int dp = 1;    // mesh: data-parallel size (replicas)
  int fsdp = 1;  // mesh: fully sharded data-parallel size (cgemm-run's --fsdp; 1 elsewhere)
  int warmup = 2;
  int iterations = 5;
  BackendKind backend = BackendKind::kAuto;
  bool gpu_sharing = false;  // ranks of a host may share its GPUs (CUDA backend, copy engines)
  TransportKind transport = TransportKind::kAuto;  // the ring's transport (BackendOptions)
  double timeout = 300.0;  // seconds any wait may last before the job ends (<= 0: forever)
  std::string trace;       // trace path (Chrome JSON; FILE.svg beside it); empty: none
  OverlapOptions overlap;
  std::string config_file;  // the --config given, for the report
};

/// The shared rows, in --help order within each group (General, Mesh, Run, Overlap).
const std::vector<OptionRow<SharedOptions>>& shared_rows();

/// The dp x fsdp x tp mesh of a job on `world_size` ranks (cgemm-run and cgemm-train): dp >= 1
/// and fsdp >= 1, dp x fsdp divides the world; tp 0 becomes world / (dp x fsdp), else
/// dp x fsdp x tp must be the world; batch % (dp x fsdp) == 0 (`batch_use` ends that message:
/// what each data-parallel group does with its batch) and seq_len % tp == 0. Sets tp. Throws
/// OptionError naming the option.
void resolve_dp_tp(int& tp, int dp, int64_t batch, int64_t seq_len, int world_size,
                   const std::string& batch_use, int fsdp = 1);

}  // namespace cgemm::launcher
