#!/usr/bin/env bash
# keeps_old_outputs.sh DIR CMD...: CMD is a cgemm-run that fails after the output checks,
# given --report DIR/report.json --trace DIR/trace.json. Before it runs, DIR holds only an old
# report.json; afterwards the job must have failed (status 2), report.json must be
# byte-identical, and nothing else may be in DIR (no trace, no SVG, no temporary file).
set -u
dir=$1
shift
rm -rf "$dir"
mkdir -p "$dir"
printf '{"old": "report of an earlier run"}\n' >"$dir/report.json"
cp "$dir/report.json" "$dir.expected"
timeout 30 "$@"
rc=$?
echo "--- exit status $rc"
[ "$rc" -eq 2 ] || { echo "FAIL: expected exit status 2"; exit 1; }
cmp "$dir/report.json" "$dir.expected" || { echo "FAIL: the old report changed"; exit 1; }
left=$(cd "$dir" && ls -A | grep -v '^report.json$')
[ -z "$left" ] || { echo "FAIL: files left in $dir: $left"; exit 1; }
rm -f "$dir.expected"
echo "PASS"
