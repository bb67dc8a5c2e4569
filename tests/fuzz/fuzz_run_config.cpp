// Fuzz target (b): cgemm-run's option parser on an INI file (launcher/common/option_table.cpp,
// parse_run_config with --config FILE). Built as a libFuzzer binary with CGEMM_FUZZ_MAIN
// defined (tests/fuzz/fuzz_tests.cmake), and into test_fuzz_regressions.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "common/run_config.hpp"
#include "fuzz_checks.hpp"

namespace cgemm::fuzz {

namespace {

// In memory where the host has a tmpfs: rewriting a file of a disk file system for every
// input costs a disk write each time (ext4 flushes a truncated file on close), more than
// parsing it.
std::filesystem::path temp_dir() {
  const char* shm = "/dev/shm";
  std::error_code ec;
  if (access(shm, W_OK | X_OK) == 0 && std::filesystem::is_directory(shm, ec)) return shm;
  return std::filesystem::temp_directory_path();
}

// One file per process, rewritten for every input and removed at exit.
struct TempFile {
  std::string path = (temp_dir() / ("cgemm-fuzz-" + std::to_string(getpid()) + ".ini")).string();
  ~TempFile() { std::remove(path.c_str()); }
};

const std::string& ini_path() {
  static const TempFile file;
  return file.path;
}

bool write_file(const std::string& path, const char* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data, static_cast<std::streamsize>(size));
  return static_cast<bool>(f);
}

launcher::ParseResult parse_file(const std::string& path) {
  const char* argv[] = {"cgemm-run", "--config", path.c_str()};
  return launcher::parse_run_config(3, argv);
}

}  // namespace

std::string check_run_config(const uint8_t* data, size_t size) {
  const std::string& path = ini_path();
  if (!write_file(path, reinterpret_cast<const char*>(data), size)) return "";  // not ours
  std::string first;
  try {
    launcher::ParseResult r = parse_file(path);
    first = launcher::to_ini(r.config);
    for (int world : {1, 2, 4, 6}) {
      launcher::RunConfig cfg = r.config;
      try {
        launcher::resolve_mesh(cfg, world);
      } catch (const launcher::OptionError&) {
      }
    }
  } catch (const launcher::OptionError&) {
    return "";  // a bad config, reported as cgemm-run reports it
  } catch (const std::exception& e) {
    return std::string("parse_run_config threw a non-OptionError: ") + e.what();
  }
  // What to_ini prints is valid input to --config and means the same.
  if (!write_file(path, first.data(), first.size())) return "";
  try {
    const std::string second = launcher::to_ini(parse_file(path).config);
    // The "# read from FILE" comment names the same file both times.
    if (second != first) return "to_ini does not round-trip:\n" + first + "---\n" + second;
  } catch (const std::exception& e) {
    return std::string("to_ini output does not parse: ") + e.what() + "\n" + first;
  }
  return "";
}

}  // namespace cgemm::fuzz

#ifdef CGEMM_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string why = cgemm::fuzz::check_run_config(data, size);
  if (!why.empty()) {
    std::fprintf(stderr, "fuzz_run_config: %s\n", why.c_str());
    std::abort();
  }
  return 0;
}
#endif
