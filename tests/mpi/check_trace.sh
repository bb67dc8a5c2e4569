#!/usr/bin/env bash
# check_trace.sh OUT_JSON CMD...: runs CMD (a cgemm-run with --trace OUT_JSON) and checks
# that the Chrome trace holds a GEMM span and a transfer span for every rank and that the
# SVG timeline beside it has a lane per rank and stream.
set -euo pipefail
trace=$1
shift
rm -f "$trace" "$trace.svg"
"$@"
python3 - "$trace" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
ranks = {e["pid"] for e in spans}
assert ranks == {0, 1}, f"ranks in trace: {ranks}"
for r in ranks:
    cats = {e["cat"] for e in spans if e["pid"] == r}
    assert {"gemm", "transfer"} <= cats, f"rank {r} categories: {cats}"
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans if e["pid"] == r)
svg = open(sys.argv[1] + ".svg").read()
assert svg.count("<rect") >= len(spans), "SVG misses spans"
assert "rank 1 transport" in svg
print(f"trace OK: {len(spans)} spans on {len(ranks)} ranks")
PY
