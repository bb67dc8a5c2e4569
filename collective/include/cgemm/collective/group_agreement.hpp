#pragma once
// How the transports of a group take one decision (collective/'s transports and the CUDA
// backend's transport set): every rank states its problem, all ranks learn all of them in one
// allgather, so each decides the same way without another round, and a refusal names every
// rank's reason.

#include <mpi.h>

#include <string>

namespace cgemm::detail {

/// Gathers each rank's `mine` (empty: no problem; cut to 239 bytes) over `comm` (`size` ranks)
/// and returns true when every rank's is empty; else `why` lists them as
/// "tp rank R: problem; ...". `what` names the allgather in an MPI error.
bool agree_on_problems(MPI_Comm comm, int size, const std::string& mine, std::string& why,
                       const char* what);

}  // namespace cgemm::detail
