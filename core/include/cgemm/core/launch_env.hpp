#pragma once
// Which launcher started this process. cgemm's ranks are the processes of one MPI job
// (mpirun, srun); a process started by torchrun (or any launcher that sets torch.distributed's
// RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE) without an MPI launcher initializes MPI
// as a singleton, a world of 1 rank, and would silently compute alone. These are the
// launchers' variables, read to refuse that; they are not cgemm knobs (env.hpp's registry).

#include <optional>
#include <string>

namespace cgemm {

/// The message for a launcher environment that disagrees with MPI's world, std::nullopt when
/// none does. Only a world of 1 rank is judged: then WORLD_SIZE or LOCAL_WORLD_SIZE above 1, or
/// RANK or LOCAL_RANK above 0, means the launcher started more processes than MPI sees, unless
/// an MPI launcher's own variable is set too (OMPI_COMM_WORLD_SIZE, PMI_SIZE, MPI_LOCALNRANKS,
/// MV2_COMM_WORLD_SIZE: then MPI's world is the launcher's answer, and torch.distributed's
/// variables are leftovers of an outer environment). Values that are not whole numbers are
/// ignored. The message names the variables and says to start the ranks with mpirun or srun.
std::optional<std::string> foreign_launcher_problem(int mpi_world_size);

}  // namespace cgemm
