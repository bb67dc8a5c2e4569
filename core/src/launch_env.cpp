#include "cgemm/core/launch_env.hpp"

#include <cstdlib>
#include <optional>
#include <string>

namespace cgemm {

namespace {

// The variable as a whole non-negative number; std::nullopt when unset or not one.
std::optional<long long> number(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v < '0' || *v > '9') return std::nullopt;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (*end != '\0') return std::nullopt;
  return n;
}

}  // namespace

std::optional<std::string> foreign_launcher_problem(int mpi_world_size) {
  if (mpi_world_size != 1) return std::nullopt;
  for (const char* mpi_launcher :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE"}) {
    if (std::getenv(mpi_launcher) != nullptr) return std::nullopt;
  }
  struct Var {
    const char* name;
    long long above;  // the value above which the launcher has started more than one process
  };
  bool more = false;
  std::string seen;
  for (const Var& var :
       {Var{"WORLD_SIZE", 1}, Var{"RANK", 0}, Var{"LOCAL_RANK", 0}, Var{"LOCAL_WORLD_SIZE", 1}}) {
    const std::optional<long long> n = number(var.name);
    if (!n) continue;
    more = more || *n > var.above;
    seen += (seen.empty() ? "" : ", ") + std::string(var.name) + "=" + std::to_string(*n);
  }
  if (!more) return std::nullopt;
  return "MPI's world has 1 rank, but this process was started as one of several (" + seen +
         ": torchrun's variables, and no MPI launcher's): each process would run alone. "
         "cgemm's ranks are the processes of one MPI job: start them with mpirun or srun "
         "(e.g. mpirun -np 2 ...; srun --mpi=pmix ...), not torchrun";
}

}  // namespace cgemm
