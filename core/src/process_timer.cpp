#include "cgemm/core/process_timer.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <time.h>
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

// ---- The guard process (start_process_guard) ----

// What the parent tells the guard: arm (timeout_s > 0: the deadline of the call that starts
// now, and the line to print) or disarm (timeout_s 0). One write of less than PIPE_BUF bytes,
// so it arrives whole.
struct GuardMessage {
  double timeout_s = 0.0;
  char line[1024] = {};
};
static_assert(sizeof(GuardMessage) < PIPE_BUF, "one atomic write");

int guard_fd = -1;  // the write end of the pipe to the guard; -1: no guard

double monotonic_s() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Whether `pid` is stopped (SIGSTOP, SIGTSTP, a debugger): /proc/PID/stat's state, the field
// after the command name in parentheses. Only async-signal-safe calls: the guard is a fork.
bool stopped(pid_t pid) {
  char path[64] = "/proc/";
  char digits[24];
  int n = 0;
  for (long v = pid; v > 0 && n < 23; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  size_t at = 6;
  while (n > 0) path[at++] = digits[--n];
  const char tail[] = "/stat";
  for (size_t i = 0; i < sizeof tail; ++i) path[at++] = tail[i];
  const int fd = open(path, O_RDONLY);
  if (fd < 0) return false;
  char buf[512];
  const ssize_t len = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (len <= 0) return false;
  ssize_t close_paren = -1;
  for (ssize_t i = 0; i < len; ++i) {
    if (buf[i] == ')') close_paren = i;
  }
  if (close_paren < 0 || close_paren + 2 >= len) return false;
  const char state = buf[close_paren + 2];
  return state == 'T' || state == 't';
}

// The guard: a process of its own, so it runs on while the rank is stopped. It ends when the
// rank closes the pipe (the rank exited, however). While a call is armed and past its
// deadline, a rank that is stopped cannot end itself (its timer thread is frozen with it) and
// would hold mpirun forever after its peers exited: the guard prints the line and ends it
// with SIGKILL. A rank that runs is left to its own timer. Async-signal-safe calls only.
[[noreturn]] void guard_main(int fd, pid_t rank_pid) {
  GuardMessage armed;
  double deadline = -1.0;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, deadline < 0 ? -1 : 1000);
    if (r > 0) {
      GuardMessage m;
      const ssize_t got = read(fd, &m, sizeof m);
      if (got <= 0) _exit(0);  // the rank is gone
      if (got != static_cast<ssize_t>(sizeof m)) continue;
      armed = m;
      deadline = m.timeout_s > 0.0 ? monotonic_s() + m.timeout_s : -1.0;
      continue;
    }
    if (deadline < 0 || monotonic_s() < deadline || !stopped(rank_pid)) continue;
    size_t n = 0;
    while (n < sizeof armed.line && armed.line[n] != '\0') ++n;
    [[maybe_unused]] const ssize_t w = write(STDERR_FILENO, armed.line, n);
    kill(rank_pid, SIGKILL);
    _exit(0);
  }
}

void tell_guard(double timeout_s, const std::string& line) {
  if (guard_fd < 0) return;
  GuardMessage m;
  m.timeout_s = timeout_s;
  std::snprintf(m.line, sizeof m.line, "%s", line.c_str());
  [[maybe_unused]] const ssize_t n = write(guard_fd, &m, sizeof m);
}

}  // namespace

void start_process_guard() {
  if (guard_fd >= 0) return;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  const pid_t rank_pid = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return;  // no guard: the timers alone, as before
  }
  if (pid == 0) {
    close(fds[1]);
    // Holds no output of the rank's: mpirun stops forwarding it when the rank's writers close.
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, STDIN_FILENO);
      dup2(null, STDOUT_FILENO);
    }
    guard_main(fds[0], rank_pid);
  }
  close(fds[0]);
  guard_fd = fds[1];
}

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
  if (guard_fd >= 0) {
    char stopped_line[1200];
    std::string text = line;
    if (!text.empty() && text.back() == '\n') text.pop_back();
    std::snprintf(stopped_line, sizeof stopped_line,
                  "%s: the process is stopped (SIGSTOP, SIGTSTP or a debugger) and cannot end "
                  "itself: ended with SIGKILL\n",
                  text.c_str());
    tell_guard(timeout_s + stagger, stopped_line);
  }
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
    // Time the process spent frozen (SIGSTOP: this thread's ticks stop too) is not the call's,
    // as for the watchdog: a rank resumed after a long stop must not blame itself for a call
    // that returns at once (its guard process ends it if it stays stopped).
    constexpr auto kTick = std::chrono::milliseconds(250);
    constexpr double kFrozenGapS = 1.0;
    double counted_s = 0.0;
    auto last = std::chrono::steady_clock::now();
    while (counted_s < wait_s) {
      if (armed->cv.wait_for(lock, kTick, [&] { return armed->done; })) return;
      const auto now = std::chrono::steady_clock::now();
      const double gap = std::chrono::duration<double>(now - last).count();
      last = now;
      counted_s += gap > kFrozenGapS ? std::chrono::duration<double>(kTick).count() : gap;
    }
    // write(2), not stdio: another thread may hold stderr's lock inside the stalled call.
    [[maybe_unused]] const ssize_t n = write(STDERR_FILENO, text.data(), text.size());
    _exit(watchdog::kExitTimeout);
  }).detach();
}

ProcessTimer::~ProcessTimer() {
  if (!armed_) return;
  tell_guard(0.0, "");
  {
    std::lock_guard<std::mutex> lock(armed_->mu);
    armed_->done = true;
  }
  armed_->cv.notify_all();
}

}  // namespace cgemm
