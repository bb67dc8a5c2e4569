// Agreement over a communicator for the C API (rank_agreement.hpp).

#include "rank_agreement.hpp"

#include <algorithm>
#include <cstdint>

#include "capi_errors.hpp"
#include "cgemm/core/watchdog.hpp"
#include "printable_text.hpp"

namespace cgemm::capi {

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<size_t>(std::max(len, 0)));
}

void check_mpi_call(int rc, const char* call) {
  if (rc != MPI_SUCCESS) throw cgemm::Error(std::string(call) + " failed: " + mpi_error_text(rc));
}

// `comm` names a communicator: MPI_Comm_f2c of an index that names none gives no
// MPI_COMM_NULL but a null or dangling handle, which MPI would only meet inside a call.
void require_communicator(MPI_Comm comm, const std::string& what) {
  if (comm == MPI_COMM_NULL) throw ArgumentError(what + " is MPI_COMM_NULL");
  if (comm == MPI_Comm{}) throw ArgumentError(what + ": not a communicator");
  int size = 0, inter = 0;
  if (const int rc = MPI_Comm_size(comm, &size); rc != MPI_SUCCESS) {
    throw ArgumentError(what + ": not a communicator (MPI_Comm_size: " + mpi_error_text(rc) + ")");
  }
  if (MPI_Comm_test_inter(comm, &inter) == MPI_SUCCESS && inter) {
    throw ArgumentError(what + ": an intercommunicator; cgemm needs an intracommunicator");
  }
}

// The lowest rank of `comm` whose `error` is not empty, and its error, on every rank (collective
// over comm); -1 and "" when none.
std::pair<int, std::string> first_failing_rank(MPI_Comm comm, const std::string& error) {
  int rank = 0, size = 0;
  check_mpi_call(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi_call(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  int first = error.empty() ? size : rank;
  check_mpi_call(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  if (first == size) return {-1, ""};
  std::string text = rank == first ? error : std::string();
  int64_t n = static_cast<int64_t>(text.size());
  check_mpi_call(MPI_Bcast(&n, 1, MPI_INT64_T, first, comm), "MPI_Bcast");
  text.resize(static_cast<size_t>(n));
  check_mpi_call(MPI_Bcast(text.data(), static_cast<int>(n), MPI_CHAR, first, comm), "MPI_Bcast");
  return {first, text};
}

std::string text_field(const char* s) {
  return s == nullptr ? "NULL" : "\"" + cgemm::launcher::printable(s) + "\"";
}

std::string joined(const Fields& fields) {
  std::string t;
  for (const auto& [name, value] : fields) t += name + "=" + value + "\n";
  return t;
}

// Collective over comm, before anything else of the call: every rank passes the same
// arguments, or every rank throws one ArgumentError naming the first field that differs, the
// lowest rank that differs from rank 0 and both values. Ranks that differ would otherwise plan
// different GEMMs and meet in collectives of different sizes: garbage on one, a hang or an
// abort on another. Under the watchdog: a rank that never makes the call ends the job after
// the timeout, naming it.
void agree(MPI_Comm comm, const Fields& mine) {
  const std::string text = joined(mine);
  const cgemm::watchdog::WaitScope wait(
      "the other ranks' arguments of the same call (every rank must make it)");
  int rank = 0;
  check_mpi_call(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  std::string root = text;
  int64_t n = static_cast<int64_t>(root.size());
  check_mpi_call(MPI_Bcast(&n, 1, MPI_INT64_T, 0, comm), "MPI_Bcast");
  root.resize(static_cast<size_t>(n));
  check_mpi_call(MPI_Bcast(root.data(), static_cast<int>(n), MPI_CHAR, 0, comm), "MPI_Bcast");
  const auto [first, theirs] = first_failing_rank(comm, root == text ? "" : text);
  if (first < 0) return;
  // Both texts list the same fields in the same order (one function built them).
  size_t a = 0, b = 0;
  while (a < root.size() && b < theirs.size()) {
    const size_t ea = root.find('\n', a), eb = theirs.find('\n', b);
    const std::string la = root.substr(a, ea - a), lb = theirs.substr(b, eb - b);
    if (la != lb) {
      const size_t eq = lb.find('=');
      throw ArgumentError("the ranks' arguments differ: rank " + std::to_string(first) +
                          " of the communicator passes " + lb.substr(0, eq) + " " +
                          lb.substr(eq + 1) + ", rank 0 passes " + la.substr(la.find('=') + 1) +
                          " (every rank makes the same call with the same arguments)");
    }
    a = ea + 1, b = eb + 1;
  }
  throw ArgumentError("the ranks' arguments differ: rank " + std::to_string(first) +
                      " of the communicator passes others than rank 0");
}

}  // namespace cgemm::capi
