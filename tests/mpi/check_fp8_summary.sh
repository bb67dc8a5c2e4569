#!/usr/bin/env bash
# check_fp8_summary.sh MPIEXEC BENCH OUTDIR: scripts/fp8_summary.py on the files device-fp8.sh
# writes, made on the CPU backend (cgemm-bench tiny at tp 1 in bf16 and with --scaling current,
# --parts quantize, --parts chunking --scaling current) with a torch_scaled_mm.csv of made-up
# times for tiny: every table joins them (the torch / cgemm ratio of the FP8 GEMM, the bf16 /
# FP8 whole call, the quantize %, the FP8 chunking rows).
set -u
mpiexec=$1 bench=$2 out=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$out" && mkdir -p "$out"
fail() {
  [ -f "$out/summary" ] && cat "$out/summary"
  echo "FAIL: $*"
  exit 1
}
run() {
  "$mpiexec" -np 1 "$bench" --backend cpu --l2_mib 1 --warmup 0 --iterations 2 "$@" \
    >>"$out/log" 2>&1 || { cat "$out/log"; fail "cgemm-bench $*"; }
}
{
  echo "case,collective,tp,chunks,m,n,k,chunk_rows,bf16_ms,fp8_ms,fp8_fast_ms,fp8_chunks_ms,quantize_x_ms,quantize_w_ms,quant_gemm_ms,bf16_tflops,fp8_tflops,fp8_speedup,chunks_ratio"
  echo "tiny,all_gather,1,1,128,128,64,128,2,1,0.9,1,0.1,0.2,1.5,1,2,2,1"
  echo "tiny,all_gather,1,4,128,128,64,32,2,1,0.9,1.2,0.1,0.2,1.5,1,2,2,1.2"
  echo "tiny,all_gather,2,2,128,64,64,64,2,1,0.9,1.1,0.1,0.2,1.5,1,2,2,1.1"
} >"$out/torch_scaled_mm.csv"
run --cases tiny --knobs off --out "$out/bf16"
run --cases tiny --knobs off --scaling current --out "$out/fp8"
run --parts quantize --parts_max_copy_mib 2 --out "$out/parts"
run --parts chunking --scaling current --cases tiny --parts_tp 1,2 --parts_chunks_per_rank 1,2 \
  --torch_chunks "$out/torch_scaled_mm.csv" --out "$out/parts_fp8"
python3 "$root/scripts/fp8_summary.py" "$out" >"$out/summary" 2>&1 || { rc=$?; cat "$out/summary"; fail "exit $rc"; }
[ -s "$out/fp8_summary.md" ] || fail "no fp8_summary.md"
grep -qE '^\| tiny \| all_gather \| 128 x 128 x 64 \| [0-9.]+ \| 1\.000 \| [0-9.]+ \| 0\.900 \|' "$out/summary" ||
  fail "the FP8 GEMM row of tiny all_gather does not join torch._scaled_mm"
grep -qE '^\| tiny \| reduce_scatter \| .* \| - \| - \|' "$out/summary" ||
  fail "tiny reduce_scatter (no torch row) should show - for torch"
grep -qE '^\| tiny \| all_gather \| [0-9.]+ \| [0-9.]+ \| [0-9.]+x \| -?[0-9.]+ \| 1\.500 \| 0\.100, 0\.200 \|' "$out/summary" ||
  fail "the whole-call row of tiny all_gather"
grep -qE '^\| 2 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|' "$out/summary" || fail "the quantize row of 2 MiB"
grep -qE '^\| tiny \| all_gather \| 4: 1\.200 \| 2: 1\.100 \|' "$out/summary" || fail "the chunking row"
grep -q "current e4m3 x e4m3" "$out/summary" || fail "the scaling is not named"
# FP8 chunking: tiny all_gather tp 2, 2 chunks joins torch's 1 ms whole, 1.1 ms chunks; rows
# without torch figures show "-".
grep -q '^### FP8 chunking (e4m3 x e4m3)' "$out/summary" || fail "no FP8 chunking table"
grep -qE '^\| tiny \| all_gather \| 2 \| 2 \| [0-9 x]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| 1\.000 \| 1\.100 \| 1\.100 \| [0-9.]+ \|' "$out/summary" ||
  fail "the FP8 chunking row of tiny all_gather tp 2, 2 chunks"
grep -qE '^\| tiny \| reduce_scatter \| 2 \| 4 \| [0-9 x]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| - \| - \| - \| - \|' "$out/summary" ||
  fail "the FP8 chunking row of tiny reduce_scatter tp 2, 4 chunks (no torch row)"
[ "$(grep -cE '^\| tiny \| (all_gather|reduce_scatter) \| [12] \| [124] \| ' "$out/summary")" -eq 6 ] ||
  fail "expected 6 FP8 chunking rows (2 collectives x tp 1: 1, tp 2: 2, 4)"
echo PASS
