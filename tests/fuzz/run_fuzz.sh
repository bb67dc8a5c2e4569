#!/usr/bin/env bash
# run_fuzz.sh [SECONDS]: builds the libFuzzer targets (clang, -DCGEMM_FUZZ=ON, in
# $CGEMM_FUZZ_BUILD, default build-fuzz/) and runs each for SECONDS (default 60) from its seed
# corpus: fuzz_plan_line (cgemm-plan's line handler; seeds: the cases of
# tests/data/planner_public.jsonl, one per file) and fuzz_run_config (cgemm-run's INI parser;
# seeds: configs/*.ini). The saved inputs of tests/fuzz/regressions/<target>/ are replayed
# first and seed the run too. Prints the executions per target; exits non-zero on any crash,
# leak, sanitizer report or timeout (the input is left in BUILD/fuzz/artifacts/<target>/).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${1:-60}
build=${CGEMM_FUZZ_BUILD:-$root/build-fuzz}
fuzz=$root/tests/fuzz

if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCGEMM_WITH_CUDA=OFF -DCGEMM_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" --target fuzz_plan_line fuzz_run_config

# Seed corpora, regenerated each run (the working corpora under corpus/ are kept).
seeds=$build/fuzz/seeds
rm -rf "$seeds"
mkdir -p "$seeds/plan_line" "$seeds/run_config"
python3 - "$root/tests/data/planner_public.jsonl" "$seeds/plan_line" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    for i, line in enumerate(l for l in f if l.strip()):
        case = json.loads(line)["case"]
        with open(f"{sys.argv[2]}/case{i:04d}.jsonl", "w") as out:
            out.write(json.dumps(case, separators=(",", ":")) + "\n")
PY
cp "$root"/configs/*.ini "$seeds/run_config/"

status=0
summary=()
for target in plan_line run_config; do
  bin=$build/fuzz/fuzz_$target
  regressions=$fuzz/regressions/$target
  corpus=$build/fuzz/corpus/$target
  artifacts=$build/fuzz/artifacts/$target
  mkdir -p "$regressions" "$corpus" "$artifacts"
  log=$build/fuzz/$target.log
  echo "== fuzz_$target: replaying $(find "$regressions" -type f | wc -l) saved inputs"
  if [ -n "$(ls -A "$regressions")" ]; then
    "$bin" -runs=0 "$regressions"/* >/dev/null 2>"$log.replay" || {
      tail -30 "$log.replay"
      echo "== fuzz_$target: a saved input fails"
      status=1
      continue
    }
  fi
  echo "== fuzz_$target: fuzzing for $seconds s"
  if "$bin" -max_total_time="$seconds" -timeout=25 -max_len=8192 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$corpus" "$seeds/$target" "$regressions" >"$log" 2>&1; then
    result=ok
  else
    result="FAILED (see $log; input in $artifacts/)"
    tail -40 "$log"
    status=1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  secs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$log" | tail -1)
  summary+=("fuzz_$target: ${execs:-?} executions in ${secs:-$seconds} s, $(find "$corpus" -type f | wc -l) corpus inputs: $result")
done
echo
printf '%s\n' "${summary[@]}"
exit $status
