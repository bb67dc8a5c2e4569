#pragma once
// What every cgemm job program (cgemm-run, cgemm-bench) does around the library: agree on
// errors across ranks, print from rank 0, time iterations, hold backend buffers.

#include <functional>
#include <string>
#include <vector>

#include "cgemm/runtime/backend.hpp"

namespace cgemm::launcher {

constexpr int kExitUsage = 2;        // bad options / config / plan
constexpr int kExitCheckFailed = 3;  // overlapped result differs from the reference

/// The program name used in messages ("cgemm-run", "cgemm-bench").
void set_program_name(std::string name);
int world_rank();

/// Collective over MPI_COMM_WORLD: true when any rank has a non-empty error; the lowest such
/// rank prints it as "<program>: error: <message>" (one message for the whole job).
bool any_rank_failed(const std::string& error);

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

}  // namespace cgemm::launcher
