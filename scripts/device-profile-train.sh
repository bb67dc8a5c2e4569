#!/usr/bin/env bash
# device-profile-train.sh: where the GPU time of cgemm-train's demo-size pass goes (issue 40's
# gap to PyTorch eager), with Nsight Systems when the GPU machine has it. Builds nothing (needs
# .devbuild/bin/cgemm-train from pack-device.sh). One rank, bf16, no biases, the demo shape
# (B 2, S 2048, 768 -> 3072), 1 step and 200 timed passes, eager and with --cuda_graph on, so
# the timed passes dominate the kernel totals; nsys's kernel summary per run (name, instances,
# total ns) goes to $OUT/profile/ (default /tmp/cgemm-profile) with the run's log.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/cgemm-profile}/profile
mkdir -p "$out"
. "$root/scripts/device-libs.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
if [ -z "$nsys" ]; then
  echo "no nsys on this machine: nothing profiled"
  exit 0
fi
"$nsys" --version
args=(--backend cuda --dtype bf16 --bias off --batch 2 --seq_len 2048 --hidden 768 --ffn 3072
  --steps 1 --lr 1e-4 --timed_passes 200)
for graph in off on; do
  timeout 240 "$nsys" profile -t cuda --force-overwrite true -o "$out/demo_graph_$graph" \
    "$root/.devbuild/bin/cgemm-train" "${args[@]}" --cuda_graph "$graph" \
    >"$out/demo_graph_$graph.log" 2>&1 || { echo "graph $graph: profile failed"; tail -n 5 "$out/demo_graph_$graph.log"; }
  grep -E "forward \+ backward pass" "$out/demo_graph_$graph.log"
  "$nsys" stats -q --report cuda_gpu_kern_sum --format csv -o "$out/demo_graph_$graph" \
    "$out/demo_graph_$graph.nsys-rep" >/dev/null 2>&1 || echo "graph $graph: nsys stats failed"
  head -n 15 "$out"/demo_graph_${graph}_cuda_gpu_kern_sum*.csv 2>/dev/null
done
rm -f "$out"/*.nsys-rep "$out"/*.sqlite
