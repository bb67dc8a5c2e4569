#!/usr/bin/env bash
# test.sh: installs what cgemm needs, builds it and runs the whole test suite:
#  0. dependencies: Debian packages (scripts/install-deps.sh --test) and the pinned Python
#     packages of python/requirements-test.txt (PyPI: jax, torch) in the virtual environment
#     build-venv/ (scripts/python-venv.sh; the JAX plugin is built and tested with its jax, the
#     PyTorch tests run with its torch);
#  1. the main build (the CUDA backend compiled wherever the toolkit is found, even in a build/
#     that scripts/demo.sh configured without it; GPU tests skip without a GPU): unit tests,
#     then MPI integration tests (2, 3 and 4 ranks), then the Slurm test (a slurmctld and two
#     slurmd on this machine; tests/slurm);
#  2. install, then build and run examples/consumer's programs against the installed package:
#     the C++ consumer (cgemm::cgemm_static) and the C one (cgemm::cgemm, libcgemm.so), 2 ranks;
#     3 ranks: each one's planning error printed once;
#  3. an AddressSanitizer + UndefinedBehaviorSanitizer build of the CPU path: unit tests
#     and a few MPI tests;
#  4. fuzzing: tests/fuzz/run_fuzz.sh, $CGEMM_FUZZ_SECONDS (default 30) s per target, the
#     targets side by side (clang, build-fuzz/).
# Every step runs even when an earlier one failed (only the steps that need the main build are
# left out when it failed), so one run shows every failure. At the end it lists what failed,
# each with the command that reruns it alone, and exits 1.
#
# test.sh [--no-sanitize]     the whole suite (--no-sanitize: without step 3)
# test.sh --step NAME         one step alone (the names are in the failure list, and below)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
me=$root/scripts/test.sh
jobs=$(nproc)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none

# The steps, in order: name|needs the main build|title.
steps=(
  "deps|0|dependencies"
  "build|0|build (main)"
  "unit|1|unit tests"
  "mpi|1|MPI integration tests"
  "slurm|1|Slurm integration test (slurmctld + two slurmd; sbatch, srun, mpirun, job array)"
  "consumers|1|install + consumer examples (find_package(cgemm), C++ and C, 2 ranks; 3 ranks: one error)"
  "asan|0|ASan + UBSan build of the CPU path"
  "fuzz|0|fuzzing (${CGEMM_FUZZ_SECONDS:-30} s per target)"
)

# ctest on the main build, its output also in build/test-step-NAME.log (read for the failed
# tests' names when the step fails).
ctest_step() {
  local name=$1
  shift
  (cd "$root/build" && ctest "$@" --output-on-failure) 2>&1 | tee "$root/build/test-step-$name.log"
}

