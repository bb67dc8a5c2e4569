#pragma once
// cgemm-run's sweep rows: one per experiment, every sweepable option in a column of its own
// (swept or not, so files of several sweeps line up), its value typed as the option is (a
// number, a boolean or a word), then the mesh and the results. The printed table shows the
// swept options, the sizes and the results; CSV and JSON Lines carry every column.

#include <string>
#include <vector>

#include "common/run_config.hpp"
#include "common/table.hpp"

namespace cgemm::launcher {

/// What one experiment's run gives its row.
struct SweepResult {
  int dp = 1, tp = 1;
  std::string backend;
  double overlapped_ms = 0, sequential_ms = 0, flops = 0;  // summed over the block
  std::string check = "skipped";                           // PASSED, FAILED or skipped
  int64_t failures = 0;
};

/// The table of a sweep whose lists are on `swept` (option names).
Table sweep_table(const std::vector<std::string>& swept);

/// Experiment `index` (from 0) of the sweep, labelled `label` ("seq_len=16 dtype=bf16").
std::vector<Cell> sweep_row(size_t index, const std::string& label, const RunConfig& cfg,
                            const SweepResult& r);

/// An option's value in `cfg` as its row types it: "on" -> true, "16" -> 16, "bf16" -> "bf16".
/// The GEMM's sizes of a block of several GEMMs are their values joined by '+' ("32+48").
Cell option_cell(const std::string& name, const RunConfig& cfg);

/// The sweep's resolved config, printed once: the first experiment's INI text with each swept
/// option's line giving its list ("seq_len = 16, 32"), so the text runs the same sweep again.
/// A swept option without a line of its own is listed in a comment.
std::string sweep_ini(const std::vector<RunConfig>& experiments,
                      const std::vector<std::string>& swept);

/// An experiment's one line: "experiment 2/4: seq_len=32: overlapped 0.071 ms, sequential
/// 0.052 ms, speed-up 0.73x, check PASSED".
std::string experiment_line(size_t index, size_t count, const std::string& label,
                            const SweepResult& r);

}  // namespace cgemm::launcher
