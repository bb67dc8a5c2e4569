#!/usr/bin/env bash
# The probes of 2026-12-07 behind this folder (issue 42), on the GPU machine: builds them with
# that machine's nvcc, runs them, and profiles quantize-transpose variants with ncu.
# scripts/device-fp8-train.sh's steps "probes" (both) and "transpose" (transpose only) run it.
# Usage: run_probes.sh [transpose] [tiles] (default both). Writes $OUT: probes.log,
# ncu_transpose.txt (transpose), probes.tgz.
set -u -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${OUT:-/tmp/fp8-probes}
which=" ${*:-transpose tiles} "
status=0
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | head -1
: >"$out/probes.log"
if [[ $which == *" transpose "* ]]; then
  # The runtime's kernel is linked from this checkout; -Xptxas -v shows its registers.
  nvcc -O3 -std=c++17 -arch=sm_90 -Xptxas -v -I "$root/core/include" -I "$root/runtime/include" \
    -I "$root/runtime/src" -I "$root/gemm/include" -o /tmp/transpose_probe \
    "$here/transpose_probe.cu" "$root/runtime/src/cuda/quantize_kernels.cu" 2>"$out/ptxas.txt" ||
    { cat "$out/ptxas.txt"; exit 1; }
  grep -A2 -E "quantize_transpose_kernelILi1ELi0|_Z2v0I|_Z2v1P" "$out/ptxas.txt" |
    grep -E "Compiling|Used" | sed -E 's/.*entry function .(_Z[^ ]*). for.*/\1/' >>"$out/probes.log"
  { echo "== transpose_probe"; timeout 180 /tmp/transpose_probe; } 2>&1 | tee -a "$out/probes.log" ||
    status=1
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  echo "== ncu: $ncu"
  for v in prod v0/8 v0w/8 v0w/6; do
    timeout 90 "$ncu" --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats \
      -k regex:'quantize_transpose|v0' /tmp/transpose_probe --once "$v" 256 2>&1
  done >"$out/ncu_transpose.txt"
  grep -E "^  [a-zA-Z_:]|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Warp Cycles Per Issued|L2 Hit|Mem Busy|Max Bandwidth" \
    "$out/ncu_transpose.txt" | head -60
  # The bf16 -> e4m3 kernels' SASS up to their first barrier (the load phase), from this build and
  # from any binaries named in SASS_OF (an earlier cgemm-bench): where the loads wait.
  if command -v cuobjdump >/dev/null; then
    for b in /tmp/transpose_probe ${SASS_OF:-}; do
      echo "== $b"
      cuobjdump -sass "$b" | awk '/Function : .*(quantize_transpose_kernelILi1ELi0|_Z2v0ILb)/ {on = 1; bar = 0; print; next}
        /Function :/ {on = 0} on && !bar {print} on && /BAR.SYNC/ {bar = 1}'
    done >"$out/sass_load_phase.txt"
  fi
fi
if [[ $which == *" tiles "* ]]; then
  nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/fp8_tiles_probe "$here/fp8_tiles_probe.cu" -lcublasLt || exit 1
  # On cuBLASLt 13.1 it stops at CUBLAS_STATUS_NOT_SUPPORTED (its finding, not a failure).
  { echo "== fp8_tiles_probe"; timeout 150 /tmp/fp8_tiles_probe; } 2>&1 | tee -a "$out/probes.log"
fi
tar -czf "$out/probes.tgz" -C "$out" --exclude probes.tgz . 2>/dev/null || true
exit $status  # the transpose probe failing its check, or crashing, fails the step
