#!/usr/bin/env bash
# check_trace_block.sh OUT_JSON B S CMD...: runs CMD (a cgemm-run of a block of GEMMs with
# --trace OUT_JSON, batch B, seq_len S, on 2 ranks) and checks that the trace separates and
# labels the block's GEMMs, carries bytes and FLOPs in every event's args, tells each transfer's
# wait apart, and that the SVG shows the GEMMs' and bars' labels as text.
set -euo pipefail
trace=$1 batch=$2 seq=$3
shift 3
rm -f "$trace" "$trace.svg"
"$@"
python3 - "$trace" "$batch" "$seq" "$@" <<'PY'
import json, re, sys
path, batch, seq = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
args = sys.argv[4:]
gemms = [a.split() for i, a in enumerate(args) if i > 0 and args[i - 1] == "--gemm"]
tp = 2
doc = json.load(open(path))
events = doc["traceEvents"]
xs = [e for e in events if e["ph"] == "X"]
for e in xs:
    assert isinstance(e["args"]["bytes"], int) and isinstance(e["args"]["flops"], int), e
threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
           if e["ph"] == "M" and e["name"] == "thread_name"}
names = [g[0] for g in gemms]
for r in (0, 1):
    calls = [e for e in xs if e["pid"] == r and e["cat"] == "call"]
    assert [c["name"] for c in calls] == names, f"rank {r} calls: {calls}"
    for c in calls:
        assert threads[(r, c["tid"])] == "GEMM calls", threads
    for (name, op, k, n), c in zip(gemms, calls):
        inside = [e for e in xs if e["pid"] == r and e["args"].get("gemm") == name
                  and e["cat"] != "call"]
        assert inside, f"rank {r}: no events of {name}"
        for e in inside:  # each GEMM's events lie in its call, apart from the other GEMMs'
            assert c["ts"] - 1e-3 <= e["ts"] and e["ts"] + e["dur"] <= c["ts"] + c["dur"] + 1e-3, e
        flops = sum(e["args"]["flops"] for e in inside if e["cat"] == "gemm")
        want = 2 * batch * seq * int(k) * int(n) // tp
        assert flops == want == c["args"]["flops"], f"{name} rank {r}: {flops} FLOPs, want {want}"
        sent = sum(e["args"]["bytes"] for e in inside if e["cat"] == "transfer")
        rows = batch * seq // tp  # bf16 shards of x (all-gather) or partials (reduce-scatter)
        want = rows * int(k if op == "all_gather" else n) * 2
        assert sent == want == c["args"]["bytes"], f"{name} rank {r}: {sent} bytes, want {want}"
        transfers = [e for e in inside if e["cat"] == "transfer"]
        waits = {e["name"] for e in inside if e["cat"] == "wait"}
        for t in transfers:
            assert "wait for " + t["name"] in waits, f"no wait for {t['name']}: {waits}"
            assert threads[(r, t["tid"])] == "transport"
    # the calls are separated on the time axis and the same on both ranks
    for a, b in zip(calls, calls[1:]):
        assert a["ts"] + a["dur"] < b["ts"], (a, b)
calls0 = [(e["ts"], e["dur"]) for e in xs if e["pid"] == 0 and e["cat"] == "call"]
calls1 = [(e["ts"], e["dur"]) for e in xs if e["pid"] == 1 and e["cat"] == "call"]
assert calls0 == calls1, (calls0, calls1)
svg = open(path + ".svg").read()
bands = re.findall(r'<text class="call"[^>]*>([^<]*)</text>', svg)
# A band narrower than its label shows the label cut short with an ellipsis ("up_pr…": one call
# that took much longer than the other, as under ASan on a loaded machine).
def names_match(band, name):
    label = band.split(" (")[0]
    return label == name or (label.endswith("\u2026") and name.startswith(label[:-1]))
assert len(bands) == len(names) and all(map(names_match, bands, names)), bands
bars = re.findall(r'<text [^>]*font-size="9"[^>]*>([^<]+)</text>', svg)
assert bars, "no bar is labelled in the SVG"
assert 'fill="url(#waiting)"' in svg
print(f"trace OK: {len(xs)} events, calls {names}, {len(bars)} labelled bars")
PY
