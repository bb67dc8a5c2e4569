#include "cgemm/core/process_timer.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>

#include "cgemm/core/watchdog.hpp"

namespace cgemm {

namespace {

// -1 unless `text` is one whole number >= 0 (no list, no unit).
double plain_seconds(const char* text) {
  if (text == nullptr || *text == '\0') return -1.0;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(v) || v < 0.0) return -1.0;
  // Beyond the option's bound the parser refuses it after MPI_Init; until then the default.
  if (v > kMaxTimeoutSeconds) return -1.0;
  return v;
}

std::string host() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

}  // namespace

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    errno = 0;
    const long r = std::strtol(v, &end, 10);
    if (*end == '\0' && errno == 0 && r >= 0 && r <= INT_MAX) return static_cast<int>(r);
  }
  return -1;
}

double timeout_from_args(int argc, char** argv) {
  double found = -1.0;
  constexpr std::string_view kName = "--timeout";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == kName) {
      found = i + 1 < argc ? plain_seconds(argv[i + 1]) : -1.0;
    } else if (arg.size() > kName.size() && arg.substr(0, kName.size()) == kName &&
               arg[kName.size()] == '=') {
      found = plain_seconds(argv[i] + kName.size() + 1);
    }
  }
  return found;
}

struct ProcessTimer::Armed {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
};

ProcessTimer::ProcessTimer(std::string program, std::string call, double timeout_s,
                           std::string source, int rank) {
  if (!(timeout_s > 0.0)) return;
  // Before MPI_Init the launcher's number: the line names the rank, and the ranks stagger, so
  // a stall every rank meets prints one line, not one "rank ?" line per rank.
  if (rank < 0) rank = launcher_rank();
  armed_ = std::make_shared<Armed>();
  // The line is built now: at the deadline the process may be in any state.
  char line[1024];
  std::snprintf(line, sizeof(line),
                "%s: error: rank %s (host %s, pid %ld): %s did not return within %g s (%s)\n",
                program.c_str(), rank < 0 ? "?" : std::to_string(rank).c_str(), host().c_str(),
                static_cast<long>(getpid()), call.c_str(), timeout_s, source.c_str());
  // Detached, holding its own reference: the destructor never waits for it, so a timer thread
  // that is late to wake cannot delay the call's return.
  // Rank 0 fires first, the others 3 s later (mpirun takes about a second to end the others
  // after one exits): all ranks time out together when one stalls in a call that waits for
  // every rank (MPI_Finalize), so the job prints one line rather than one per rank (and mpirun
  // 4.1 has been seen to crash when every rank exits at once inside MPI_Finalize). The others'
  // timers stay the backstop for a rank 0 that is gone.
  const double stagger = rank > 0 ? 3.0 : 0.0;
  std::thread([armed = armed_, text = std::string(line), wait_s = timeout_s + stagger] {
    std::unique_lock<std::mutex> lock(armed->mu);
    // steady_clock counts nanoseconds in 64 bits (about 292 years): now() + a longer wait
    // overflows, and the wait returned at once again and again, holding the lock the
    // destructor needs. So long a wait is no deadline at all.
    constexpr double kNoDeadlineBeyondS = 10.0 * 365.25 * 24 * 3600;
    if (!(wait_s <= kNoDeadlineBeyondS)) {
      armed->cv.wait(lock, [&] { return armed->done; });
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
    if (armed->cv.wait_until(lock, deadline, [&] { return armed->done; })) return;
    // write(2), not stdio: another thread may hold stderr's lock inside the stalled call.
    [[maybe_unused]] const ssize_t n = write(STDERR_FILENO, text.data(), text.size());
    _exit(watchdog::kExitTimeout);
  }).detach();
}

ProcessTimer::~ProcessTimer() {
  if (!armed_) return;
  {
    std::lock_guard<std::mutex> lock(armed_->mu);
    armed_->done = true;
  }
  armed_->cv.notify_all();
}

}  // namespace cgemm
