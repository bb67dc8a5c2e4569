#!/usr/bin/env bash
# check_bench.sh MPIEXEC BENCH OUTDIR: cgemm-bench on the CPU backend, tiny case, 2 ranks, with
# --out a folder that does not exist yet: it is created; stdout, CSV, JSON and Markdown carry
# nccl-tests' bytes, algbw and busbw; TFLOP/s shows digits; the JSON carries the run's
# metadata. An --out that names a file is refused with one message (exit 2).
set -u
mpiexec=$1 bench=$2 base=$3
rm -rf "$base" && mkdir -p "$base"
out=$base/new/nested
fail() { echo "FAIL: $*"; exit 1; }
"$mpiexec" -np 2 "$bench" --backend cpu --cases tiny --knobs off --warmup 0 --iterations 2 \
  --l2_mib 1 --out "$out" >"$base/log" 2>&1 || { rc=$?; cat "$base/log"; fail "exit $rc"; }
for f in csv json md; do [ -s "$out/cgemm_bench.$f" ] || fail "no $out/cgemm_bench.$f"; done
# stdout: one line per row with the bytes and both bandwidths.
[ "$(grep -cE '^tiny (all_gather|reduce_scatter) \[default\]: .* TFLOP/s, .*16384 bytes \(8192 sent per rank\): algbw [0-9.]+, busbw [0-9.]+ GB/s alone, [0-9.]+ GB/s overlapped' "$base/log")" -eq 2 ] ||
  { cat "$base/log"; fail "stdout lacks the bytes and GB/s of both collectives"; }
grep -qE ' 0\.0 TFLOP/s' "$base/log" && fail "TFLOP/s printed as 0.0"
# CSV: the columns by name; tiny at tp 2 moves 16384 bytes (8192 per rank), busbw = algbw / 2.
python3 - "$out" <<'PY' || fail "CSV/JSON/Markdown check"
import csv, json, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/cgemm_bench.csv")))
assert len(rows) == 2, rows
for r in rows:
    assert r["bytes"] == "16384" and r["rank_bytes"] == "8192", r
    alg, bus, over = float(r["algbw_gb_s"]), float(r["busbw_gb_s"]), float(r["overlapped_busbw_gb_s"])
    assert alg > 0 and over > 0 and abs(bus - alg / 2) <= 0.01 * alg, r
    assert float(r["tflops"]) > 0, r
doc = json.load(open(f"{out}/cgemm_bench.json"))
assert list(doc) == ["run", "results"], list(doc)
run = doc["run"]
for key in ("date", "command", "cgemm_version", "git_commit", "host", "ranks", "dp", "tp",
            "backend", "machine", "describe"):
    assert key in run, key
assert run["backend"] == "cpu" and run["ranks"] == 2 and run["tp"] == 2, run
assert "--out" in run["command"] and run["cgemm_version"], run
assert "mpi" in run["machine"] and run["machine"]["backend"].startswith("cpu"), run["machine"]
assert len(doc["results"]) == 2
for r in doc["results"]:
    assert r["bytes"] == 16384 and r["rank_bytes"] == 8192, r
    assert abs(r["busbw_gb_s"] - r["algbw_gb_s"] / 2) < 1e-9 * r["algbw_gb_s"] + 1e-12, r
    assert r["tflops"] > 0 and r["overlapped_busbw_gb_s"] > 0, r
md = open(f"{out}/cgemm_bench.md").read()
assert "| bytes | algbw GB/s | busbw GB/s | overlapped busbw GB/s |" in md, md
assert "cgemm " + run["cgemm_version"] in md, md
assert "| 0.0 |" not in md.split("| execute() picks |")[1], md
PY
# --out naming a file: one message, exit 2, before any run.
: >"$base/a_file"
"$mpiexec" -np 2 "$bench" --backend cpu --cases tiny --knobs off --out "$base/a_file/sub" \
  >"$base/file.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || { cat "$base/file.log"; fail "--out under a file: exit $rc, expected 2"; }
[ "$(grep -c 'cgemm-bench: error: --out .*a_file/sub: cannot create the folder' "$base/file.log")" -eq 1 ] ||
  { cat "$base/file.log"; fail "expected one message naming --out"; }
echo PASS
