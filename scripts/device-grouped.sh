#!/usr/bin/env bash
# device-grouped.sh: issue 25 items 3 and 5 in one call on the GPU machine (one GPU, about
# 4 minutes; each step has its own timeout, 5.5 minutes in all at most). Builds nothing
# (needs a .devbuild/ from pack-device.sh):
#  1. test_grouped_plan --backend=cuda: every path (loop, cuBLAS grouped, cuBLASLt tiles and
#     device tiles) against fp64 references;
#  2. cgemm-bench --parts grouped: the loop of cuBLASLt GEMMs, one cublasGemmGroupedBatchedEx,
#     the cuBLASLt tiles, the device tiles (eager and replayed from a CUDA graph) and one dense
#     cuBLASLt GEMM on the issue's five MoE cases (bf16, medians of 20);
#  3. bench/peers/torch_grouped_mm.py: torch._grouped_mm and a loop of torch.mm on the same
#     sizes (both print their size vectors; the step compares them);
#  4. one joined table (scripts/grouped_table.py), and a summary line per step.
# Writes $OUT (default /tmp/cgemm-grouped): test.log, cgemm_parts.md, cgemm_parts_grouped.csv,
# bench.log, torch_grouped_mm.csv, torch.log, grouped_table.md. Extra arguments go to
# cgemm-bench (e.g. --iterations 10). Exit 1 when a step failed.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.devbuild/bin
out=${OUT:-/tmp/cgemm-grouped}
mkdir -p "$out"
. "$root/scripts/device-libs.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | head -1
status=0
summary=()
t0=$SECONDS
# gtest's closing counts ("[  PASSED  ] 16 tests." and any SKIPPED / FAILED count), uncoloured.
counts() {
  tr -d '\033' <"$1" | sed 's/\[[0-9;]*m//g' | grep -aE '^\[ +(PASSED|SKIPPED|FAILED) +\] [0-9]+ tests?' |
    sed 's/, listed below://' | tr '\n' ' '
}

echo "== 1. test_grouped_plan --backend=cuda"
if timeout 90 mpirun -np 1 --bind-to none -x LD_LIBRARY_PATH "$bin/test_grouped_plan" --backend=cuda \
  >"$out/test.log" 2>&1; then
  summary+=("PASS  test_grouped_plan --backend=cuda ($(counts "$out/test.log"))")
else
  rc=$? status=1
  summary+=("FAIL  test_grouped_plan --backend=cuda (exit $rc; $(counts "$out/test.log"); $out/test.log)")
fi
tail -n 25 "$out/test.log"

echo "== 2. cgemm-bench --parts grouped ($((SECONDS - t0)) s so far)"
if timeout 150 mpirun -np 1 --bind-to none -x LD_LIBRARY_PATH "$bin/cgemm-bench" --backend cuda \
  --parts grouped --out "$out" "$@" >"$out/bench.log" 2>&1; then
  summary+=("PASS  cgemm-bench --parts grouped")
else
  rc=$? status=1
  summary+=("FAIL  cgemm-bench --parts grouped (exit $rc; $out/bench.log)")
fi
grep -E "^grouped: .* ms" "$out/bench.log" || tail -n 20 "$out/bench.log"

echo "== 3. torch._grouped_mm and a loop of torch.mm ($((SECONDS - t0)) s so far)"
if timeout 90 python3 "$root/bench/peers/torch_grouped_mm.py" --out "$out" >"$out/torch.log" 2>&1; then
  summary+=("PASS  torch_grouped_mm.py")
else
  rc=$? status=1
  summary+=("FAIL  torch_grouped_mm.py (exit $rc; $out/torch.log)")
fi
grep -vE ": sizes " "$out/torch.log" | tail -n 20
# The same size vectors on both sides (the rule is written twice, in C++ and Python).
if diff <(grep -E "^grouped: .*: sizes " "$out/bench.log" | sed 's/^grouped: //') \
  <(grep -E ": sizes " "$out/torch.log") >/dev/null; then
  summary+=("PASS  the size vectors of cgemm-bench and torch_grouped_mm.py agree")
else
  status=1
  summary+=("FAIL  the size vectors of cgemm-bench and torch_grouped_mm.py differ (bench.log, torch.log)")
fi

echo "== 4. joined table ($((SECONDS - t0)) s so far)"
if [ -f "$out/cgemm_parts_grouped.csv" ]; then
  torch_csv=()
  [ -f "$out/torch_grouped_mm.csv" ] && torch_csv=("$out/torch_grouped_mm.csv")
  python3 "$root/scripts/grouped_table.py" "$out/cgemm_parts_grouped.csv" "${torch_csv[@]}" \
    | tee "$out/grouped_table.md"
else
  echo "no cgemm_parts_grouped.csv: no table"
fi
echo
echo "== summary ($((SECONDS - t0)) s)"
printf '%s\n' "${summary[@]}"
exit $status
