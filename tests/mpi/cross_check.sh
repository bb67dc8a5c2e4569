#!/usr/bin/env bash
# cross_check.sh DIR MPIEXEC CGEMM_RUN CGEMM_COMPARE: the same config and seed on two meshes
# (dp 2 x tp 2 and dp 1 x tp 2 on the CPU backend) write output dumps that cgemm-compare finds
# equal within tolerance; a run with another seed must be found to differ (exit 3), so the
# comparison can fail.
set -euo pipefail
dir=$1 mpiexec=$2 run=$3 compare=$4
mkdir -p "$dir"
common=(--backend cpu --config "$(dirname "$0")/../../configs/demo.ini" --seq_len 32 --batch 2
  --warmup 0 --iterations 1)
"$mpiexec" -np 4 "$run" "${common[@]}" --dp 2 --output_dump "$dir/dp2tp2.dump" >/dev/null
"$mpiexec" -np 2 "$run" "${common[@]}" --dp 1 --output_dump "$dir/tp2.dump" >/dev/null
"$mpiexec" -np 2 "$run" "${common[@]}" --dp 1 --seed 99 --output_dump "$dir/seed99.dump" >/dev/null
"$compare" "$dir/dp2tp2.dump" "$dir/tp2.dump"
set +e
"$compare" "$dir/dp2tp2.dump" "$dir/seed99.dump"
rc=$?
set -e
[ "$rc" -eq 3 ] || { echo "FAIL: outputs of another seed were not found to differ (exit $rc)"; exit 1; }
echo "PASS: meshes agree, another seed differs"
