#!/usr/bin/env bash
# check_sweep_columns.sh DIR N CMD...: CMD is a cgemm-run sweep of N experiments given
# --sweep_csv DIR/sweep.csv and --sweep_jsonl DIR/sweep.jsonl. Passes when it succeeds and
#  - every sweepable option has a column in the CSV and a key in every JSON line (swept or
#    not), and the JSON values keep their types (numbers, booleans, words);
#  - it prints the resolved config once (the swept lines holding their lists), one line per
#    experiment and no per-GEMM lines, and "all checks PASSED" once, after the last experiment.
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
[ "$rc" -eq 0 ] || fail "the sweep failed"
[ "$(echo "$out" | grep -c '^resolved config:')" -eq 1 ] || fail "resolved config printed more than once"
[ "$(echo "$out" | grep -c '^experiment [0-9]*/'"$n"': .*: overlapped .* check PASSED$')" -eq "$n" ] ||
  fail "expected $n one-line experiments"
echo "$out" | grep -qE '^\[[0-9]+/[0-9]+ ' && fail "per-GEMM lines in a sweep"
[ "$(echo "$out" | grep -c 'all checks PASSED')" -eq 1 ] || fail "'all checks PASSED' not exactly once"
last_exp=$(echo "$out" | grep -n "^experiment $n/$n: " | cut -d: -f1)
passed=$(echo "$out" | grep -n 'all checks PASSED' | cut -d: -f1)
[ "$passed" -gt "$last_exp" ] || fail "'all checks PASSED' before the last experiment"
python3 - "$dir/sweep.csv" "$dir/sweep.jsonl" "$n" "$out" <<'PY' || fail "file contents"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
lines = [json.loads(l) for l in open(sys.argv[2])]
n = int(sys.argv[3])
printed = sys.argv[4]
assert len(rows) == n and len(lines) == n, (len(rows), len(lines))
# cgemm-run's sweepable options (run_sweepable_options(); test_sweep_rows checks the list).
ints = ["batch", "seq_len", "hidden_in", "hidden_out", "seed", "warmup", "iterations",
        "check_rounds", "num_max_streams", "compute_stream_priority",
        "communication_stream_priority", "num_sm_for_communication", "chunks_per_rank"]
bools = ["bias", "transpose_batch_sequence", "check", "use_ce", "aggregate_all_gather"]
words = ["collective", "dtype", "overlap"]
numbers = ["std"]
for i, (r, j) in enumerate(zip(rows, lines)):
    assert set(r) == set(j), ("CSV and JSON columns differ", set(r) ^ set(j))
    for k in ints:
        assert k in r and isinstance(j[k], int) and not isinstance(j[k], bool), (i, k, j.get(k))
    for k in bools:
        assert k in r and isinstance(j[k], bool), (i, k, j.get(k))
    for k in words:
        assert k in r and isinstance(j[k], str), (i, k, j.get(k))
    for k in numbers:
        assert k in r and isinstance(j[k], float), (i, k, j.get(k))
    assert j["std"] == 0.023 and r["std"] == "0.023", (j["std"], r["std"])
assert [j["dtype"] for j in lines] == ["bfloat16", "float32"] * (n // 2), lines
assert "\ndtype = bfloat16, float32\n" in printed, "the config's swept line lists its values"
PY
echo "PASS"
