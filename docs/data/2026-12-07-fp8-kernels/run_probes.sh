#!/usr/bin/env bash
# The probes of 2026-12-07 behind this folder (issue 42), on the GPU machine: builds the two
# probes with that machine's nvcc, runs them, and profiles the quantize-transpose variants with
# ncu. scripts/device-fp8-train.sh's step "probes" runs it. Writes $OUT: probes.log,
# ncu_transpose.txt, probes.tgz.
set -u -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/fp8-probes}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | head -1
nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/transpose_probe "$here/transpose_probe.cu" || exit 1
nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/fp8_tiles_probe "$here/fp8_tiles_probe.cu" -lcublasLt || exit 1
{
  echo "== transpose_probe"; timeout 120 /tmp/transpose_probe
  echo "== fp8_tiles_probe"; timeout 150 /tmp/fp8_tiles_probe
} 2>&1 | tee "$out/probes.log"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "== ncu: $ncu"
for v in 0 1; do
  timeout 90 "$ncu" --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats \
    /tmp/transpose_probe --once "$v" 256 2>&1
done >"$out/ncu_transpose.txt"
grep -E "^  v|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Warp Cycles Per Issued|L2 Hit|Mem Busy|Max Bandwidth|Stall" "$out/ncu_transpose.txt" | head -60
tar -czf "$out/probes.tgz" -C "$out" --exclude probes.tgz . 2>/dev/null || true
