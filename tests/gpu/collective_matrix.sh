#!/usr/bin/env bash
# collective_matrix.sh BIN_DIR: the overlapped collective GEMMs on 2 GPUs against the
# non-overlapped NCCL reference (cgemm-run's check), over collectives x transports x
# batch/bias/layout, plus aggregate all-gather and 1 and 2 compute streams.
# Exits 77 (CTest: skipped) with fewer than 2 GPUs; 1 when any case fails.
set -u -o pipefail
bin=$1
gpus=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU" || true)
if [ "${gpus:-0}" -lt 2 ]; then
  echo "SKIPPED: the collective GPU tests need 2 GPUs; this machine has ${gpus:-0}"
  exit 77
fi
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failures=0
cases=0
run() {
  local name=$1
  shift
  cases=$((cases + 1))
  local log
  log=$(timeout 120 mpirun -np 2 --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH \
    "$bin/cgemm-run" --backend cuda --warmup 1 --iterations 3 "$@" 2>&1)
  local rc=$?
  local check
  check=$(echo "$log" | grep -E "check (PASSED|FAILED)" | sed 's/.*check/check/' | head -n 1)
  if [ $rc -eq 0 ]; then
    printf "PASS  %-44s %s\n" "$name" "$check"
  else
    failures=$((failures + 1))
    printf "FAIL  %-44s rc=%d\n" "$name" $rc
    echo "$log" | tail -n 15 | sed 's/^/      /'
  fi
}
shape=(--seq_len 2048 --hidden_in 1024 --hidden_out 2048)
for coll in none all_gather reduce_scatter; do
  for ce in on off; do
    t="ce" && [ $ce = off ] && t="nccl"
    run "${coll}_${t}_b1_bias" "${shape[@]}" --collective $coll --use_ce $ce --batch 1 --bias on
    run "${coll}_${t}_b3_nobias" "${shape[@]}" --collective $coll --use_ce $ce --batch 3 --bias off
    run "${coll}_${t}_b2_bias_seqfirst" "${shape[@]}" --collective $coll --use_ce $ce --batch 2 \
      --bias on --transpose_batch_sequence on
  done
done
for ce in on off; do
  run "all_gather_aggregate_ce_$ce" "${shape[@]}" --collective all_gather --use_ce $ce --batch 2 \
    --aggregate_all_gather on
done
for s in 1 2; do
  run "all_gather_${s}stream" "${shape[@]}" --collective all_gather --batch 2 --num_max_streams $s
  run "reduce_scatter_${s}stream" "${shape[@]}" --collective reduce_scatter --batch 2 --num_max_streams $s
done
run "fp16_reduce_scatter" "${shape[@]}" --collective reduce_scatter --batch 2 --dtype fp16
run "fp32_all_gather" "${shape[@]}" --collective all_gather --batch 2 --dtype fp32
echo "collective matrix: $((cases - failures)) of $cases cases passed"
[ $failures -eq 0 ]
