#include "option_sweep.hpp"

#include <algorithm>
#include <string>

#include "option_list.hpp"

namespace cgemm::launcher {

namespace {

const OptionEntry* entry(const ProgramSpec& spec, const std::string& name) {
  const auto it = std::find_if(spec.options.begin(), spec.options.end(),
                               [&](const OptionEntry& e) { return e.name == name; });
  return it == spec.options.end() ? nullptr : &*it;
}

}  // namespace

void find_axes(const ProgramSpec& spec, boost::program_options::parsed_options& opts,
               bool from_file, const OptionSources& src, std::vector<SweepAxis>& axes) {
  if (!spec.sweeps) return;
  for (size_t i = 0; i < opts.options.size(); ++i) {
    const auto& o = opts.options[i];
    if (o.value.size() != 1 || o.value[0].find(',') == std::string::npos) continue;
    if (from_file && src.on_command_line(o.string_key)) continue;
    const OptionEntry* e = entry(spec, o.string_key);
    if (e == nullptr) continue;
    if (e->sweep == Sweep::kRefused) {
      throw OptionError(
          src.describe(o.string_key, o.value[0]) +
          ": the mesh and backend options (dp, tp, backend, gpu_sharing, transport) may not "
          "be swept: one job runs one mesh on one backend (start a job per mesh)");
    }
    if (e->sweep != Sweep::kYes) continue;
    // Split no further than one past the limit: 40 million values ran out of memory before
    // the count was checked.
    axes.push_back(SweepAxis{
        &opts, i, o.string_key,
        list_items(o.value[0], src.describe(o.string_key, o.value[0]), kMaxExperiments + 1)});
  }
}

void refuse_axes_beside_block(const std::vector<SweepAxis>& axes, bool has_block,
                              const OptionSources& src) {
  if (!has_block) return;
  for (const auto& a : axes) {
    const bool single = a.name == "collective" || a.name == "hidden_in" || a.name == "hidden_out";
    if (single && !src.on_command_line(a.name)) {
      throw OptionError(src.describe(a.name, a.where->options[a.index].value[0]) +
                        ": the block of gemm entries defines the GEMMs, so a list here sweeps "
                        "nothing; sweep it on the command line (which replaces the block) or "
                        "drop the gemm entries");
    }
  }
}

size_t experiment_count(const std::vector<SweepAxis>& axes) {
  // Checked: lists whose product wraps (16 lists of 16 values: 2^64) must not read as a
  // small count, and a count over the limit is refused before any experiment is expanded.
  size_t count = 1;
  bool over = false;
  std::string sizes;
  for (const auto& a : axes) {
    over =
        over || __builtin_mul_overflow(count, a.values.size(), &count) || count > kMaxExperiments;
    const std::string size = a.values.size() > kMaxExperiments
                                 ? "more than " + std::to_string(kMaxExperiments)
                                 : std::to_string(a.values.size());
    sizes += (sizes.empty() ? "" : " x ") + size + " (" + a.name + ")";
  }
  if (over) {
    throw OptionError("the sweep's lists give " + sizes + " = more than " +
                      std::to_string(kMaxExperiments) + " experiments; a job runs at most " +
                      std::to_string(kMaxExperiments) + " (split the sweep over several jobs)");
  }
  return count;
}

std::string select_experiment(const std::vector<SweepAxis>& axes, size_t k) {
  std::string label;
  size_t stride = experiment_count(axes);
  for (const auto& a : axes) {
    stride /= a.values.size();
    const std::string& v = a.values[(k / stride) % a.values.size()];
    a.where->options[a.index].value = {v};
    label += (label.empty() ? "" : " ") + a.name + "=" + v;
  }
  return label;
}

}  // namespace cgemm::launcher
