// cgemm-compare: compares two output dumps of cgemm-run (--output_dump) element by element,
// e.g. the CUDA backend against the CPU backend on the same config and seed. No MPI.

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>

#include "build_info.hpp"
#include "common/check.hpp"
#include "common/input_files.hpp"
#include "common/output_dump.hpp"
#include "common/printable_text.hpp"

namespace po = boost::program_options;
using namespace cgemm;
using namespace cgemm::launcher;

namespace {

constexpr int kExitUsage = 2, kExitDiffer = 3;

int run(int argc, char** argv) {
  po::options_description opts(
      "Usage: cgemm-compare [OPTIONS] A B\n"
      "Compares the tensors of two cgemm-run output dumps (--output_dump) element by element:\n"
      "same names, dtypes and shapes in the same order, and every element within the\n"
      "tolerance (it fails only if |a - b| > atol and |a - b| > rtol x |b|; NaN and inf fail).\n"
      "Dtypes: float32, bfloat16, float16, and float8_e4m3fn and float8_e5m2 (decoded to\n"
      "float). Tensors have at least one element.\n"
      "B is the reference. Exit status: 0 all within tolerance, 3 some element differs,\n"
      "2 bad arguments or unreadable/mismatched files.\nOptions");
  opts.add_options()("help,h", "print this help and exit")(
      "version", "print the version and the commit it was built from, and exit")(
      "rtol", po::value<double>()->value_name("X"),
      "relative tolerance, finite and >= 0 [unitless; default: the dtype's, bf16 0.02, fp16 "
      "1e-3, fp32 1e-5, fp8 0.125]")(
      "atol", po::value<double>()->value_name("X"),
      "absolute tolerance, finite and >= 0 [unitless; default: the dtype's, bf16 0.002, fp16 "
      "1e-6, fp32 1e-8, fp8 0.625]")(
      "atol_scale", po::value<double>()->value_name("S")->default_value(0.0),
      "raise the absolute tolerance to S x max|B| of each tensor (S finite and >= 0): two "
      "implementations (fp32 against fp64 accumulation, another order of partial sums) "
      "differ by rounding errors "
      "that scale with the tensor's magnitude, not with each element's, and an element near "
      "zero meets no relative tolerance [unitless; e.g. 4 units of the dtype's rounding for "
      "fp16, K x 2^-24 for fp32]");
  po::options_description hidden;
  hidden.add_options()("files", po::value<std::vector<std::string>>());
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("files", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "cgemm-compare: error: " << e.what() << " (see --help)\n";
    return kExitUsage;
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  // As every tool's --version: "cgemm-compare VERSION (commit HASH)".
  if (vm.count("version")) {
    std::cout << build_info::version_line("cgemm-compare");
    return 0;
  }
  const auto files =
      vm.count("files") ? vm["files"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (files.size() != 2) {
    std::cerr << "cgemm-compare: error: expected two dump files A B, got " << files.size()
              << " (see --help)\n";
    return kExitUsage;
  }
  // A NaN tolerance passed every element, a negative one failed identical files.
  for (const char* name : {"rtol", "atol", "atol_scale"}) {
    if (!vm.count(name)) continue;
    if (const double v = vm[name].as<double>(); !std::isfinite(v) || v < 0) {
      std::cerr << "cgemm-compare: error: --" << name << " " << v
                << ": a tolerance must be a finite number >= 0 (see --help)\n";
      return kExitUsage;
    }
  }
  std::vector<DumpRecord> a, b;
  try {
    for (const std::string& f : files) require_regular_input("dump file", f);
    a = read_dump(files[0]);
    b = read_dump(files[1]);
  } catch (const std::exception& e) {
    std::cerr << "cgemm-compare: error: " << e.what() << "\n";
    return kExitUsage;
  }
  if (a.size() != b.size() || a.empty()) {
    std::cerr << "cgemm-compare: error: " << files[0] << " holds " << a.size() << " tensors, "
              << files[1] << " " << b.size() << (a.empty() ? " (nothing to compare)" : "") << "\n";
    return kExitUsage;
  }
  bool all_pass = true;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].dtype != b[i].dtype || a[i].shape != b[i].shape) {
      std::cerr << "cgemm-compare: error: tensor " << i + 1 << " differs in kind: '"
                << printable(a[i].name) << "' " << dtype_name(a[i].dtype) << " "
                << shape_str(a[i].shape) << " vs '" << printable(b[i].name) << "' "
                << dtype_name(b[i].dtype) << " " << shape_str(b[i].shape) << "\n";
      return kExitUsage;
    }
    Tolerance tol = tolerance_for(a[i].dtype);
    if (vm.count("rtol")) tol.rtol = vm["rtol"].as<double>();
    if (vm.count("atol")) tol.atol = vm["atol"].as<double>();
    if (const double scale = vm["atol_scale"].as<double>(); scale > 0) {
      const std::vector<float> ref =
          values_as_float(b[i].data.data(), b[i].dtype, num_elements(b[i].shape));
      float peak = 0.0f;
      for (const float v : ref) {
        if (std::isfinite(v)) peak = std::max(peak, std::fabs(v));
      }
      tol.atol = std::max(tol.atol, scale * static_cast<double>(peak));
    }
    const CheckStats s =
        compare(a[i].data.data(), b[i].data.data(), a[i].dtype, num_elements(a[i].shape), tol);
    const bool pass = s.failures == 0 && s.compared > 0;
    all_pass = all_pass && pass;
    // The errors are the finite pairs'; failures of NaN and inf have none to show, so a
    // tensor of NaNs would read "max abs err 0".
    char errors[256];
    if (s.nonfinite == 0) {
      std::snprintf(errors, sizeof errors, "max abs err %.3g, max rel err %.3g", s.max_abs,
                    s.max_rel);
    } else if (s.nonfinite == s.compared) {
      std::snprintf(errors, sizeof errors, "%lld of them NaN or inf (in A or B), no finite pair",
                    static_cast<long long>(s.nonfinite));
    } else {
      std::snprintf(errors, sizeof errors,
                    "%lld of them NaN or inf (in A or B), max abs err %.3g and max rel err %.3g "
                    "over the %lld finite pairs",
                    static_cast<long long>(s.nonfinite), s.max_abs, s.max_rel,
                    static_cast<long long>(s.compared - s.nonfinite));
    }
    std::printf("%s %s %s: %lld elements compared, %lld failures, %s (rtol %g, atol %g)\n",
                pass ? "MATCH " : "DIFFER", printable(a[i].name).c_str(),
                shape_str(a[i].shape).c_str(), static_cast<long long>(s.compared),
                static_cast<long long>(s.failures), errors, tol.rtol, tol.atol);
  }
  std::printf("cgemm-compare: %s\n", all_pass ? "all tensors match" : "tensors DIFFER");
  return all_pass ? 0 : kExitDiffer;
}

}  // namespace

int main(int argc, char** argv) {
  // Whatever escapes (memory running out while comparing) is one message, not an abort.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "cgemm-compare: error: " << e.what() << "\n";
    return kExitUsage;
  }
}
