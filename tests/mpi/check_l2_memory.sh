#!/usr/bin/env bash
# check_l2_memory.sh MPIEXEC BENCH OUTDIR: cgemm-bench --l2_mib 4096 (each rank rotates its
# inputs over more than 8 GiB of copies) with enough ranks that their copies exceed this
# host's MemAvailable: refused by the memory check before any copy is allocated, with one
# message naming --l2_mib, exit 2. Skipped (77) where that would take more than 8 ranks.
set -u
mpiexec=$1 bench=$2 out=$3
avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
[ -n "$avail_kb" ] || { echo "SKIP: no MemAvailable in /proc/meminfo"; exit 77; }
need=$((avail_kb / (8 * 1024 * 1024) + 1))
ranks=1  # a power of two: the tiny case's sizes divide by tp
while [ "$ranks" -lt "$need" ]; do ranks=$((ranks * 2)); done
if [ "$ranks" -gt 8 ]; then
  echo "SKIP: $((avail_kb / 1024 / 1024)) GiB available: more than 8 ranks would be needed"
  exit 77
fi
rm -rf "$out" && mkdir -p "$out"
exec "$(dirname "$0")/expect_usage_error.sh" --program cgemm-bench \
  "cgemm-bench: error: --l2_mib 4096: each rank rotates its inputs over copies of more than 8192 MiB.*not enough memory" \
  "$mpiexec" -np "$ranks" "$bench" --backend cpu --cases tiny --knobs off --l2_mib 4096 \
  --warmup 0 --iterations 1 --out "$out"
