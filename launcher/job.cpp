#include "job.hpp"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <iostream>
#include <string>

#include "cgemm/core/watchdog.hpp"

namespace cgemm::launcher {

namespace {
std::string& program() {
  static std::string name = "cgemm";
  return name;
}
}  // namespace

void set_program_name(std::string name) { program() = std::move(name); }

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

bool any_rank_failed(const std::string& error) {
  const int me = world_rank();
  int first = error.empty() ? INT_MAX : me;
  const watchdog::WaitScope wait("the other ranks, to agree whether any failed");
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first == INT_MAX) return false;
  if (first == me) {
    std::cerr << program() << ": error: " << error << "\n";
    std::cerr.flush();
  }
  return true;
}

void abort_job(const std::string& error) {
  std::cerr << program() << ": rank " << world_rank() << ": error: " << error << "\n"
            << program() << ": aborting the job so no rank waits forever\n";
  std::cerr.flush();
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

void say(const std::string& line) {
  if (world_rank() == 0) {
    std::cout << line << "\n";
    std::cout.flush();
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<double> time_iterations(Backend& be, int iterations,
                                    const std::function<void()>& body) {
  std::vector<double> samples;
  for (int i = 0; i < iterations; ++i) {
    be.synchronize();
    {
      const watchdog::WaitScope wait("the barrier before timed iteration " + std::to_string(i));
      MPI_Barrier(MPI_COMM_WORLD);
    }
    double ms = be.time_ms(body);
    const watchdog::WaitScope wait("the other ranks' time of iteration " + std::to_string(i));
    MPI_Allreduce(MPI_IN_PLACE, &ms, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    samples.push_back(ms);
  }
  return samples;
}

}  // namespace cgemm::launcher
