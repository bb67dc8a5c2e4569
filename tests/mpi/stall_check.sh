#!/usr/bin/env bash
# stall_check.sh TIMEOUT_S STALL CALL CMD...: runs CMD (an mpirun of a cgemm tool with --timeout
# TIMEOUT_S) with CGEMM_TEST_STALL=STALL (init: every rank stalls before MPI_Init; finalize:RANK:
# a rank stalls before MPI_Finalize; finalize_stop:RANK: a rank stops itself (SIGSTOP) in the
# tail of MPI_Finalize, after its peers exited, and its guard process must end it). Passes when the job ends within TIMEOUT_S + 10 s with exit
# status 4 and a line saying that CALL (MPI_Init or MPI_Finalize) did not return in time: one
# line for a stall every rank meets (rank 0 reports, the others' timers are later), naming a
# rank: before MPI_Init the launcher's rank variable gives it (it used to print "rank ?" once
# per rank).
set -u
timeout_s=$1 stall=$2 call=$3
shift 3
errfile=$(mktemp)
trap 'rm -f "$errfile"' EXIT
limit=$((${timeout_s%.*} + 10))
start=$(date +%s%N)
CGEMM_TEST_STALL=$stall timeout $((limit + 20)) "$@" >/dev/null 2>"$errfile"
rc=$?
took=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
echo "--- stderr"
cat "$errfile"
echo "--- exit status $rc after $took s (stall $stall, timeout $timeout_s s)"
[ "$rc" -eq 0 ] && { echo "FAIL: the job succeeded despite the stall"; exit 1; }
[ "$rc" -eq 124 ] && { echo "FAIL: the job hung past $((limit + 20)) s"; exit 1; }
awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t <= l) }' ||
  { echo "FAIL: the job took $took s, more than the timeout + 10 s ($limit s)"; exit 1; }
case $stall in
  # Stopped, the rank cannot exit itself: its guard process kills it (mpirun: 137, SIGKILL);
  # it used to hold mpirun forever after its peers exited 0.
  finalize_stop:*)
    [ "$rc" -eq 137 ] || { echo "FAIL: exit status $rc, expected 137 (SIGKILL by the guard)"; exit 1; }
    grep -q "the process is stopped (SIGSTOP, SIGTSTP or a debugger) and cannot end itself: ended with SIGKILL" "$errfile" ||
      { echo "FAIL: no line saying the stopped rank was ended"; exit 1; } ;;
  *) [ "$rc" -eq 4 ] || { echo "FAIL: exit status $rc, expected 4 (the timer's)"; exit 1; } ;;
esac
grep -E -q "error: rank [0-9?]+ \(host [^,]+, pid [0-9]+\): $call did not return within $timeout_s s" "$errfile" ||
  { echo "FAIL: no line saying that $call did not return within $timeout_s s"; exit 1; }
lines=$(grep -c "did not return within" "$errfile")
[ "$lines" -eq 1 ] || { echo "FAIL: $lines timeout lines, expected 1"; exit 1; }
grep -q "error: rank ?" "$errfile" && { echo "FAIL: a line names no rank (rank ?)"; exit 1; }
echo "PASS"
