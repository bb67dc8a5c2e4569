#pragma once
// A deadline for the calls the watchdog cannot cover: MPI_Init (before it returns there is no
// rank number and no MPI_Abort) and MPI_Finalize (after it starts MPI_Abort is illegal). The
// tools run both under a ProcessTimer, so no rank waits forever from the first line of main to
// the last. When the call outlives the timeout the timer prints one line
//   <program>: error: rank R (host H, pid P): <call> did not return within T s (<source>)
// (before MPI_Init returned, R is the launcher's rank variable: launcher_rank(); "?" without
// one) and ends the process with _exit(watchdog::kExitTimeout):
// mpirun then ends the other ranks. Ranks other than 0 fire 3 s
// later than the timeout, so one rank reports a stall all ranks wait for.

#include <memory>
#include <string>

namespace cgemm {

/// The largest --timeout the tools accept (about 115 days): a bound a user can state, far
/// below what the clocks can represent.
inline constexpr double kMaxTimeoutSeconds = 1e7;

/// --timeout from the command line before MPI_Init: `--timeout T` or `--timeout=T` with one
/// plain number 0 <= T <= kMaxTimeoutSeconds (0: no deadline). Anything else (no --timeout, a sweep
/// list, a value that does not parse; a --config file is not read) gives -1: the caller uses its
/// default. The last occurrence counts, as for the option parser.
double timeout_from_args(int argc, char** argv);

/// This process's rank as the launcher tells it before MPI_Init: OMPI_COMM_WORLD_RANK (Open
/// MPI's mpirun), PMIX_RANK, PMI_RANK (MPICH's Hydra), SLURM_PROCID (srun), the first that is
/// a whole number >= 0; -1 when none is.
int launcher_rank();

/// Forks this process's guard, once, before MPI_Init (a fork after it is unsafe with
/// registered memory): a small process that ends with this one and watches each ProcessTimer
/// from outside. Its timer is a thread of this process, so it stops when the process is stopped
/// (SIGSTOP); a rank stopped in the tail of MPI_Finalize, after its peers exited, held mpirun
/// forever. When a call outlives its timeout while this process is stopped, the guard prints
/// the timer's line, says the process is stopped, and ends it with SIGKILL (mpirun then ends
/// the job). Without a guard (fork failed) the timers work as before.
void start_process_guard();

class ProcessTimer {
 public:
  /// Arms the timer: `timeout_s` <= 0 arms nothing; beyond ten years it never fires. Only time
  /// the process runs counts (a stop is not the call's): the guard handles a stopped process.
  /// `source` says
  /// where the timeout came from
  /// ("--timeout", "the default --timeout ..."); `rank` < 0: launcher_rank(), else "?".
  ProcessTimer(std::string program, std::string call, double timeout_s, std::string source,
               int rank = -1);
  /// Disarms it (the call returned).
  ~ProcessTimer();
  ProcessTimer(const ProcessTimer&) = delete;
  ProcessTimer& operator=(const ProcessTimer&) = delete;

 private:
  struct Armed;
  std::shared_ptr<Armed> armed_;
};

}  // namespace cgemm
