#!/usr/bin/env bash
# special_paths.sh DIR COMPARE CMD...: CMD is a small cgemm-run job (it takes more options),
# COMPARE is cgemm-compare. Outputs that are not plain files (#22 items 1 and 6):
# - a symlinked --report replaces the file the link names; the link stays a link;
# - --report /dev/null leaves /dev/null a character device (as root, the old rename put a
#   plain file there: the test makes it again if so, then fails);
# - a FIFO as --report, --config or a cgemm-compare input is refused with one message at once
#   (no wait for a reader or writer), and stays a FIFO;
# - a temporary file of a killed run beside --report is removed by the next run;
# - a sweep row on a full device (a symlink to /dev/full) ends the job naming ENOSPC.
set -u
dir=$1
compare=$2
shift 2
rm -rf "$dir"
mkdir -p "$dir/real"
fail() {
  echo "FAIL: $*"
  exit 1
}
# run NAME ARGS...: CMD ARGS within 30 s; output in $dir/NAME.log, status in $rc.
run() {
  local name=$1
  shift
  timeout 30 "$@" >"$dir/$name.log" 2>&1
  rc=$?
  echo "--- $name: exit status $rc"
  tail -n 3 "$dir/$name.log"
  [ "$rc" -ne 124 ] || fail "$name did not end within 30 s"
}
# refused NAME REGEX: the run failed with status 2 and printed one line matching REGEX.
refused() {
  [ "$rc" -eq 2 ] || fail "$1: exit status $rc, expected 2"
  n=$(grep -c -E -- "$2" "$dir/$1.log")
  [ "$n" -eq 1 ] || fail "$1: expected one line matching '$2', got $n"
}

echo '{"old": true}' >"$dir/real/r.json"
ln -s real/r.json "$dir/link.json"
run symlink "$@" --report "$dir/link.json"
[ "$rc" -eq 0 ] || fail "symlink: exit status $rc"
[ -L "$dir/link.json" ] || fail "the symlink was replaced"
grep -q '"backend"' "$dir/real/r.json" || fail "the report did not reach the link's file"

run dev_null "$@" --report /dev/null
if [ ! -c /dev/null ]; then
  [ "$(id -u)" -eq 0 ] && rm -f /dev/null && mknod -m 666 /dev/null c 1 3
  fail "/dev/null is no longer a character device"
fi
[ "$rc" -eq 0 ] || fail "dev_null: exit status $rc"

mkfifo "$dir/fifo"
run fifo_report "$@" --report "$dir/fifo"
refused fifo_report "--report .*fifo: is a FIFO"
run fifo_config "$@" --config "$dir/fifo"
refused fifo_config "--config .*fifo: is a FIFO"
run fifo_compare "$compare" "$dir/fifo" "$dir/real/r.json"
refused fifo_compare "cgemm-compare: error: .*fifo: is a FIFO"
[ -p "$dir/fifo" ] || fail "the FIFO was replaced"

sh -c 'exit 0' &
gone=$!
wait "$gone"
stale="$dir/real/.r.json.cgemm-tmp.$(hostname).$gone.AbC123"
echo "half a report" >"$stale"
run stale "$@" --report "$dir/link.json"
[ "$rc" -eq 0 ] || fail "stale: exit status $rc"
[ ! -e "$stale" ] || fail "the stale temporary file $stale is still there"

ln -s /dev/full "$dir/full.jsonl"
run full "$@" --dtype bf16,fp16 --sweep_jsonl "$dir/full.jsonl"
[ "$rc" -ne 0 ] || fail "full: the job succeeded on a full device"
n=$(grep -c -- "--sweep_jsonl .*full.jsonl: append failed (No space left on device)" "$dir/full.log")
[ "$n" -eq 1 ] || fail "full: expected one line naming ENOSPC, got $n"
[ -c /dev/full ] && [ -L "$dir/full.jsonl" ] || fail "/dev/full or its link was replaced"
echo "PASS"
