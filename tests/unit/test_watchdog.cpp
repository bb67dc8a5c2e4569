// The watchdog (cgemm/core/watchdog.hpp) and the process timers (cgemm/core/process_timer.hpp):
// each case runs in a child process (death tests), since a timeout ends the process.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "cgemm/core/process_timer.hpp"
#include "cgemm/core/watchdog.hpp"

namespace cgemm {
namespace {

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

int args_timeout(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return static_cast<int>(10 * timeout_from_args(static_cast<int>(argv.size()), argv.data()));
}

TEST(ProcessTimer, TimeoutFromArgs) {
  EXPECT_EQ(args_timeout({"p", "--timeout", "3"}), 30);
  EXPECT_EQ(args_timeout({"p", "--timeout=2.5"}), 25);
  EXPECT_EQ(args_timeout({"p", "--timeout", "3", "--timeout", "0"}), 0);  // the last counts
  EXPECT_EQ(args_timeout({"p"}), -10);
  EXPECT_EQ(args_timeout({"p", "--timeout", "3,5"}), -10);  // a sweep list: after MPI_Init
  EXPECT_EQ(args_timeout({"p", "--timeout", "-1"}), -10);
  EXPECT_EQ(args_timeout({"p", "--timeout"}), -10);
  EXPECT_EQ(args_timeout({"p", "--timeouts=3"}), -10);
  // Beyond the option's bound: the default until the parser refuses it.
  EXPECT_EQ(args_timeout({"p", "--timeout", "1e7"}), 100'000'000);
  EXPECT_EQ(args_timeout({"p", "--timeout", "1e19"}), -10);
}

TEST(ProcessTimerDeathTest, FiresOnceWithTheCall) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const ProcessTimer timer("prog", "MPI_Init", 0.3, "--timeout");
        sleep_s(3.0);
        _exit(0);
      },
      testing::ExitedWithCode(watchdog::kExitTimeout),
      "^prog: error: rank \\? \\(host [^,]+, pid [0-9]+\\): MPI_Init did not return within 0.3 s "
      "\\(--timeout\\)\n$");
}

TEST(ProcessTimerDeathTest, DisarmedWhenTheCallReturns) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        { const ProcessTimer timer("prog", "MPI_Finalize", 0.2, "--timeout", 0); }
        sleep_s(0.6);
        _exit(0);
      },
      testing::ExitedWithCode(0), "^$");
}

// A timeout beyond what steady_clock can add to now() spun holding the timer's lock, and the
// destructor waited for it forever: it must mean "no deadline" and disarm at once.
TEST(ProcessTimerDeathTest, HugeTimeoutNeverSpinsNorFires) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        alarm(5);  // a hang ends the child with SIGALRM
        for (const double t : {1e19, 1e300, 1e9}) {
          const ProcessTimer timer("prog", "MPI_Init", t, "--timeout");
          sleep_s(0.2);
        }
        _exit(0);
      },
      testing::ExitedWithCode(0), "^$");
}

// The state letter of /proc/PID/stat ('T' when stopped), '?' when it cannot be read.
char process_state(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return '?';
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  // "PID (COMM) S ...": COMM may hold blanks and parentheses, so the state follows the last ')'.
  const std::string stat(buf, n);
  const size_t close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? '?' : stat[close + 2];
}

