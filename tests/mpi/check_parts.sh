#!/usr/bin/env bash
# check_parts.sh MPIEXEC BENCH OUTDIR: cgemm-bench --parts all on the CPU backend, tiny case,
# with a torch.mm CSV for one row: every study writes its CSV with the rows expected, the
# torch.mm figures join exactly that row, and a torch.mm CSV without its columns is refused
# with one message (exit 2).
set -u
mpiexec=$1 bench=$2 out=$3
rm -rf "$out" && mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }
printf 'case,collective,tp,chunks,whole_ms,chunks_ms\ntiny,all_gather,2,4,0.5,0.75\n' >"$out/torch.csv"
"$mpiexec" -np 1 "$bench" --backend cpu --l2_mib 1 --parts all --cases tiny --parts_tp 2,4 \
  --parts_chunks_per_rank 1,2 --warmup 0 --iterations 2 --parts_max_copy_mib 2 \
  --torch_chunks "$out/torch.csv" --out "$out" >"$out/log" 2>&1 || { cat "$out/log"; fail "exit $?"; }
for s in chunking interference copy_bandwidth; do
  [ -s "$out/cgemm_parts_$s.csv" ] || fail "no cgemm_parts_$s.csv"
  grep -q "### $s" "$out/cgemm_parts.md" || fail "cgemm_parts.md has no $s table"
done
rows() { tail -n +2 "$out/cgemm_parts_$1.csv" | grep -c .; }
[ "$(rows chunking)" -eq 8 ] || fail "chunking: $(rows chunking) rows, expected 8 (2 collectives x 2 tp x 2)"
[ "$(rows interference)" -eq 4 ] || fail "interference: $(rows interference) rows, expected 4"
[ "$(rows copy_bandwidth)" -eq 2 ] || fail "copy_bandwidth: $(rows copy_bandwidth) rows, expected 2 (1, 2 MiB)"
# Without --scaling every chunking row is bf16 (the dtype column, 5th).
head -n 1 "$out/cgemm_parts_chunking.csv" | grep -q '^case,collective,tp,chunks,dtype,' ||
  fail "the chunking CSV has no dtype column after chunks"
awk -F, 'NR > 1 && $5 != "bf16" { bad = 1 } END { exit bad }' "$out/cgemm_parts_chunking.csv" ||
  fail "a chunking row without --scaling is not bf16"
# The torch row joins tiny all_gather tp 2 with 4 chunks (torch ratio 1.5), and no other row.
joined=$(awk -F, 'NR > 1 && $12 != ""' "$out/cgemm_parts_chunking.csv" | grep -c .)
[ "$joined" -eq 1 ] || fail "torch.mm figures joined $joined rows, expected 1"
grep -q '^tiny,all_gather,2,4,bf16,.*,0\.5000,0\.7500,1\.500,' "$out/cgemm_parts_chunking.csv" ||
  fail "torch.mm figures are not on tiny all_gather tp 2, 4 chunks"
# Every timing is a positive number.
awk -F, 'NR > 1 && !($7 > 0 && $8 > 0) { bad = 1 } END { exit bad }' "$out/cgemm_parts_chunking.csv" ||
  fail "a chunking time is not positive"
printf 'case,tp\ntiny,2\n' >"$out/bad.csv"
"$mpiexec" -np 1 "$bench" --backend cpu --l2_mib 1 --parts chunking --cases tiny --torch_chunks "$out/bad.csv" \
  --out "$out" >"$out/bad.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "a torch CSV without columns: exit $rc, expected 2"
[ "$(grep -c 'error: --torch_chunks: .*has no column' "$out/bad.log")" -eq 1 ] ||
  { cat "$out/bad.log"; fail "expected one message naming the missing column"; }
"$mpiexec" -np 1 "$bench" --backend cpu --l2_mib 1 --parts interference --cases tiny --num_max_streams 1 \
  --out "$out" >"$out/streams.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "--parts interference with one stream: exit $rc, expected 2"
grep -q 'error: --parts interference needs a second compute stream' "$out/streams.log" ||
  { cat "$out/streams.log"; fail "expected the stream message"; }
echo "PASS"
