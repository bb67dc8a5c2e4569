#!/usr/bin/env bash
# cgemm-train's pass at the standard shape (B 4, S 8192, 4096 -> 8192), the binary of this
# checkout (.devbuild/bin/cgemm-train) against an earlier one (.devbuild/bin/cgemm-train-before),
# ROUNDS rounds of: after none, after current, after delayed, before current, before delayed,
# then the same round in reverse order (so neither binary always runs first). Writes $OUT/speed:
# one log and one --report JSON a run, losses.txt (each step's loss compared) and speed_ab.md. On the GPU machine, from the checkout.
set -u -o pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${OUT:-/tmp/train-ab}/speed
mkdir -p "$out"
. "$root/scripts/device-libs.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
runs=("after none" "after current" "after delayed" "before current" "before delayed")
order=()
for ((round = 1; round <= ${ROUNDS:-2}; ++round)); do
  if ((round % 2)); then order+=("${runs[@]/%/ $round}"); else
    for ((i = ${#runs[@]} - 1; i >= 0; --i)); do order+=("${runs[$i]} $round"); done
  fi
done
for run in "${order[@]}"; do
  read -r which scaling round <<<"$run"
  bin=$root/.devbuild/bin/cgemm-train
  [ "$which" = before ] && bin=$root/.devbuild/bin/cgemm-train-before
  name=${which}_${scaling}_$round
  timeout 150 mpirun -np 1 --bind-to none "$bin" --backend cuda --dtype bf16 --bias off \
    --batch 4 --seq_len 8192 --hidden 4096 --ffn 8192 --steps 3 --lr 1e-4 --timed_passes 20 \
    --scaling "$scaling" --report "$out/$name.json" >"$out/$name.log" 2>&1 || echo "FAIL $name"
  echo "$name: $(grep -E 'forward \+ backward pass' "$out/$name.log" | head -1)"
done
# The two binaries' casts give the same codes and amaxes: every step's loss is the same.
for ((round = 1; round <= ${ROUNDS:-2}; ++round)); do
  for scaling in current delayed; do
    a=$(grep -E "^step " "$out/after_${scaling}_$round.log") b=$(grep -E "^step " "$out/before_${scaling}_$round.log")
    [ -n "$a" ] && [ "$a" = "$b" ] && echo "round $round $scaling: the losses of every step are identical" ||
      echo "round $round $scaling: the losses DIFFER"
  done
done | tee "$out/losses.txt"
python3 - "$out" <<'PY' | tee "$out/speed_ab.md"
import glob, json, os, sys
d = sys.argv[1]
ms = {}
for f in glob.glob(os.path.join(d, "*.json")):
    which, scaling, rnd = os.path.basename(f)[:-5].split("_")
    ms[(int(rnd), which, scaling)] = json.load(open(f))["timed_pass"]["median_ms"]
print("| round | bf16 ms | current before | current after | delayed before | delayed after |")
print("| --- | --- | --- | --- | --- | --- |")
for rnd in sorted({k[0] for k in ms}):
    bf = ms.get((rnd, "after", "none"))
    cell = lambda w, s: ("%.3f ms (%.2fx)" % (ms[(rnd, w, s)], bf / ms[(rnd, w, s)])
                         if (rnd, w, s) in ms and bf else "missing")
    print("| %d | %s | %s | %s | %s | %s |" % (rnd, "%.3f" % bf if bf else "missing",
          cell("before", "current"), cell("after", "current"), cell("before", "delayed"),
          cell("after", "delayed")))
PY
# The device tool brings back a limited number of files: one archive of them all.
tar -czf "$out/../train_ab.tgz" -C "$out" . 2>/dev/null || true
