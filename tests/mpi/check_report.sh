#!/usr/bin/env bash
# check_report.sh DIR MERGE CMD...: CMD is a cgemm-run job of the block up (all_gather) and
# down (reduce_scatter) at tp 2 with seq-first activations and --dtype fp16, given
# --report DIR/report-0.json. Its report must hold JSON's own types: partition specs as
# arrays, the options as an object of typed values with the block as objects, and the
# version, commit and time; MERGE (scripts/slurm/merge_reports.py) must read it as a sweep's
# only task.
set -euo pipefail
dir=$1
merge=$2
shift 2
rm -rf "$dir"
mkdir -p "$dir"
"$@" --report "$dir/report-0.json" >"$dir/run.out" 2>&1 || {
  cat "$dir/run.out"
  echo "FAIL: the job failed"
  exit 1
}
python3 - "$dir/report-0.json" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
assert re.fullmatch(r"\d+\.\d+\.\d+", r["version"]), r["version"]
assert re.fullmatch(r"[0-9a-f]+(-dirty)?|unknown", r["commit"]), r["commit"]
assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["time"]), r["time"]
c = r["config"]
assert isinstance(c, dict), "config is not an object: %r" % (c,)
assert c["dtype"] == "float16" and c["tp"] == 2 and c["seq_len"] == 16, c
assert c["bias"] is True and c["transpose_batch_sequence"] is True, c
assert c["std"] == 0.023 and c["trace"] is None and c["report"] == sys.argv[1], c
assert c["gemm"] == [
    {"name": "up", "collective": "all_gather", "hidden_in": 32, "hidden_out": 64},
    {"name": "down", "collective": "reduce_scatter", "hidden_in": 64, "hidden_out": 32},
], c["gemm"]
up, down = r["gemms"]
# Sequence-first [S, B, H]: the sequence dim 0 is sharded over tpsp, the batch over dp.
assert up["lhs_spec"] == ["tpsp", "dp", None], up["lhs_spec"]
assert up["rhs_spec"] == [None, "tpsp"], up["rhs_spec"]
assert up["out_spec"] == [None, "dp", "tpsp"], up["out_spec"]
assert down["rhs_spec"] == ["tpsp", None], down["rhs_spec"]
assert down["out_spec"] == ["tpsp", "dp", None], down["out_spec"]
print("PASS: report: specs as arrays, typed config, version %s commit %s"
      % (r["version"], r["commit"]))
PY
python3 "$merge" "$dir" --expect 1 >"$dir/merge.out"
python3 - "$dir/sweep.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["name"] for r in rows] == ["up", "down"], rows
assert all(r["dtype"] == "float16" for r in rows), rows
# Sequence-first: batch and seq_len come from the right dims of lhs [S, B, K].
assert all((r["batch"], r["seq_len"]) == (2, 16) for r in rows), rows
assert "dtype = float16" in rows[0]["options"] and "report" not in rows[0]["options"], rows[0]
assert "gemm = up all_gather 32 64; down reduce_scatter 64 32" in rows[0]["options"], rows[0]
print("PASS: merge_reports read the report")
PY
