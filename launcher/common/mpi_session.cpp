#include "mpi_session.hpp"

#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/collective/watchdog_channel.hpp"
#include "cgemm/core/env.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/launch_env.hpp"
#include "cgemm/core/process_timer.hpp"
#include "cgemm/core/watchdog.hpp"
#include "job.hpp"

namespace cgemm::launcher {

namespace {

constexpr double kDefaultTimeoutS = 300.0;  // --timeout's default (shared_options.cpp)

struct Session {
  std::string program = "cgemm";
  double timeout_s = kDefaultTimeoutS;
  std::string source = "the default --timeout";
};

Session& session() {
  static Session s;
  return s;
}

// The test knob (env::kTestStall): the rank sleeps inside the timed region, as a hung MPI_Init
// or MPI_Finalize would. "init": every rank before MPI_Init (no rank number yet); "finalize:R":
// world rank R before MPI_Finalize.
void stall_if_asked(bool init, int rank) {
  const std::optional<std::string> v = env_text(env::kTestStall);
  if (!v) return;
  bool stall = false;
  if (*v == "init") {
    stall = init;
  } else if (v->rfind("finalize_stop:", 0) == 0) {
    return;  // stop_asked, after MPI_Finalize
  } else if (v->rfind("finalize:", 0) == 0) {
    try {
      size_t used = 0;
      const int r = std::stoi(v->substr(9), &used);
      if (used != v->size() - 9) throw Error("");
      stall = !init && r == rank;
    } catch (const std::exception&) {
      throw Error("CGEMM_TEST_STALL='" + *v +
                  "': expected init, finalize:RANK or finalize_stop:RANK");
    }
  } else {
    throw Error("CGEMM_TEST_STALL='" + *v +
                "': expected init, finalize:RANK or finalize_stop:RANK");
  }
  while (stall) std::this_thread::sleep_for(std::chrono::seconds(1));
}

bool stop_asked(int rank) {
  const std::optional<std::string> v = env_text(env::kTestStall);
  return v && *v == "finalize_stop:" + std::to_string(rank);
}

}  // namespace

bool init_mpi(int& argc, char**& argv, const char* program) {
  Session& s = session();
  s.program = program;
  set_program_name(program);
  if (const double t = timeout_from_args(argc, argv); t >= 0.0) {
    s.timeout_s = t;
    s.source = "--timeout";
  } else {
    s.source = "the default --timeout; a --timeout from --config or a sweep counts after MPI_Init";
  }
  int provided = MPI_THREAD_SINGLE;
  start_process_guard();  // before MPI_Init: forking after it is unsafe
  const ProcessTimer timer(s.program, "MPI_Init", s.timeout_s, s.source);
  try {
    stall_if_asked(true, -1);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    std::exit(kExitUsage);
  }
  // Threads: the watchdog ends the job with MPI_Abort from its own thread.
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return false;
  // Still under the timer (it is collective): the timed-out ranks agree on one reporter from
  // the tools' first wait on.
  install_watchdog_channel(MPI_COMM_WORLD);
  // Started by torchrun (or the like) rather than mpirun or srun: every process is a world of
  // its own and would run the whole job alone. One line from each, then the usage status.
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (const std::optional<std::string> problem = foreign_launcher_problem(world)) {
    std::fprintf(stderr, "%s: error: %s\n", program, problem->c_str());
    MPI_Finalize();
    std::exit(kExitUsage);
  }
  return true;
}

void finalize_mpi() {
  const Session& s = session();
  const bool watched = watchdog::running();
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const ProcessTimer timer(s.program, "MPI_Finalize", watched ? watchdog::timeout_s() : s.timeout_s,
                           watched ? "--timeout" : s.source, rank);
  stall_if_asked(false, rank);
  check_mpi(MPI_Finalize(), "MPI_Finalize");
  // The test knob's "finalize_stop:R": rank R stops itself in the tail of MPI_Finalize (still
  // under the timer), after its peers may have exited.
  if (stop_asked(rank)) raise(SIGSTOP);
}

int run_tool(int argc, char** argv, const char* program, int (*run)(int, char**),
             bool watch_from_start) {
  if (!init_mpi(argc, argv, program)) return 1;
  int rc = 1;
  try {
    if (watch_from_start) {
      watchdog::start(300.0, world_rank(), program, [] { abort_world(watchdog::kExitTimeout); });
    }
    rc = run(argc, argv);
  } catch (const std::exception& e) {
    // A failed MPI call (check_mpi) outside a phase: one rank's error.
    abort_job(e.what());
  }
  finalize_mpi();
  return rc;
}

}  // namespace cgemm::launcher
