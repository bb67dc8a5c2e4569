#include "cgemm/core/watchdog.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace cgemm::watchdog {

namespace {

using Clock = std::chrono::steady_clock;

struct Scope {
  std::function<std::string()> what;
  Clock::time_point since;
};

struct State {
  std::mutex mu;
  double timeout_s = 0.0;
  int rank = -1;
  std::string program = "cgemm";
  std::function<void()> end;
  bool running = false;
  bool firing = false;
  int next_id = 0;
  std::map<int, Scope> scopes;  // open scopes by id; the highest id is the innermost
  std::map<int, std::function<void()>> hooks;
  PeerChannel channel;  // no tell: none installed
  Clock::time_point started;
};

State& state() {
  static State* s = new State;  // never destroyed: the thread may outlive static destructors
  return *s;
}

// "world ranks 1, 3" from `ranks`, at most kShown of them named.
std::string rank_list(const std::vector<int>& ranks, const PeerChannel& channel, bool hosts) {
  constexpr size_t kShown = 8;
  std::string text;
  for (size_t i = 0; i < ranks.size() && i < kShown; ++i) {
    text += (i ? ", " : "") + (hosts ? channel.describe(ranks[i]) : std::to_string(ranks[i]));
  }
  if (ranks.size() > kShown) text += " and " + std::to_string(ranks.size() - kShown) + " more";
  return text;
}

// The election of the reporter over the channel (set_peer_channel): true when this rank is to
// print the line, with `others` the ranks that timed out too and those that did not.
bool elect(const PeerChannel& channel, int rank, std::string& others) {
  std::vector<int> heard;
  bool reported = false;
  try {
    channel.tell(false);
    // A rank whose wait hangs on the same stall times out within moments of this one: 1 s
    // hears from all of them.
    const auto until = Clock::now() + std::chrono::seconds(1);
    while (!reported && Clock::now() < until) {
      channel.hear(heard, reported);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (...) {
    return true;  // no agreement possible: say it here
  }
  bool lowest = true;
  for (int r : heard) lowest = lowest && rank < r;
  if (reported || !lowest) {
    // Another rank reports and ends the job; should it be gone before that, this one reports.
    std::this_thread::sleep_for(std::chrono::seconds(6));
  } else {
    try {
      channel.tell(true);
    } catch (...) {
    }
  }
  std::vector<int> timed_out = heard, not_timed_out;
  std::sort(timed_out.begin(), timed_out.end());
  for (int r = 0; r < channel.size; ++r) {
    if (r != rank && !std::binary_search(timed_out.begin(), timed_out.end(), r)) {
      not_timed_out.push_back(r);
    }
  }
  if (!timed_out.empty())
    others += "; timed out too: world ranks " + rank_list(timed_out, channel, false);
  if (!not_timed_out.empty()) {
    others +=
        "; not timed out (stalled, or busy elsewhere): " + rank_list(not_timed_out, channel, true);
  }
  return true;
}

[[noreturn]] void fire(const Scope& scope, double waited) {
  State& s = state();
  // Describing the wait, the election, the hooks and the ender may block on a broken peer or
  // GPU themselves: a last resort ends the process in any case (after the election's 7 s).
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(15));
    _exit(kExitTimeout);
  }).detach();
  std::string program;
  int rank = -1;
  double limit = 0.0;
  std::function<void()> end;
  PeerChannel channel;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    program = s.program;
    rank = s.rank;
    limit = s.timeout_s;
    end = s.end;
    channel = s.channel;
  }
  std::string what;
  try {
    what = scope.what ? scope.what() : "an unnamed wait";
  } catch (...) {
    what = "a wait that could not be described";
  }
  std::string others, me = "rank " + std::to_string(rank);
  if (channel.tell) {
    elect(channel, rank, others);
    try {
      const std::string d = channel.describe(rank);  // "world rank R (host H)"
      me = d.rfind("world ", 0) == 0 ? d.substr(6) : d;
    } catch (...) {
    }
  }
  std::fprintf(stderr, "%s: error: %s: timed out after %.1f s waiting for %s (timeout %g s)%s\n",
               program.c_str(), me.c_str(), waited, what.c_str(), limit, others.c_str());
  std::fflush(stderr);
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (auto& [id, h] : s.hooks) hooks.push_back(h);
  }
  for (auto& h : hooks) {
    try {
      h();
    } catch (...) {
    }
  }
  if (end) end();
  _exit(kExitTimeout);
}

void watch() {
  State& s = state();
  constexpr auto kTick = std::chrono::milliseconds(100);
  // From start(), not from this thread's first moment: a process frozen before the thread ran
  // is frozen all the same.
  Clock::time_point last;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    last = s.started;
  }
  for (;;) {
    std::this_thread::sleep_for(kTick);
    Scope open;
    double waited = 0.0;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      // A tick a second late means the whole process was frozen (SIGSTOP, a debugger), this
      // thread too: that time was not spent waiting for a peer.
      const Clock::time_point now = Clock::now();
      const Clock::duration frozen = now - last - kTick;
      last = now;
      if (frozen > std::chrono::seconds(1)) {
        for (auto& [id, scope] : s.scopes) scope.since += frozen;
      }
      const double limit = s.timeout_s;
      if (limit <= 0.0 || s.scopes.empty()) continue;
      // Decided under the lock: a wait that ended a moment ago is not a timeout.
      open = s.scopes.rbegin()->second;
      waited = std::chrono::duration<double>(Clock::now() - open.since).count();
      if (waited <= limit) continue;
      s.firing = true;  // from here on no scope closes: its captures stay alive
    }
    fire(open, waited);
  }
}

}  // namespace

void start(double timeout_s, int rank, std::string program, std::function<void()> end) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.timeout_s = timeout_s;
  s.rank = rank;
  if (!program.empty()) s.program = std::move(program);
  s.end = std::move(end);
  if (!s.running) {
    s.running = true;
    s.started = Clock::now();
    std::thread(watch).detach();
  }
}

void set_peer_channel(PeerChannel channel) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.channel = std::move(channel);
}

bool running() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.running;
}

double timeout_s() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.timeout_s;
}

WaitScope::WaitScope(std::function<std::string()> what) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  id_ = s.next_id++;
  s.scopes[id_] = Scope{std::move(what), Clock::now()};
}

WaitScope::WaitScope(std::string what)
    : WaitScope(std::function<std::string()>([w = std::move(what)] { return w; })) {}

WaitScope::~WaitScope() {
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  // While the watchdog fires, the process is about to end: keep what it describes alive.
  if (s.firing) {
    lock.unlock();
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  s.scopes.erase(id_);
}

int add_abort_hook(std::function<void()> hook) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const int id = s.next_id++;
  s.hooks[id] = std::move(hook);
  return id;
}

void remove_abort_hook(int id) noexcept {
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  // While the watchdog fires it may be running this hook: the process is about to end.
  if (s.firing) {
    lock.unlock();
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  s.hooks.erase(id);
}

}  // namespace cgemm::watchdog
