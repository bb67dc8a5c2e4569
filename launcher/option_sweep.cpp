#include "option_sweep.hpp"

#include <algorithm>
#include <sstream>

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
      throw OptionError(src.describe(o.string_key, o.value[0]) +
                        ": the mesh and backend options (dp, tp, backend, gpu_sharing) may not "
                        "be swept: one job runs one mesh on one backend (start a job per mesh)");
    }
    if (e->sweep != Sweep::kYes) continue;
    SweepAxis a{&opts, i, o.string_key, {}};
    std::istringstream items(o.value[0]);
    for (std::string item; std::getline(items, item, ',');) a.values.push_back(trim(item));
    if (o.value[0].back() == ',') a.values.emplace_back();
    for (const auto& v : a.values) {
      if (v.empty()) {
        throw OptionError(src.describe(o.string_key, o.value[0]) +
                          ": an empty value in the list (sweep lists are 'A, B, C')");
      }
    }
    axes.push_back(std::move(a));
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
  size_t count = 1;
  for (const auto& a : axes) count *= a.values.size();
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
