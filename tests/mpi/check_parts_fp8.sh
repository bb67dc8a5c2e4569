#!/usr/bin/env bash
# check_parts_fp8.sh MPIEXEC BENCH OUTDIR: cgemm-bench --parts chunking --scaling current on the
# CPU backend (which emulates the quantize kernels and the FP8 GEMMs), tiny case, tp 1, 2, 4
# and 1, 2 chunks per rank, with a torch_scaled_mm.py CSV (its FP8 columns) for one row: one row
# per collective, tp and chunk count (tp 1 takes one), each e4m3 x e4m3 with positive times,
# torch._scaled_mm's figures on exactly that row; a torch CSV of the other dtype is refused
# (exit 2) both ways. (A scaling without chunking, or not per-tensor: mpi_bench_error_parts_*.)
set -u
mpiexec=$1 bench=$2 out=$3
rm -rf "$out" && mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }
{
  echo "case,collective,tp,chunks,m,n,k,chunk_rows,bf16_ms,fp8_ms,fp8_fast_ms,fp8_chunks_ms,quantize_x_ms,quantize_w_ms,quant_gemm_ms,bf16_tflops,fp8_tflops,fp8_speedup,chunks_ratio"
  echo "tiny,reduce_scatter,2,4,128,128,32,32,2,0.5,0.45,0.6,0.1,0.2,1.5,1,2,2,1.2"
} >"$out/torch_scaled_mm.csv"
"$mpiexec" -np 1 "$bench" --backend cpu --l2_mib 1 --parts chunking --scaling current --cases tiny \
  --parts_tp 1,2,4 --parts_chunks_per_rank 1,2 --warmup 0 --iterations 2 \
  --torch_chunks "$out/torch_scaled_mm.csv" --out "$out" >"$out/log" 2>&1 ||
  { rc=$?; cat "$out/log"; fail "exit $rc"; }
csv=$out/cgemm_parts_chunking.csv
[ -s "$csv" ] || fail "no cgemm_parts_chunking.csv"
head -n 1 "$csv" | grep -q '^case,collective,tp,chunks,dtype,' || fail "no dtype column after chunks"
# 2 collectives x (tp 1: 1 chunk; tp 2: 2, 4; tp 4: 4, 8).
rows=$(tail -n +2 "$csv" | grep -c .)
[ "$rows" -eq 10 ] || { cat "$csv"; fail "$rows rows, expected 10"; }
for coll in all_gather reduce_scatter; do
  for tc in 1,1 2,2 2,4 4,4 4,8; do
    n=$(grep -c "^tiny,$coll,$tc,e4m3 x e4m3," "$csv")
    [ "$n" -eq 1 ] || { cat "$csv"; fail "$coll tp,chunks $tc: $n e4m3 x e4m3 rows, expected 1"; }
  done
done
awk -F, 'NR > 1 && !($7 > 0 && $8 > 0 && $9 > 0) { bad = 1 } END { exit bad }' "$csv" ||
  { cat "$csv"; fail "a chunking time is not positive"; }
# torch._scaled_mm's fp8_ms and fp8_chunks_ms join tiny reduce_scatter tp 2, 4 chunks only.
joined=$(awk -F, 'NR > 1 && $12 != ""' "$csv" | grep -c .)
[ "$joined" -eq 1 ] || { cat "$csv"; fail "torch._scaled_mm figures joined $joined rows, expected 1"; }
grep -q '^tiny,reduce_scatter,2,4,e4m3 x e4m3,.*,0\.5000,0\.6000,1\.200,' "$csv" ||
  { cat "$csv"; fail "torch._scaled_mm figures are not on tiny reduce_scatter tp 2, 4 chunks"; }
grep -q 'torch._scaled_mm chunks / whole' "$out/cgemm_parts.md" ||
  fail "cgemm_parts.md does not name torch._scaled_mm"
# refused REGEX ARGS...: exit 2 and one message matching REGEX.
refused() {
  local regex=$1
  shift
  "$mpiexec" -np 1 "$bench" --backend cpu --l2_mib 1 --cases tiny "$@" --out "$out/refused" \
    >"$out/refused.log" 2>&1
  local rc=$?
  [ "$rc" -eq 2 ] || { cat "$out/refused.log"; fail "$*: exit $rc, expected 2"; }
  [ "$(grep -cE "$regex" "$out/refused.log")" -eq 1 ] ||
    { cat "$out/refused.log"; fail "$*: expected one message matching '$regex'"; }
}
printf 'case,collective,tp,chunks,whole_ms,chunks_ms\ntiny,all_gather,2,4,0.5,0.75\n' >"$out/torch_mm.csv"
refused "error: --torch_chunks: .*torch_mm.csv' holds torch.mm times of bf16 chunks, \
but --parts chunking times e4m3 x e4m3 chunks" \
  --parts chunking --scaling current --torch_chunks "$out/torch_mm.csv"
refused "error: --torch_chunks: .*torch_scaled_mm.csv' holds torch._scaled_mm times of \
e4m3 x e4m3 chunks, but --parts chunking times bf16 chunks" \
  --parts chunking --torch_chunks "$out/torch_scaled_mm.csv"
echo "PASS"
