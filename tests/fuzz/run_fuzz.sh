#!/usr/bin/env bash
# run_fuzz.sh [SECONDS]: builds the libFuzzer targets (clang, -DCGEMM_FUZZ=ON, in
# $CGEMM_FUZZ_BUILD, default build-fuzz/) and runs each for SECONDS (default
# $CGEMM_FUZZ_SECONDS, else 120): fuzz_plan_line (cgemm-plan's line handler) and
# fuzz_run_config (cgemm-run's INI parser). With 2 or more cores the targets run side by
# side, one core each, so the run takes about SECONDS, not twice that.
#
# Inputs: the committed corpus tests/fuzz/corpus/<target>/, the generated seeds (the cases of
# tests/data/planner_public.jsonl, one per file; configs/*.ini) and the saved inputs of
# tests/fuzz/regressions/<target>/, which are replayed first. New inputs go to
# $CGEMM_FUZZ_CORPUS/<target>/ (default BUILD/fuzz/corpus/<target>/): point it at a folder
# that outlives the build (a CI cache) and the corpus grows from run to run.
#
# Prints the executions and executions per second of each target; exits non-zero on any
# crash, leak, sanitizer report or timeout (the input is left in BUILD/fuzz/artifacts/<target>/).
#
# run_fuzz.sh --merge: adds to tests/fuzz/corpus/<target>/ the inputs of the working corpus
# that reach edges the seeds, the regressions and the committed corpus do not (libFuzzer
# -merge=1); commit the result after a long local run.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
merge=0
if [ "${1:-}" = --merge ]; then
  merge=1
  shift
fi
seconds=${1:-${CGEMM_FUZZ_SECONDS:-120}}
build=${CGEMM_FUZZ_BUILD:-$root/build-fuzz}
work=${CGEMM_FUZZ_CORPUS:-$build/fuzz/corpus}
fuzz=$root/tests/fuzz
targets=(plan_line run_config)
max_len=8192

if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCGEMM_WITH_CUDA=OFF -DCGEMM_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" --target fuzz_plan_line fuzz_run_config

# Seeds generated from the repository's data, regenerated each run.
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

if [ "$merge" = 1 ]; then
  for target in "${targets[@]}"; do
    committed=$fuzz/corpus/$target
    mkdir -p "$committed" "$work/$target"
    # Seeded with what every run has anyway and the committed inputs (kept as they are, so
    # the committed corpus only grows), so that only inputs adding to them are added.
    scratch=$(mktemp -d)
    cp "$seeds/$target"/* "$fuzz/regressions/$target"/* "$scratch/"
    [ -z "$(ls -A "$committed")" ] || cp "$committed"/* "$scratch/"
    before=$(find "$committed" -type f | wc -l)
    # Edges only (no hit counts): a few hundred small inputs, not thousands; the finer
    # features come back within seconds of fuzzing.
    "$build/fuzz/fuzz_$target" -merge=1 -use_counters=0 -max_len=$max_len "$scratch" \
      "$work/$target" >"$build/fuzz/$target.merge.log" 2>&1
    (cd "$scratch" && for f in *; do
      [ -e "$seeds/$target/$f" ] || [ -e "$fuzz/regressions/$target/$f" ] || cp "$f" "$committed/"
    done)
    rm -rf "$scratch"
    echo "fuzz_$target: $(find "$committed" -type f | wc -l) inputs in tests/fuzz/corpus/$target" \
      "($before before)"
  done
  exit 0
fi

# Replays the saved inputs; returns non-zero when one fails.
replay() {
  local target=$1 regressions=$fuzz/regressions/$1 log=$build/fuzz/$1.log
  echo "== fuzz_$target: replaying $(find "$regressions" -type f | wc -l) saved inputs"
  [ -z "$(ls -A "$regressions")" ] && return 0
  "$build/fuzz/fuzz_$target" -runs=0 "$regressions"/* >/dev/null 2>"$log.replay" || {
    tail -30 "$log.replay"
    echo "== fuzz_$target: a saved input fails"
    return 1
  }
}

# Fuzzes one target for $seconds; its output goes to its log.
run_target() {
  local target=$1
  mkdir -p "$work/$target" "$build/fuzz/artifacts/$target" "$fuzz/corpus/$target"
  "$build/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=25 -max_len=$max_len \
    -print_final_stats=1 -artifact_prefix="$build/fuzz/artifacts/$target/" "$work/$target" \
    "$fuzz/corpus/$target" "$seeds/$target" "$fuzz/regressions/$target" \
    >"$build/fuzz/$target.log" 2>&1
}

status=0
declare -A pid
for target in "${targets[@]}"; do
  replay "$target" || {
    status=1
    continue
  }
  echo "== fuzz_$target: fuzzing for $seconds s"
  if [ "$(nproc)" -ge 2 ]; then
    run_target "$target" &
    pid[$target]=$!
  else
    run_target "$target" && pid[$target]=ok || pid[$target]=failed
  fi
done

summary=()
for target in "${targets[@]}"; do
  [ -n "${pid[$target]:-}" ] || continue
  log=$build/fuzz/$target.log
  case ${pid[$target]} in
    ok) result=ok ;;
    failed) result=failed ;;
    *) wait "${pid[$target]}" && result=ok || result=failed ;;
  esac
  if [ "$result" = failed ]; then
    result="FAILED (see $log; input in $build/fuzz/artifacts/$target/)"
    echo "== fuzz_$target: failed"
    tail -40 "$log"
    status=1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  inputs=$(find "$work/$target" -type f | wc -l)
  summary+=("fuzz_$target: ${execs:-?} executions in ${secs:-$seconds} s (${rate:-?}/s),\
 $inputs inputs in $work/$target: $result")
done
echo
printf '%s\n' "${summary[@]}"
exit $status
