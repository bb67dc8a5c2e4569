#!/usr/bin/env bash
# expect_failure.sh [--program NAME] REGEX CMD...: passes when CMD ends within 30 s with a
# non-zero status, its output matches REGEX, and it printed exactly one "NAME: error:" line
# (NAME: cgemm-run unless given).
set -u
program=cgemm-run
if [ "${1:-}" = "--program" ]; then
  program=$2
  shift 2
fi
regex=$1
shift
# stderr apart from stdout: rank 0's progress lines on stdout may interleave with the
# error line, which the job prints on stderr.
errfile=$(mktemp)
trap 'rm -f "$errfile"' EXIT
stdout=$(timeout 30 "$@" 2>"$errfile")
rc=$?
err=$(cat "$errfile")
echo "$stdout"
echo "--- stderr"
echo "$err"
echo "--- exit status $rc"
[ "$rc" -eq 124 ] && { echo "FAIL: the job did not end within 30 s"; exit 1; }
[ "$rc" -eq 0 ] && { echo "FAIL: the job succeeded on bad input"; exit 1; }
echo "$err" | grep -E -q -- "$regex" || { echo "FAIL: no message on stderr matching '$regex'"; exit 1; }
n=$(echo "$err" | grep -c "$program: error:")
[ "$n" -eq 1 ] || { echo "FAIL: expected one error message, got $n"; exit 1; }
echo "PASS"
