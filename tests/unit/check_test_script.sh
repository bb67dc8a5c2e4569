#!/usr/bin/env bash
# check_test_script.sh SOURCE_DIR: scripts/test.sh on a stand-in project (stub install and
# build scripts, a CTest project with one failing unit test, a fuzz step that fails): every step
# must run although earlier ones failed, ctest's summary lines must show, and the end must list
# each failed step and failed test with the command that reruns it alone, then exit 1. With
# the main build failing, the steps that need it are listed as not run.
set -u
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; echo "--- output"; cat "$work/out"; exit 1; }
mkdir -p "$work/scripts" "$work/tests/fuzz" "$work/proj" "$work/tests/mpi"
cp "$src/scripts/test.sh" "$work/scripts/"
printf '#!/bin/bash\necho deps\n' >"$work/scripts/install-deps.sh"
printf '#!/bin/bash\ncmake -S %s/proj -B "$1" -G Ninja >/dev/null && cmake --build "$1" >/dev/null\n' \
  "$work" >"$work/scripts/build.sh"
printf '#!/bin/bash\necho fuzz found a crash; exit 3\n' >"$work/tests/fuzz/run_fuzz.sh"
chmod +x "$work"/scripts/*.sh "$work"/tests/fuzz/*.sh
cat >"$work/proj/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(stand_in NONE)
enable_testing()
add_test(NAME unit_passes COMMAND true)
add_test(NAME unit_fails COMMAND false)
set_tests_properties(unit_passes unit_fails PROPERTIES LABELS unit)
add_test(NAME mpi_passes COMMAND true)
set_tests_properties(mpi_passes PROPERTIES LABELS mpi)
CM
(cd "$work" && bash scripts/test.sh --no-sanitize) >"$work/out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "exit status $rc, expected 1"
# The MPI step ran after the unit step failed, and ctest's summary lines are there.
grep -q "== MPI integration tests: passed" "$work/out" || fail "the MPI step did not run after a failure"
grep -q "50% tests passed, 1 tests failed out of 2" "$work/out" || fail "no ctest summary line"
grep -q "== fuzzing .*FAILED (exit 3)" "$work/out" || fail "the last step did not run"
sed -n '/== TESTS FAILED/,$p' "$work/out" >"$work/list"
[ -s "$work/list" ] || fail "no list of failures"
for want in "bash scripts/test.sh --step unit" "bash scripts/test.sh --step fuzz" \
  "bash scripts/test.sh --step consumers" \
  "unit_fails (Failed): (cd build && ctest -R '^unit_fails\$' --output-on-failure)"; do
  grep -qF -- "$want" "$work/list" || fail "the failure list lacks: $want"
done
grep -q "step mpi" "$work/list" && fail "a passed step is listed as failed"
# A failed main build: the steps that need it are not run, and listed so.
printf '#!/bin/bash\necho compile error; exit 1\n' >"$work/scripts/build.sh"
rm -rf "$work/build"
(cd "$work" && bash scripts/test.sh --no-sanitize) >"$work/out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "failed build: exit status $rc, expected 1"
grep -q "MPI integration tests: not run (the main build failed)" "$work/out" ||
  fail "failed build: the MPI step is not listed as not run"
grep -q "fuzzing .*FAILED (exit 3)" "$work/out" || fail "failed build: the fuzz step did not run"
echo PASS
