#!/usr/bin/env bash
# train_diverged_check.sh REPORT CMD...: runs CMD (an mpirun of cgemm-train whose lr makes the
# loss overflow, with --report REPORT). Passes when the job ends with exit status 5 and one
# line "cgemm-train: error: training diverged: the loss of step N is nan|inf|-inf", and the
# report names that step under "diverged" with the non-finite losses written as strings (JSON
# has no NaN: they used to be null, and the job exited 0).
set -u
report=$1
shift
errfile=$(mktemp)
trap 'rm -f "$errfile"' EXIT
rm -f "$report"
timeout 120 "$@" >/dev/null 2>"$errfile"
rc=$?
echo "--- stderr"
cat "$errfile"
echo "--- exit status $rc"
[ "$rc" -eq 5 ] || { echo "FAIL: exit status $rc, expected 5 (training diverged)"; exit 1; }
lines=$(grep -c "cgemm-train: error: training diverged: the loss of step [0-9]* is \(nan\|inf\|-inf\) (lr " "$errfile")
[ "$lines" -eq 1 ] || { echo "FAIL: $lines 'training diverged' lines, expected 1"; exit 1; }
python3 - "$report" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
d = r.get("diverged")
assert isinstance(d, dict) and d["step"] == len(r["losses"]), f"diverged: {d}"
assert d["loss"] in ("nan", "inf", "-inf"), d
assert None not in r["losses"], r["losses"]
assert r["losses"][-1] == d["loss"], r["losses"]
assert all(isinstance(l, float) for l in r["losses"][:-1]), r["losses"]
print("report:", d, "losses", r["losses"])
PY
echo "PASS"
