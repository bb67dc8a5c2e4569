#pragma once
// What every cgemm job program (cgemm-run, cgemm-bench) does around the library: run its
// phases (parse, plan, outputs, mesh, memory, run, check, report), each ending in the
// all-ranks agreement on errors; print from rank 0; time iterations; hold backend buffers.

#include <functional>
#include <string>
#include <vector>

#include <memory>

#include "cgemm/runtime/backend.hpp"
#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/memory_check.hpp"
#include "shared_options.hpp"

namespace cgemm::launcher {

constexpr int kExitUsage = 2;        // bad options / config / plan
constexpr int kExitCheckFailed = 3;  // overlapped result differs from the reference
constexpr int kExitDiverged = 5;     // cgemm-train: a step's loss is not finite

/// The program name used in messages ("cgemm-run", "cgemm-bench").
void set_program_name(std::string name);
int world_rank();
int world_size();

/// Collective over MPI_COMM_WORLD: true when any rank has a non-empty error; the lowest such
/// rank prints it as "<program>: error: <message>" (one message for the whole job).
bool any_rank_failed(const std::string& error);

/// One phase of the job, run on every rank: an exception it throws is this rank's error, and
/// the ranks agree as any_rank_failed does. True when every rank finished the phase.
bool all_ranks_ok(const std::function<void()>& phase);

/// Every rank's host name, in world-rank order, on every rank (collective over
/// MPI_COMM_WORLD): the one place the job learns where its ranks run.
std::vector<std::string> host_names();

/// mesh: `ctx` becomes a Context of `overlap` on the dp x tp mesh under opts' backend rule:
/// kept when it has these overlap options, else built anew (the old one released first).
/// The rule is decided alike on every rank, so a refusal is one message (false). Any other
/// error is one rank's: it aborts the job.
bool context_for(const SharedOptions& opts, int tp, const OverlapOptions& overlap,
                 std::unique_ptr<Context>& ctx);

/// For errors of one rank: prints the rank and the message, then aborts the whole job so no
/// rank waits forever in a collective.
[[noreturn]] void abort_job(const std::string& error);

/// Prints a line on rank 0 (flushed: progress shows as it happens).
void say(const std::string& line);

double median(std::vector<double> v);

/// Times `body` once per iteration (synchronized start on all ranks); each sample is the
/// slowest rank's time in ms.
std::vector<double> time_iterations(Backend& be, int iterations, const std::function<void()>& body);

/// A backend allocation released with its scope.
struct Buffer {
  Backend& be;
  void* p = nullptr;
  Buffer(Backend& b, size_t bytes) : be(b), p(b.allocate(bytes)) {}
  ~Buffer() { be.release(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

/// check_memory (cgemm/runtime/memory_check.hpp) of `mine` bytes on this rank, summed as the
/// memory check before a run sums them: over the ranks of this host on the CPU backend, the
/// largest need of the host times the ranks sharing this GPU on the CUDA backend. Collective
/// over the context's node communicator; the verdict differs between hosts.
MemoryCheck check_shared_memory(const Context& ctx, int64_t mine);

}  // namespace cgemm::launcher
