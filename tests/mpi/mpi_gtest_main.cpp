// main() of the GoogleTest programs that run under mpirun: MPI around the tests, an exception on
// one rank ends the job (the others would wait in a collective forever), and the job's status is
// the worst rank's.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  GTEST_FLAG_SET(catch_exceptions, false);
  int rc = 0;
  try {
    rc = RUN_ALL_TESTS();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
