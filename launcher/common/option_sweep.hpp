#pragma once
// Sweeps: options given as comma-separated lists expand to their product, one experiment
// each, in order (the last list varies fastest). An axis edits the parsed options in place,
// so each experiment is stored, checked and read like a run without lists.

#include <boost/program_options/parsers.hpp>
#include <string>
#include <vector>

#include "option_sources.hpp"
#include "option_table.hpp"

namespace cgemm::launcher {

struct SweepAxis {
  boost::program_options::parsed_options* where;  // the command line's options or the file's
  size_t index;                                   // of the option in where->options
  std::string name;
  std::vector<std::string> values;
};

/// Appends the list options of `opts` to `axes` (those the command line does not override,
/// for the file's). Throws OptionError for a list on an option that may not sweep or an
/// empty item.
void find_axes(const ProgramSpec& spec, boost::program_options::parsed_options& opts,
               bool from_file, const OptionSources& src, std::vector<SweepAxis>& axes);

/// A block of gemm entries ignores the single GEMM's options unless the command line gives
/// them: a list on one of those would sweep nothing and label its rows falsely. Throws.
void refuse_axes_beside_block(const std::vector<SweepAxis>& axes, bool has_block,
                              const OptionSources& src);

/// The most experiments one sweep may hold: each is parsed, checked and kept before the first
/// runs, so a product of lists in the millions would fill memory before any result.
inline constexpr size_t kMaxExperiments = 100000;

/// The number of experiments: the product of the axes' sizes. Throws OptionError, naming the
/// lists' sizes, when it is over kMaxExperiments.
size_t experiment_count(const std::vector<SweepAxis>& axes);

/// Sets every axis to its value of experiment k (k / stride % size, the last fastest) and
/// returns the label "seq_len=1024 dtype=bf16".
std::string select_experiment(const std::vector<SweepAxis>& axes, size_t k);

}  // namespace cgemm::launcher
