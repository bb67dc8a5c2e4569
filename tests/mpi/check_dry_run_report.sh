#!/usr/bin/env bash
# check_dry_run_report.sh FILE RANKS BACKEND CMD...: CMD is a cgemm-run --dry_run given
# --report FILE. Passes when it exits 0, says it wrote FILE, and FILE holds the plan as JSON:
# RANKS ranks, the GEMMs with their bytes, the memory, and BACKEND as the printed backend.
set -u
file=$1
ranks=$2
backend=$3
shift 3
rm -f "$file"
out=$(timeout 30 "$@" 2>&1)
rc=$?
echo "$out"
echo "--- exit status $rc"
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -eq 0 ] || fail "exit status $rc"
[ -s "$file" ] || fail "no report written to $file"
echo "$out" | grep -q "^plan written to $file" || fail "no line saying the plan was written"
echo "$out" | grep -q "; backend $backend " || fail "the printed backend is not $backend"
python3 - "$file" "$ranks" "$backend" <<'PY' || fail "report contents"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["dry_run"] is True, r
assert r["backend"] == sys.argv[3], r["backend"]
assert len(r["ranks"]) == int(sys.argv[2]), r["ranks"]
assert all(isinstance(x["bytes"], int) and x["bytes"] > 0 for x in r["ranks"]), r["ranks"]
assert r["gemms"] and all(g["schedule"] and g["bytes_per_rank"]["lhs"] > 0 for g in r["gemms"])
assert r["memory"] and r["memory"][0]["memory"] == ("host" if r["backend"] == "cpu" else "gpu")
PY
echo "PASS"
