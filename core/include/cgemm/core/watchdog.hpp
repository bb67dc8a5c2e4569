#pragma once
// The watchdog: no wait of cgemm lasts forever. Every place where the host blocks on a peer or
// on the GPU (an MPI request or collective, a barrier, a CUDA synchronize that waits for a
// copy-engine flag or an NCCL kernel, the bootstrap) marks itself with a WaitScope. One thread
// per process, as NCCL's async error handling and PyTorch's NCCL watchdog do, checks the
// innermost open scope; when it has been open longer than the timeout it prints one line
//   <program>: error: rank R: timed out after T s waiting for <what>
// (one line per stall when the ranks have a PeerChannel: set_peer_channel). Time this process
// spent frozen (SIGSTOP, a debugger: the watchdog's own ticks stop too) is not waiting: a
// rank stopped mid-wait does not blame its peers for its own stop when it resumes.
// where <what> names the collective GEMM, the step and the peer when the scope knows them, runs
// the abort hooks (ncclCommAbort of every live NCCL communicator) and ends the process through
// the ender given to start() (MPI_Abort, so every rank ends). No destructor runs after that.

#include <functional>
#include <string>
#include <vector>

namespace cgemm {

namespace watchdog {

/// Exit status of a job ended by the watchdog.
constexpr int kExitTimeout = 4;

/// Starts the thread once per process (later calls only change the settings): waits longer
/// than `timeout_s` seconds end the process (<= 0: never). `rank` and `program` go into the
/// line (an empty `program` keeps the one set before, "cgemm" at first); `end` must not return
/// (it ends the job; e.g. MPI_Abort, then _exit).
void start(double timeout_s, int rank, std::string program, std::function<void()> end);
/// The timeout in force (0 before start()).
double timeout_s();
/// Whether start() was called in this process.
bool running();

/// Marks a blocking wait while it lives; `what` is called (from the watchdog's thread, only on
/// a timeout) to say what was waited for. Scopes nest: the innermost open one is watched.
class WaitScope {
 public:
  explicit WaitScope(std::function<std::string()> what);
  explicit WaitScope(std::string what);
  ~WaitScope();
  WaitScope(const WaitScope&) = delete;
  WaitScope& operator=(const WaitScope&) = delete;

 private:
  int id_;
};

/// How the timed-out ranks agree that one of them reports (one line per stall, not one per
/// rank): messages between the ranks on a channel of their own (collective/watchdog_channel.hpp
/// gives one over MPI). Each function is called from the watchdog's thread and must not block.
struct PeerChannel {
  int size = 0;                             // ranks on the channel, `rank` of start() among them
  std::function<void(bool reported)> tell;  // to every other rank: timed out / reported
  std::function<void(std::vector<int>& timed_out, bool& reported)> hear;  // what arrived since
  std::function<std::string(int rank)> describe;                          // "world rank R (host H)"
};
/// Installs the channel (once the ranks have one; before, every rank that times out reports).
/// With a channel, a rank whose wait timed out tells the others and listens 1 s: the lowest
/// timed-out rank reports, naming the ranks that timed out too and those that did not (the
/// stalled ones, or ranks busy elsewhere); a rank that heard another report stays silent and is
/// ended by the reporter (after 6 s without that end it reports itself).
void set_peer_channel(PeerChannel channel);

/// Registers `hook` to run on a timeout before the process ends (e.g. ncclCommAbort); returns
/// an id for remove_abort_hook().
int add_abort_hook(std::function<void()> hook);
void remove_abort_hook(int id) noexcept;

}  // namespace watchdog
}  // namespace cgemm
