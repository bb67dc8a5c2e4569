#!/usr/bin/env bash
# test.sh: installs what cgemm needs, builds it and runs the whole test suite:
#  1. the main build (CUDA backend compiled when the toolkit is found; GPU tests skip
#     without a GPU): unit tests, then MPI integration tests (2, 3 and 4 ranks), then the
#     Slurm test (a slurmctld and two slurmd on this machine; tests/slurm);
#  2. install, then build and run examples/consumer's programs against the installed package:
#     the C++ consumer (cgemm::cgemm_static) and the C one (cgemm::cgemm, libcgemm.so), 2 ranks;
#     3 ranks: each one's planning error printed once;
#  3. an AddressSanitizer + UndefinedBehaviorSanitizer build of the CPU path: unit tests
#     and a few MPI tests;
#  4. fuzzing: tests/fuzz/run_fuzz.sh, $CGEMM_FUZZ_SECONDS (default 180) s per target, the
#     targets side by side (clang, build-fuzz/).
# Pass --no-sanitize to skip step 3.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sanitize=1
[ "${1:-}" = "--no-sanitize" ] && sanitize=0
jobs=$(nproc)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none

current="start"
step() {
  current=$*
  echo
  echo "== $*"
}
trap 'echo; echo "== TESTS FAILED in step: $current"' ERR

step "dependencies"
"$root/scripts/install-deps.sh" --test

step "build (main)"
"$root/scripts/build.sh" "$root/build"

step "unit tests"
(cd "$root/build" && ctest -L "unit|gpu" -j"$jobs" --output-on-failure)
step "MPI integration tests"
(cd "$root/build" && ctest -L mpi -j"$jobs" --output-on-failure)
step "Slurm integration test (slurmctld + two slurmd; sbatch, srun, mpirun, job array)"
(cd "$root/build" && ctest -L slurm --output-on-failure)

step "install + consumer examples (find_package(cgemm), C++ and C, 2 ranks; 3 ranks: one error)"
rm -rf "$root/build/_install" "$root/build/_consumer"
cmake --install "$root/build" --prefix "$root/build/_install" >/dev/null
cmake -S "$root/examples/consumer" -B "$root/build/_consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$root/build/_install" >/dev/null
cmake --build "$root/build/_consumer" >/dev/null
mpirun -np 2 "$root/build/_consumer/consumer"
mpirun -np 2 "$root/build/_consumer/c_consumer"
# At -np 3 their sequence does not divide: a planning error, the same on every rank, so one
# message and every rank ending through MPI_Finalize (no MPI_Abort and its kill notices).
for program in consumer c_consumer; do
  out=$("$root/tests/mpi/expect_failure.sh" --program "$program" "not divisible by 3" \
    mpirun -np 3 "$root/build/_consumer/$program") || { echo "$out"; false; }
  if grep -q MPI_ABORT <<<"$out"; then
    echo "$out"
    echo "FAIL: $program at -np 3 aborted"
    false
  fi
done

if [ "$sanitize" = 1 ]; then
  step "ASan + UBSan build of the CPU path"
  "$root/scripts/build.sh" "$root/build-asan" -DCGEMM_WITH_CUDA=OFF -DCGEMM_SANITIZE=ON \
    -DCMAKE_BUILD_TYPE=Debug
  (cd "$root/build-asan" && ctest -L unit -j"$jobs" --output-on-failure)
  # Open MPI's own allocations are not ours to report: leaks off under mpirun.
  (cd "$root/build-asan" && ASAN_OPTIONS=detect_leaks=0 \
    ctest -L mpi -R "tp2_|dp2tp2_all_gather|dp2tp2_reduce_scatter_b1|error_unknown|error_seq" \
      -j"$jobs" --output-on-failure)
fi

fuzz_seconds=${CGEMM_FUZZ_SECONDS:-180}
step "fuzzing ($fuzz_seconds s per target)"
"$root/tests/fuzz/run_fuzz.sh" "$fuzz_seconds"
step "all tests passed"
