#!/usr/bin/env bash
# transport_bits.sh NP MPIRUN CGEMM_RUN [ARGS...]: the ring over UCX gives the same bits as over
# MPI. Runs cgemm-run on NP ranks (one host) with transport mpi and transport ucx for each knob
# set (aggregate_all_gather off / on, chunks_per_rank 1 / 2) on a block of an all-gather GEMM
# and a reduce-scatter GEMM, and requires every run to pass its check and the output checksums
# of the two transports to be identical. ARGS go to every run (e.g. --dp 2).
# BACKEND=cuda TRANSPORTS="ce ucx" compares those on the CUDA backend instead (scripts/
# device-ucx.sh, with --gpu_sharing on and CGEMM_GEMM_AUTOTUNE=0 so that both runs pick the
# same GEMM algorithms).
set -u
np=$1 mpirun=$2 run=$3
shift 3
backend=${BACKEND:-cpu}
read -r -a transports <<<"${TRANSPORTS:-mpi ucx}"
first=${transports[0]} second=${transports[1]}
# The words cgemm-run prints after "transport" for each.
declare -A printed=([mpi]=mpi [ucx]=ucx [ce]=copy-engine [nccl]=nccl)
config=$(mktemp --suffix=.ini)
trap 'rm -f "$config"' EXIT
printf 'gemm = up all_gather 64 96\ngemm = down reduce_scatter 96 64\n' >"$config"
status=0
for knobs in "--aggregate_all_gather off --chunks_per_rank 1" \
  "--aggregate_all_gather on --chunks_per_rank 1" \
  "--aggregate_all_gather off --chunks_per_rank 2" \
  "--aggregate_all_gather on --chunks_per_rank 2"; do
  declare -A sums=()
  for transport in "$first" "$second"; do
    # shellcheck disable=SC2086 # MPIRUN may carry its own options (scripts/device-ucx.sh)
    out=$(timeout "${RUN_TIMEOUT:-60}" $mpirun -np "$np" "$run" --backend "$backend" --batch 4 --seq_len 32 \
      --config "$config" --warmup 1 --iterations 1 --check_rounds 2 --timeout 30 \
      --transport "$transport" $knobs "$@" 2>&1)
    rc=$?
    if [ "$rc" -ne 0 ] || ! echo "$out" | grep -q "cgemm-run: all checks PASSED"; then
      echo "$out" | tail -n 20
      echo "FAIL ($knobs, transport $transport): exit status $rc"
      status=1
    fi
    echo "$out" | grep -q "backend $backend, transport ${printed[$transport]}" || {
      echo "FAIL ($knobs): the job did not run transport $transport"
      status=1
    }
    sums[$transport]=$(echo "$out" | grep -o 'output checksum [0-9a-f]*' | awk '{ printf "%s ", $3 }')
  done
  echo "$knobs: transport $first ${sums[$first]}| transport $second ${sums[$second]}"
  if [ -z "${sums[$first]}" ] || [ "${sums[$first]}" != "${sums[$second]}" ]; then
    echo "FAIL ($knobs): the output checksums of transport $first and $second differ (or are missing)"
    status=1
  fi
done
[ "$status" -eq 0 ] && echo PASS
exit $status
