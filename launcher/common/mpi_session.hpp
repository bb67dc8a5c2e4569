#pragma once
// MPI_Init_thread and MPI_Finalize of the tools (cgemm-run, cgemm-bench, cgemm-train), each under a
// ProcessTimer (cgemm/core/process_timer.hpp): the watchdog covers the waits in between, these
// timers the two calls it cannot, so --timeout bounds the job from the first line of main to
// the last.

namespace cgemm::launcher {

/// MPI_Init_thread(MPI_THREAD_MULTIPLE) under a timer of --timeout as the command line gives it
/// (timeout_from_args), else the option's default (300 s): a --timeout from --config or a sweep
/// list is known only after MPI_Init. Sets the program name. False when MPI_Init failed.
bool init_mpi(int& argc, char**& argv, const char* program);

/// MPI_Finalize under a timer of the watchdog's timeout (the one init_mpi used when the
/// watchdog never started). Throws cgemm::Error when MPI_Finalize fails.
void finalize_mpi();

/// A tool's main(): init_mpi, then run(argc, argv) (with watch_from_start, under a watchdog of
/// the default 300 s until run() starts its own with the configured --timeout), an exception
/// that escapes run() ending the job with its message (abort_job), then finalize_mpi. Returns
/// run()'s status, 1 when MPI could not start.
int run_tool(int argc, char** argv, const char* program, int (*run)(int, char**),
             bool watch_from_start);

}  // namespace cgemm::launcher
