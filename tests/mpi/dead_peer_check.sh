#!/usr/bin/env bash
# dead_peer_check.sh TIMEOUT_S RANK CMD...: runs CMD (an mpirun of cgemm-run with --timeout
# TIMEOUT_S) with CGEMM_TEST_FAULT=die:RANK:3, so that world rank RANK dies (SIGKILL) at its
# third exchange while its peers wait for it. Passes when the whole job ends within TIMEOUT_S +
# 10 s with a non-zero status and mpirun's word that the rank was killed: no survivor waits on.
set -u
timeout_s=$1 rank=$2
shift 2
errfile=$(mktemp)
trap 'rm -f "$errfile"' EXIT
limit=$((${timeout_s%.*} + 10))
start=$(date +%s%N)
CGEMM_TEST_FAULT=die:$rank:3 timeout $((limit + 20)) "$@" >/dev/null 2>"$errfile"
rc=$?
took=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
echo "--- stderr"
cat "$errfile"
echo "--- exit status $rc after $took s (rank $rank dies, timeout $timeout_s s)"
[ "$rc" -eq 0 ] && { echo "FAIL: the job succeeded although a rank died"; exit 1; }
[ "$rc" -eq 124 ] && { echo "FAIL: the job hung past $((limit + 20)) s"; exit 1; }
awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t <= l) }' ||
  { echo "FAIL: the job took $took s, more than the timeout + 10 s ($limit s)"; exit 1; }
grep -q "exited on signal 9\|timed out after" "$errfile" ||
  { echo "FAIL: neither mpirun nor the watchdog said why the job ended"; exit 1; }
echo "PASS"
