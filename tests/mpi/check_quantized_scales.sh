#!/usr/bin/env bash
# check_quantized_scales.sh DIR MPIEXEC CGEMM_RUN: per-tensor scaling takes one scale per
# global tensor (each rank's amax max-reduced over the job), so a config quantizes with the
# same scales on 1 rank and on dp 2 x tp 2, for both collectives and both per-tensor modes; a
# run with another seed must give other scales, so the comparison can fail.
set -euo pipefail
dir=$1 mpiexec=$2 run=$3
mkdir -p "$dir"
scales() {  # report -> the scales of every GEMM, one JSON line
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps([g["scales"] for g in r["gemms"]], sort_keys=True))' "$1"
}
common=(--backend cpu --seq_len 64 --batch 2 --std 1 --warmup 1
  --iterations 1 --check_rounds 2 --gemm "up all_gather 64 64" --gemm "down reduce_scatter 64 64")
for scaling in current delayed; do
  "$mpiexec" -np 1 "$run" "${common[@]}" --scaling $scaling --report "$dir/one.json" >/dev/null
  "$mpiexec" -np 4 "$run" "${common[@]}" --scaling $scaling --dp 2 --report "$dir/four.json" >/dev/null
  "$mpiexec" -np 1 "$run" "${common[@]}" --scaling $scaling --seed 7 --report "$dir/seed7.json" >/dev/null
  one=$(scales "$dir/one.json") four=$(scales "$dir/four.json") other=$(scales "$dir/seed7.json")
  [ "$one" = "$four" ] || { echo "FAIL ($scaling): 1 rank $one, dp 2 x tp 2 $four"; exit 1; }
  [ "$one" != "$other" ] || { echo "FAIL ($scaling): another seed gave the same scales"; exit 1; }
  echo "$scaling: $one"
done
echo "PASS: the scales do not depend on the mesh"
