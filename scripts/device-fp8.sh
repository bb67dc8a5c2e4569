#!/usr/bin/env bash
# device-fp8.sh: the FP8 speed tables of issue 23 (item 7), one call on one GPU of the GPU
# machine: torch._scaled_mm against torch.mm (bench/peers/torch_scaled_mm.py, the whole GEMMs at
# tp 1 and their chunks at tp 1, 2, 4, 8), then cgemm-bench at tp 1 (one rank) in bf16 and with
# --scaling current on the same cases, then cgemm-bench --parts copy_bandwidth,quantize, then
# the FP8 chunking table (cgemm-bench --parts chunking --scaling current at tp 1, 2, 4, 8,
# joined with torch_scaled_mm.csv's chunks), then one screen of ratios (scripts/
# fp8_summary.py). Builds nothing (needs a .devbuild/ from pack-device.sh). Writes to $OUT:
# torch_scaled_mm.csv, bf16/ and fp8/cgemm_bench.{csv,json,md}, parts/cgemm_parts*.{md,csv},
# parts_fp8/cgemm_parts{.md,_chunking.csv}, fp8_summary.md, and fp8.tgz of them all.
# CASES (default: the sweep, standard,llama70b,gpt3_175b,small) picks the cases, CHUNK_CASES
# (standard,small; each must be in CASES for torch's figures) those of the chunking table,
# MAX_MIB (1024) the largest copy and quantize; extra arguments go to both cgemm-bench sweep
# runs (e.g. --iterations 10). Every step has its own time limit, about 8.5 minutes in all at
# most; a step that fails or times out leaves its columns empty and the exit status 1.
# STEPS (default torch,bf16,fp8,parts,chunking) runs only the steps named, for a short call;
# without the torch step, TORCH_CSV names an earlier torch_scaled_mm.csv to join and summarize
# (e.g. docs/data/2026-12-03-fp8/torch_scaled_mm.csv: torch's figures from an earlier run).
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.devbuild/bin
out=${OUT:-/tmp/cgemm-fp8}
cases=${CASES:-standard,llama70b,gpt3_175b,small}
chunk_cases=${CHUNK_CASES:-standard,small}
max_mib=${MAX_MIB:-1024}  # the copy and quantize sizes: 1 MiB up to this
mkdir -p "$out/bf16" "$out/fp8" "$out/parts" "$out/parts_fp8"
. "$root/scripts/device-libs.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
status=0
# bench NAME LIMIT_S ARGS...: cgemm-bench on one rank, its output in $OUT/NAME.log; the
# progress lines show here (the tables are in the files and the summary).
bench() {
  local name=$1 limit=$2
  shift 2
  timeout "$limit" mpirun -np 1 --bind-to none -x LD_LIBRARY_PATH \
    ${NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION+-x NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION} \
    "$bin/cgemm-bench" "$@" \
    >"$out/$name.log" 2>&1 || { status=1; tail -n 5 "$out/$name.log"; }
  grep -E "^[a-z0-9_]+ (all_gather|reduce_scatter) \[|^quantize: .* MiB|^chunking: .* ratio|error" \
    "$out/$name.log" | cut -c 1-160
}
steps=,${STEPS:-torch,bf16,fp8,parts,chunking},
for s in ${steps//,/ }; do
  case $s in
    torch | bf16 | fp8 | parts | chunking) ;;
    *) echo "device-fp8.sh: unknown step '$s' in STEPS (torch, bf16, fp8, parts, chunking)" >&2; exit 2 ;;
  esac
done
wants() { [[ $steps == *,$1,* ]]; }
if wants torch; then
  echo "== torch._scaled_mm and torch.mm ($cases; tp 1,2,4,8)"
  timeout 150 python3 "$root/bench/peers/torch_scaled_mm.py" --out "$out" --cases "$cases" \
    --tp 1,2,4,8 || status=1
elif [ -n "${TORCH_CSV:-}" ]; then
  echo "== torch._scaled_mm figures from $TORCH_CSV (an earlier run)"
  [ "$TORCH_CSV" -ef "$out/torch_scaled_mm.csv" ] || cp "$TORCH_CSV" "$out/torch_scaled_mm.csv" ||
    status=1
fi
if wants bf16; then
  echo "== cgemm-bench tp 1, bf16"
  bench bf16 100 --cases "$cases" --knobs off --out "$out/bf16" "$@"
fi
if wants fp8; then
  echo "== cgemm-bench tp 1, --scaling current"
  bench fp8 100 --cases "$cases" --knobs off --scaling current --out "$out/fp8" "$@"
fi
if wants parts; then
  echo "== cgemm-bench --parts copy_bandwidth,quantize (1 to $max_mib MiB)"
  bench parts 60 --parts copy_bandwidth,quantize --parts_max_copy_mib "$max_mib" --out "$out/parts"
fi
if wants chunking; then
  echo "== cgemm-bench --parts chunking --scaling current ($chunk_cases; tp 1,2,4,8)"
  torch=()
  [ -s "$out/torch_scaled_mm.csv" ] && torch=(--torch_chunks "$out/torch_scaled_mm.csv")
  # torch_scaled_mm.py times its chunks without fast accumulation (torch's default): so does
  # this step (the seed's switch), so that both sides of the table accumulate alike.
  NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION=1 bench parts_fp8 90 --parts chunking \
    --scaling current --cases "$chunk_cases" --parts_tp 1,2,4,8 ${torch[@]+"${torch[@]}"} \
    --out "$out/parts_fp8"
fi
echo "== summary"
python3 "$root/scripts/fp8_summary.py" "$out" || status=1
tar czf "$out/fp8.tgz" -C "$out" --exclude fp8.tgz . 2>/dev/null
exit $status
