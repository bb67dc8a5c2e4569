#!/usr/bin/env bash
# fault_check.sh TIMEOUT_S FAULT CMD...: runs CMD (an mpirun of cgemm-run with --timeout
# TIMEOUT_S) with CGEMM_TEST_FAULT=FAULT (stop:RANK[:N] stops a rank with SIGSTOP mid-run;
# skip_exchange:RANK[:N] makes it skip its half of an exchange). Passes when the job ends
# within TIMEOUT_S + 10 s with exit status 4 (the watchdog's) and one survivor printed the
# watchdog's line naming the collective GEMM, its step (or its sequential collective) and the
# peers by world rank and host; for stop, the line names the stopped rank as not timed out.
set -u
timeout_s=$1 fault=$2
shift 2
errfile=$(mktemp)
trap 'rm -f "$errfile"' EXIT
limit=$((${timeout_s%.*} + 10))
start=$(date +%s%N)
CGEMM_TEST_FAULT=$fault timeout $((limit + 20)) "$@" >/dev/null 2>"$errfile"
rc=$?
took=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
echo "--- stderr"
cat "$errfile"
echo "--- exit status $rc after $took s (fault $fault, timeout $timeout_s s)"
[ "$rc" -eq 0 ] && { echo "FAIL: the job succeeded despite the fault"; exit 1; }
[ "$rc" -eq 124 ] && { echo "FAIL: the job hung past $((limit + 20)) s"; exit 1; }
awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t <= l) }' ||
  { echo "FAIL: the job took $took s, more than the timeout + 10 s ($limit s)"; exit 1; }
[ "$rc" -eq 4 ] || { echo "FAIL: exit status $rc, expected 4 (the watchdog's)"; exit 1; }
# What the line names after "waiting for": the exchange and its peers as the CPU backend's MPI
# transport says it, or (CGEMM_FAULT_WAIT, a regex) as another transport does.
wait_re=${CGEMM_FAULT_WAIT:-"exchange '[a-z_]+ (step [0-9]+: |sequential )[^']*' \(to world rank [0-9]+ \(host [^)]+\), from world rank [0-9]+ \(host [^)]+\)\)"}
grep -E -q "error: rank [0-9]+ \(host [^)]+\): timed out after [0-9.]+ s waiting for $wait_re" "$errfile" ||
  { echo "FAIL: no watchdog line naming the exchange, its step and its peers by world rank and host"; exit 1; }
# One line per stall: the ranks that time out on it agree on one reporter.
lines=$(grep -c "timed out after" "$errfile")
[ "$lines" -eq 1 ] || { echo "FAIL: $lines timeout lines, expected 1"; exit 1; }
# A stopped rank is the one that did not time out: the line names it.
case $fault in
  stop:*)
    stopped=$(echo "$fault" | cut -d: -f2)
    grep -E -q "not timed out \(stalled, or busy elsewhere\): (.*, )?world rank $stopped \(host" "$errfile" ||
      { echo "FAIL: the line does not name the stopped world rank $stopped"; exit 1; } ;;
esac
echo "PASS"