run_step() {
  case $1 in
    deps)
      set -e
      "$root/scripts/install-deps.sh" --test
      # The pinned Python packages (jax for the JAX plugin's tests), in build-venv/.
      "$root/scripts/python-venv.sh" "$root/build-venv" >/dev/null
      ;;
    build)
      # The JAX plugin is built against the venv's jax, and the PyTorch tests run with its
      # torch, when the venv exists.
      jax=()
      [ -x "$root/build-venv/bin/python" ] &&
        jax=(-DCGEMM_JAX_PYTHON="$root/build-venv/bin/python"
          -DCGEMM_TORCH_PYTHON="$root/build-venv/bin/python")
      "$root/scripts/build.sh" "$root/build" -DCGEMM_WITH_CUDA=ON "${jax[@]}"
      ;;
    unit) ctest_step unit -L "unit|gpu" -j"$jobs" ;;
    mpi) ctest_step mpi -L mpi -j"$jobs" ;;
    slurm) ctest_step slurm -L slurm ;;
    consumers)
      set -e
      rm -rf "$root/build/_install" "$root/build/_consumer"
      cmake --install "$root/build" --prefix "$root/build/_install" >/dev/null
      cmake -S "$root/examples/consumer" -B "$root/build/_consumer" -G Ninja \
        -DCMAKE_PREFIX_PATH="$root/build/_install" >/dev/null
      cmake --build "$root/build/_consumer" >/dev/null
      mpirun -np 2 "$root/build/_consumer/consumer"
      mpirun -np 2 "$root/build/_consumer/c_consumer"
      # At -np 3 their sequence does not divide: a planning error, the same on every rank, so
      # one message and every rank ending through MPI_Finalize (no MPI_Abort and its kill notices).
      for program in consumer c_consumer; do
        out=$("$root/tests/mpi/expect_failure.sh" --program "$program" "not divisible by 3" \
          mpirun -np 3 "$root/build/_consumer/$program") || { echo "$out"; false; }
        if grep -q MPI_ABORT <<<"$out"; then
          echo "$out"
          echo "FAIL: $program at -np 3 aborted"
          false
        fi
      done
      ;;
    asan)
      set -e
      "$root/scripts/build.sh" "$root/build-asan" -DCGEMM_WITH_CUDA=OFF -DCGEMM_SANITIZE=ON \
        -DCMAKE_BUILD_TYPE=Debug
      (cd "$root/build-asan" && ctest -L unit -j"$jobs" --output-on-failure)
      # Open MPI's own allocations are not ours to report: leaks off under mpirun. The tp2
      # benchmark runs (about 40 s of the step under ASan) are left to the plain MPI step: CI
      # keeps under 30 minutes.
      (cd "$root/build-asan" && ASAN_OPTIONS=detect_leaks=0 \
        ctest -L mpi -R "tp2_|dp2tp2_all_gather|dp2tp2_reduce_scatter_b1|error_unknown|error_seq|fsdp_gemm|tp_linear_fsdp2" \
          -E "tp2_bench" -j"$jobs" --output-on-failure)
      ;;
    fuzz) "$root/tests/fuzz/run_fuzz.sh" "${CGEMM_FUZZ_SECONDS:-30}" ;;
    *)
      echo "test.sh: error: no step '$1' (steps: deps build unit mpi slurm consumers asan fuzz)" >&2
      return 2
      ;;
  esac
}

if [ "${1:-}" = "--step" ]; then
  [ $# -eq 2 ] || { echo "test.sh: error: --step takes one step name" >&2; exit 2; }
  run_step "$2"
  exit
fi
sanitize=1
case "${1:-}" in
  "") ;;
  --no-sanitize) sanitize=0 ;;
  *) echo "test.sh: error: unknown argument '$1' (--no-sanitize, --step NAME)" >&2; exit 2 ;;
esac

failed=()
build_ok=1
for entry in "${steps[@]}"; do
  IFS='|' read -r name needs_build title <<<"$entry"
  [ "$name" = asan ] && [ "$sanitize" = 0 ] && continue
  echo
  echo "== $title"
  if [ "$needs_build" = 1 ] && [ "$build_ok" = 0 ]; then
    echo "== not run: the main build failed"
    failed+=("$name|not run (the main build failed)|$title")
    continue
  fi
  start=$SECONDS
  # A child bash, so that `set -e` inside a step holds (it is off in a tested function).
  bash "$me" --step "$name"
  rc=$?
  echo "== $title: $([ "$rc" = 0 ] && echo passed || echo "FAILED (exit $rc)") in $((SECONDS - start)) s"
  if [ "$rc" != 0 ]; then
    failed+=("$name|exit $rc|$title")
    [ "$name" = build ] && build_ok=0
  fi
done

echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "== all tests passed"
  exit 0
fi
echo "== TESTS FAILED: ${#failed[@]} step(s); each reruns alone with the command after it"
for entry in "${failed[@]}"; do
  IFS='|' read -r name why title <<<"$entry"
  echo "  $title: $why"
  echo "      bash scripts/test.sh --step $name"
  # The ctest steps also name each failed test, with the command for that test alone.
  log=$root/build/test-step-$name.log
  if [ "$why" != "not run (the main build failed)" ] && [ -f "$log" ]; then
    sed -n '/The following tests FAILED:/,$p' "$log" |
      sed -nE 's/^[[:space:]]*[0-9]+ - ([^ ]+) \((.*)\).*$/\1 \2/p' |
      while read -r test why_test; do
        echo "    $test ($why_test): (cd build && ctest -R '^$test\$' --output-on-failure)"
      done
  fi
done
exit 1
