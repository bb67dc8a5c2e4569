#!/usr/bin/env bash
# expect_usage_error.sh [--program NAME] REGEX CMD...: as expect_failure.sh, and the exit
# status must be 2 (bad options or a job that cannot fit: refused before any run).
set -u
"$(dirname "$0")/expect_failure.sh" "$@"
rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
[ "$1" = "--program" ] && shift 2
shift
timeout 30 "$@" >/dev/null 2>&1
status=$?
[ "$status" -eq 2 ] || { echo "FAIL: exit status $status, expected 2"; exit 1; }
echo "PASS (exit status 2)"
