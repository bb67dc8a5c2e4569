#!/usr/bin/env bash
# check_moe.sh DIR ROUTER CMD...: CMD is a cgemm-run job of experiment = moe with
# moe_router ROUTER; it is given --report DIR/report.json. The job must pass (exit 0, both
# projections' checks PASSED on stdout) and its report must hold the MoE block: group sizes
# of G entries summing to the tokens (one non-zero for one_group, at least moe_empty_groups
# zeros otherwise), per projection and for the block the FLOPs of the real (ragged) work
# (2 x sum(sizes) x H x F per projection), medians and samples in ms, TFLOP/s, and each
# projection's check against the fp64 reference (every element compared, none failed).
set -euo pipefail
dir=$1
router=$2
shift 2
rm -rf "$dir"
mkdir -p "$dir"
"$@" --report "$dir/report.json" >"$dir/run.out" 2>&1 || {
  cat "$dir/run.out"
  echo "FAIL: the job failed"
  exit 1
}
cat "$dir/run.out"
for line in "\[moe_up\] check PASSED" "\[moe_down\] check PASSED" "cgemm-run: all checks PASSED" \
  "group sizes \(tokens per expert, sorted by expert\): \[" "\[block\] up \+ down: [0-9.]+ ms"; do
  grep -E -q "$line" "$dir/run.out" || { echo "FAIL: no line matching '$line'"; exit 1; }
done
python3 - "$dir/report.json" "$router" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
router = sys.argv[2]
c = r["config"]
assert c["experiment"] == "moe" and c["moe_router"] == router, c
m = r["moe"]
t, g, h, f = m["tokens"], m["experts"], m["hidden"], m["ffn"]
assert (t, g, h, f) == (c["moe_tokens"], c["moe_experts"], c["moe_hidden"], c["moe_ffn"]), m
sizes = m["group_sizes"]
assert len(sizes) == g and sum(sizes) == t and min(sizes) >= 0, sizes
if router == "one_group":
    assert sum(1 for s in sizes if s) == 1, sizes
else:
    assert sizes.count(0) >= m["empty_groups"], sizes
assert m["router"] == router and m["ranks"] == r["world_size"], m
up, down = m["projections"]
assert up["name"] == "moe_up" and down["name"] == "moe_down"
assert up["lhs_shape"] == [t, h] and up["rhs_shape"] == [g, h, f] and up["out_shape"] == [t, f], up
assert down["lhs_shape"] == [t, f] and down["rhs_shape"] == [g, f, h] and down["out_shape"] == [t, h], down
work = 2.0 * sum(sizes) * h * f
for p in (up, down):
    assert p["flops"] == work, (p["flops"], work)
    assert len(p["samples_ms"]) == c["iterations"] and p["median_ms"] > 0, p
    assert abs(p["tflops_per_rank"] - work / (p["median_ms"] * 1e-3) / 1e12) <= 1e-9 * p["tflops_per_rank"], p
    k = p["check"]
    rows = t if c["moe_check_rows"] == 0 else None
    n = p["out_shape"][1]
    if rows is not None:
        assert k["rows"] == rows * r["world_size"] * c["check_rounds"], k
        assert k["compared"] == k["rows"] * n, k
    assert k["passed"] is True and k["failures"] == 0 and k["max_error_over_bound"] <= 1, k
b = m["block"]
assert b["flops"] == 2 * work and b["median_ms"] > 0 and b["tflops_per_rank"] > 0, b
assert r["checked"] is True and r["passed"] is True, r
print("report OK:", router, sizes)
PY
echo "PASS"
