#!/usr/bin/env bash
# device-parts.sh: the one-GPU tables of docs/PERFORMANCE.md, one call on the GPU machine.
# Two rounds, each torch.mm on the chunks (bench/peers/torch_chunking.py) then cgemm-bench
# --parts joined with it (round 1: all studies; round 2: chunking again), so the drift
# between two processes on the same machine shows beside the ratios. Builds nothing (needs a
# .devbuild/ from pack-device.sh). Writes $OUT/r1 and $OUT/r2 (torch_chunks.csv,
# cgemm_parts.md, cgemm_parts_STUDY.csv) and packs both into $OUT/parts.tgz.
# Extra arguments go to every cgemm-bench run (e.g. --cases standard --iterations 10).
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.devbuild/bin
out=${OUT:-/tmp/cgemm-parts}
. "$root/scripts/device-libs.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
tps=1,2,4,8
status=0
for round in 1 2; do
  dir=$out/r$round
  mkdir -p "$dir"
  studies=all
  [ $round = 2 ] && studies=chunking
  echo "== round $round: torch.mm on the chunks"
  timeout 240 python3 "$root/bench/peers/torch_chunking.py" --out "$dir" --tp "$tps" || status=1
  torch=""
  [ -f "$dir/torch_chunks.csv" ] && torch="--torch_chunks $dir/torch_chunks.csv"
  echo "== round $round: cgemm-bench --parts $studies"
  timeout 240 mpirun -np 1 --bind-to none -x LD_LIBRARY_PATH "$bin/cgemm-bench" --parts "$studies" \
    --parts_tp "$tps" $torch --out "$dir" "$@" || status=1
done
tar czf "$out/parts.tgz" -C "$out" r1 r2
exit $status
