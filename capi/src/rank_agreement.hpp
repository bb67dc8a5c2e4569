#pragma once
// Agreement over a communicator for the C API: its MPI calls under an error handler that
// returns (no abort crosses the boundary), the check that a handle names a communicator, and
// the comparison of every rank's arguments before a collective call (the ranks that differ
// are named, on every rank alike).

#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

#include "cgemm/cgemm.h"  // CGEMM_MAX_NDIM

namespace cgemm::capi {

/// MPI's text for an error code.
std::string mpi_error_text(int rc);
/// Throws cgemm::Error naming `call` unless rc is MPI_SUCCESS.
void check_mpi_call(int rc, const char* call);

// While it lives, MPI errors on `comm` (and on the communicators the context makes from it,
// which inherit the handler) and on a handle that names no communicator (which Open MPI raises
// on MPI_COMM_WORLD) return a code the library turns into a status, where the default
// MPI_ERRORS_ARE_FATAL would end the caller's process. The caller's handlers come back after.
class ReturningErrors {
 public:
  explicit ReturningErrors(MPI_Comm comm) : comm_(comm) {
    if (MPI_Comm_get_errhandler(comm_, &old_) != MPI_SUCCESS) {
      old_ = MPI_ERRHANDLER_NULL;
      return;
    }
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~ReturningErrors() {
    if (old_ == MPI_ERRHANDLER_NULL) return;
    MPI_Comm_set_errhandler(comm_, old_);
    MPI_Errhandler_free(&old_);
  }
  ReturningErrors(const ReturningErrors&) = delete;
  ReturningErrors& operator=(const ReturningErrors&) = delete;

 private:
  MPI_Comm comm_;
  MPI_Errhandler old_ = MPI_ERRHANDLER_NULL;
};

/// Throws ArgumentError naming `what` unless `comm` is an intracommunicator (MPI_Comm_f2c of an
/// index that names none gives no MPI_COMM_NULL but a null or dangling handle).
void require_communicator(MPI_Comm comm, const std::string& what);

/// The lowest rank of `comm` whose `error` is not empty, and its error, on every rank
/// (collective over comm); -1 and "" when none.
std::pair<int, std::string> first_failing_rank(MPI_Comm comm, const std::string& error);

// A call's arguments as given, field by field ("name", "value"), for the ranks to compare.
using Fields = std::vector<std::pair<std::string, std::string>>;

/// A C string as a field's value: quoted and escaped, or NULL.
std::string text_field(const char* s);

/// A shape or dims array as a field's value: "[2, 8, 32]".
template <typename T>
std::string dims_field(int ndim, const T* dims) {
  if (ndim < 0 || ndim > CGEMM_MAX_NDIM) return "ndim " + std::to_string(ndim);
  std::string t = "[";
  for (int d = 0; d < ndim; ++d) t += (d ? ", " : "") + std::to_string(dims[d]);
  return t + "]";
}

/// Collective over comm, before anything else of the call: every rank passes the same
/// arguments, or every rank throws one ArgumentError naming the first field that differs, the
/// lowest rank that differs from rank 0 and both values. Under the watchdog: a rank that never
/// makes the call ends the job after the timeout, naming it.
void agree(MPI_Comm comm, const Fields& mine);

}  // namespace cgemm::capi