// A rank stopped in the middle of a wait (SIGSTOP, then SIGCONT after more than the timeout)
// was frozen, not waiting: it must not time out and blame its peers when it resumes.
// The helper child measures the freeze from the moment the rank is seen stopped, not from its
// own start: on a loaded machine the rank once reached SIGSTOP after the helper's SIGCONT, stayed
// stopped, and died of the SIGHUP the kernel sends to an orphaned stopped process group when
// the helper exited. The helper also exits only once the rank runs again. The timeout (2 s)
// leaves a loaded machine room for the 0.5 s of real waiting after the resume.
TEST(WatchdogDeathTest, FrozenTimeIsNotWaiting) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        // Should the helper still end while this process is stopped (a state it could not
        // read), the kernel sends the orphaned group SIGHUP then SIGCONT: only the SIGCONT is
        // this test's business (it failed once so, under ctest -j2 on a loaded machine).
        signal(SIGHUP, SIG_IGN);
        watchdog::start(2.0, 0, "prog", [] { _exit(watchdog::kExitTimeout); });
        const pid_t me = getpid();
        if (fork() == 0) {
          for (int i = 0; i < 6000 && process_state(me) != 'T'; ++i) sleep_s(0.01);
          sleep_s(3.0);  // frozen for longer than the timeout
          // Until the process is seen running ('?': its state could not be read: again).
          for (int i = 0; i < 6000; ++i) {
            const char state = process_state(me);
            if (state != 'T' && state != '?') break;
            kill(me, SIGCONT);
            sleep_s(0.01);
          }
          _exit(0);
        }
        {
          const watchdog::WaitScope wait("a peer");
          raise(SIGSTOP);
          sleep_s(0.5);
        }
        _exit(0);
      },
      testing::ExitedWithCode(0), "^$");
}

TEST(WatchdogDeathTest, TimesOutWithoutAChannel) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        watchdog::start(0.3, 5, "prog", [] { _exit(watchdog::kExitTimeout); });
        const watchdog::WaitScope wait("a peer");
        sleep_s(3.0);
        _exit(0);
      },
      testing::ExitedWithCode(watchdog::kExitTimeout),
      "^prog: error: rank 5: timed out after 0.[0-9] s waiting for a peer \\(timeout 0.3 s\\)\n$");
}

// A fake channel of 4 ranks: rank 3 timed out too, ranks 0 and 2 did not. Rank 1 is the lowest
// timed-out rank heard: it reports, once, naming both groups.
TEST(WatchdogDeathTest, LowestTimedOutRankReports) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        watchdog::PeerChannel channel;
        channel.size = 4;
        channel.tell = [](bool) {};
        channel.hear = [](std::vector<int>& timed_out, bool&) {
          if (timed_out.empty()) timed_out.push_back(3);
        };
        channel.describe = [](int r) {
          return "world rank " + std::to_string(r) + " (host h" + std::to_string(r) + ")";
        };
        watchdog::set_peer_channel(channel);
        watchdog::start(0.3, 1, "prog", [] { _exit(watchdog::kExitTimeout); });
        const watchdog::WaitScope wait("a peer");
        sleep_s(5.0);
        _exit(0);
      },
      testing::ExitedWithCode(watchdog::kExitTimeout),
      "^prog: error: rank 1 \\(host h1\\): timed out after 0.[0-9] s waiting for a peer \\(timeout "
      "0.3 s\\); timed out too: world ranks 3; not timed out \\(stalled, or busy elsewhere\\): "
      "world rank 0 \\(host h0\\), world rank 2 \\(host h2\\)\n$");
}

// A rank that hears another rank reported stays silent: the reporter ends the job.
TEST(WatchdogDeathTest, SilentWhenAnotherRankReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        watchdog::PeerChannel channel;
        channel.size = 2;
        channel.tell = [](bool) {};
        channel.hear = [](std::vector<int>& timed_out, bool& reported) {
          timed_out = {0};
          reported = true;
        };
        channel.describe = [](int r) { return "world rank " + std::to_string(r) + " (host h)"; };
        watchdog::set_peer_channel(channel);
        watchdog::start(0.3, 1, "prog", [] { _exit(watchdog::kExitTimeout); });
        const watchdog::WaitScope wait("a peer");
        sleep_s(2.0);  // the reporter's end, in a job, comes before the silent rank's 6 s
        _exit(0);
      },
      testing::ExitedWithCode(0), "^$");
}

}  // namespace
}  // namespace cgemm
