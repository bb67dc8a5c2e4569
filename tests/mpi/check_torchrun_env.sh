#!/usr/bin/env bash
# check_torchrun_env.sh RUN PYTHON PYTHON_DIR LIBCGEMM: a torchrun-style launch (two processes
# with RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE set and no MPI launcher, so each is an
# MPI world of 1) must stop, not compute alone: cgemm-run ends each process with exit 2 and
# one line saying to use mpirun or srun; the Python module's Context raises cgemm.Error with
# the same message (the C API's CGEMM_ERROR_MPI). Without those variables the same 1-process
# run passes (the control).
set -u
run=$1 python=$2 pydir=$3 lib=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
tiny=(--backend cpu --seq_len 16 --hidden_in 32 --hidden_out 48 --warmup 0 --iterations 1)
# Whatever an outer launcher left here would change the verdict: the test's own environment.
unset OMPI_COMM_WORLD_SIZE PMI_SIZE MPI_LOCALNRANKS MV2_COMM_WORLD_SIZE
timeout 60 "$run" "${tiny[@]}" >"$work/control" 2>&1 ||
  { cat "$work/control"; fail "the control run without torchrun's variables failed"; }
want="MPI's world has 1 rank, but this process was started as one of several .*start them with mpirun or srun"
pids=()
for rank in 0 1; do
  env WORLD_SIZE=2 RANK=$rank LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 timeout 60 "$run" "${tiny[@]}" \
    >"$work/out$rank" 2>"$work/err$rank" &
  pids+=($!)
done
for rank in 0 1; do
  wait "${pids[$rank]}"
  rc=$?
  echo "--- process $rank: exit status $rc"
  cat "$work/err$rank"
  [ "$rc" -eq 2 ] || fail "process $rank: exit status $rc, expected 2"
  [ "$(grep -c 'cgemm-run: error:' "$work/err$rank")" -eq 1 ] || fail "process $rank: not one error line"
  grep -E -q "$want" "$work/err$rank" || fail "process $rank: the line does not say to use mpirun or srun"
  grep -q "check PASSED" "$work/out$rank" && fail "process $rank computed alone"
done
# The Python module (the C API under it).
env WORLD_SIZE=2 RANK=1 LOCAL_RANK=1 CGEMM_LIBRARY="$lib" PYTHONPATH="$pydir" timeout 60 \
  "$python" - "$want" <<'PY' || fail "the Python module did not refuse the launch"
import re, sys
import cgemm
try:
    cgemm.Context(backend="cpu")
except cgemm.Error as e:
    print("cgemm.Error:", e)
    assert re.search(sys.argv[1], str(e)), str(e)
    assert e.status == "CGEMM_ERROR_MPI", e.status
    sys.exit(0)
print("Context was created in a 1-rank world under torchrun's variables")
sys.exit(1)
PY
echo PASS
