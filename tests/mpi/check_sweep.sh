#!/usr/bin/env bash
# check_sweep.sh DIR N CMD...: CMD is a cgemm-run sweep given --sweep_csv DIR/sweep.csv and
# --sweep_jsonl DIR/sweep.jsonl. N > 0: it must succeed with N rows in both files (plus the
# CSV header), N "experiment i/N" progress lines and N rows in the printed table.
# N = 0: it must fail with status 2 before any experiment runs, and create neither file.
set -u
dir=$1
n=$2
shift 2
rm -rf "$dir"
mkdir -p "$dir"
out=$(timeout 60 "$@" 2>&1)
rc=$?
echo "$out"
echo "--- exit status $rc"
fail() { echo "FAIL: $*"; exit 1; }
if [ "$n" -eq 0 ]; then
  [ "$rc" -eq 2 ] || fail "expected exit status 2"
  echo "$out" | grep -q "^experiment 1/" && fail "an experiment ran"
  [ -e "$dir/sweep.csv" ] || [ -e "$dir/sweep.jsonl" ] && fail "a sweep file was created"
  echo "PASS"
  exit 0
fi
[ "$rc" -eq 0 ] || fail "the sweep failed"
[ "$(wc -l <"$dir/sweep.csv")" -eq $((n + 1)) ] || fail "sweep.csv: expected $n rows and a header"
[ "$(wc -l <"$dir/sweep.jsonl")" -eq "$n" ] || fail "sweep.jsonl: expected $n lines"
[ "$(echo "$out" | grep -c "^experiment [0-9]*/$n: ")" -eq "$n" ] || fail "progress lines"
[ "$(echo "$out" | grep -cE "^ +[0-9]+ .* PASSED +0$")" -eq "$n" ] || fail "table rows"
echo "$out" | grep -q "^# cgemm-run sweep: $n experiments" || fail "table header"
python3 - "$dir/sweep.csv" "$dir/sweep.jsonl" "$n" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
lines = [json.loads(l) for l in open(sys.argv[2])]
n = int(sys.argv[3])
assert [int(r["experiment"]) for r in rows] == list(range(1, n + 1)), rows
assert [l["experiment"] for l in lines] == list(range(1, n + 1)), lines
assert all(r["check_result"] == "PASSED" for r in rows)
assert len({r["swept"] for r in rows}) == n, "experiments must differ"
PY
[ $? -eq 0 ] || fail "file contents"
echo "PASS"
