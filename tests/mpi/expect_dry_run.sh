#!/usr/bin/env bash
# expect_dry_run.sh RANKS HOSTS CMD...: passes when CMD (a cgemm-run --dry_run) exits 0 within
# 30 s, prints RANKS rank lines on HOSTS distinct hosts, and a plan with a schedule and bytes
# (and, with EXPECT_DRY_RUN set, a line matching each of its regexes).
set -u
ranks=$1
hosts=$2
shift 2
out=$(timeout 30 "$@" 2>&1)
rc=$?
echo "$out"
echo "--- exit status $rc"
[ "$rc" -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
n=$(echo "$out" | grep -cE '^rank [0-9]+: host ')
[ "$n" -eq "$ranks" ] || { echo "FAIL: expected $ranks rank lines, got $n"; exit 1; }
h=$(echo "$out" | grep -E '^rank [0-9]+: host ' | sed -E 's/^rank [0-9]+: host ([^,]*),.*/\1/' | sort -u | wc -l)
[ "$h" -eq "$hosts" ] || { echo "FAIL: expected $hosts hosts, got $h"; exit 1; }
echo "$out" | grep -q '  schedule: ' || { echo "FAIL: no plan schedule"; exit 1; }
echo "$out" | grep -q '  bytes per rank: ' || { echo "FAIL: no bytes"; exit 1; }
echo "$out" | grep -q 'cgemm-run --dry_run: done' || { echo "FAIL: no end line"; exit 1; }
# EXPECT_DRY_RUN (optional): extended regexes, one per line, each of which some output line matches.
while IFS= read -r want; do
  [ -z "$want" ] && continue
  echo "$out" | grep -qE -- "$want" || { echo "FAIL: no line matches: $want"; exit 1; }
done <<<"${EXPECT_DRY_RUN:-}"
echo "PASS"
