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
  std::string what;
  try {
    what = scope.what ? scope.what() : "an unnamed wait";
  } catch (...) {
    what = "a wait that could not be described";
  }
  std::fprintf(stderr, "%s: error: rank %d: timed out after %.1f s waiting for %s (timeout %g s)\n",
               s.program.c_str(), s.rank, waited, what.c_str(), s.timeout_s);
  std::fflush(stderr);
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (auto& [id, h] : s.hooks) hooks.push_back(h);
  }
  // The hooks and the ender may block on a broken peer themselves: a last resort ends the
  // process in any case.
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    _exit(kExitTimeout);
  }).detach();
  for (auto& h : hooks) {
    try {
      h();
    } catch (...) {
    }
  }
  if (s.end) s.end();
  _exit(kExitTimeout);
}

void watch() {
  State& s = state();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Scope open;
    double waited = 0.0, limit = 0.0;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      limit = s.timeout_s;
      if (limit <= 0.0 || s.scopes.empty()) continue;
      open = s.scopes.rbegin()->second;
      waited = std::chrono::duration<double>(Clock::now() - open.since).count();
    }
    if (waited > limit) fire(open, waited);
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
  std::lock_guard<std::mutex> lock(s.mu);
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
  std::lock_guard<std::mutex> lock(s.mu);
  s.hooks.erase(id);
}

}  // namespace cgemm::watchdog
