#include "cgemm/core/watchdog.hpp"

#include <unistd.h>

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
};

State& state() {
  static State* s = new State;  // never destroyed: the thread may outlive static destructors
  return *s;
}

[[noreturn]] void fire(const Scope& scope, double waited) {
  State& s = state();
  // Describing the wait, the hooks and the ender may block on a broken peer or GPU
  // themselves: a last resort ends the process in any case.
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    _exit(kExitTimeout);
  }).detach();
  std::string program;
  int rank = -1;
  double limit = 0.0;
  std::function<void()> end;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    program = s.program;
    rank = s.rank;
    limit = s.timeout_s;
    end = s.end;
  }
  std::string what;
  try {
    what = scope.what ? scope.what() : "an unnamed wait";
  } catch (...) {
    what = "a wait that could not be described";
  }
  std::fprintf(stderr, "%s: error: rank %d: timed out after %.1f s waiting for %s (timeout %g s)\n",
               program.c_str(), rank, waited, what.c_str(), limit);
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
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Scope open;
    double waited = 0.0;
    {
      std::lock_guard<std::mutex> lock(s.mu);
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
    std::thread(watch).detach();
  }
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
