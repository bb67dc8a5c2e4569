#!/usr/bin/env bash
# check_parts_grouped.sh MPIEXEC BENCH PYTHON OUTDIR: cgemm-bench --parts grouped on the CPU
# backend with the cases divided by 64 (the study's code path end to end in under a second):
# five rows with the expected sizes columns, all three paths agreeing exactly (the CPU runs the
# loop for each; the device tiles where K and N allow them, their replay equal to their eager
# call), the size vectors equal to bench/peers/torch_grouped_mm.py's (its dry run, no
# torch), scripts/grouped_table.py joining a made-up torch row, and the full sizes refused on
# the CPU with one message (exit 2).
set -u
mpiexec=$1 bench=$2 python=$3 out=$4
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$out" && mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }
"$mpiexec" -np 1 "$bench" --backend cpu --l2_mib 1 --parts grouped --parts_grouped_divide 64 \
  --warmup 0 --iterations 2 --out "$out" >"$out/log" 2>&1 || { cat "$out/log"; fail "exit $?"; }
csv=$out/cgemm_parts_grouped.csv
[ -s "$csv" ] || fail "no cgemm_parts_grouped.csv"
grep -q "### grouped" "$out/cgemm_parts.md" || fail "cgemm_parts.md has no grouped table"
[ "$(tail -n +2 "$csv" | grep -c .)" -eq 5 ] || fail "expected 5 rows"
head -n 1 "$csv" | grep -q '^case,sizes,tokens,groups,k,n,min_rows,max_rows,empty,loop_ms,' ||
  fail "unexpected header: $(head -n 1 "$csv")"
grep -q '^512x8x64x224,uniform,512,8,64,224,64,64,0,' "$csv" || fail "no 512x8x64x224 uniform row"
grep -q '^1024x64x64x32,"skewed, 8 empty",1024,64,64,32,4,211,8,' "$csv" ||
  fail "no 1024x64x64x32 skewed row with min 4, max 211, 8 empty"
# The CPU ignores the path: all three columns ran the loop, so they agree to the bit.
"$python" - "$csv" <<'PY' || fail "a row is not path loop with diff 0 for both grouped and tiles"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
bad = [r["case"] for r in rows if r["grouped_path"] != "loop" or r["tiles_path"] != "loop"
       or float(r["max_rel_diff"]) != 0.0 or float(r["tiles_rel_diff"]) != 0.0
       or not float(r["tiles_ms"]) > 0.0]
# The device tiles: the loop too where K and N are multiples of 8 (its graph replay equal to
# its eager call), "not run" where not (N 22 at this divide).
for r in rows:
    runs = int(r["k"]) % 8 == 0 and int(r["n"]) % 8 == 0
    if runs and (r["device_path"] != "loop" or float(r["device_rel_diff"]) != 0.0
                 or r["device_graph_same"] != "yes" or not float(r["device_graph_ms"]) > 0.0):
        bad.append(r["case"])
    if not runs and r["device_path"] != "not run":
        bad.append(r["case"])
sys.exit(1 if bad or len(rows) != 5 else 0)
PY
"$python" "$root/bench/peers/torch_grouped_mm.py" --dry-run --divide 64 >"$out/peer.txt" ||
  fail "the peer's dry run failed"
diff <(grep ': sizes ' "$out/log" | sed 's/^grouped: //') "$out/peer.txt" >/dev/null ||
  fail "the peer's sizes differ from cgemm-bench's"
printf 'case,sizes,tokens,groups,k,n,grouped_mm_ms,grouped_mm_tflops,loop_ms,loop_tflops,note\n512x8x64x224,uniform,512,8,64,224,0.5,1,2,0.25,\n' \
  >"$out/torch.csv"
"$python" "$root/scripts/grouped_table.py" "$csv" "$out/torch.csv" >"$out/table.md" ||
  fail "grouped_table.py failed"
[ "$(grep -c '^| [0-9]' "$out/table.md")" -eq 5 ] || fail "the joined table has not 5 rows"
grep -q '^| 512x8x64x224 | uniform | .* | 0.500 ms (1) | 2.000 ms (0) | ' "$out/table.md" ||
  { cat "$out/table.md"; fail "the torch row did not join 512x8x64x224 uniform"; }
"$mpiexec" -np 1 "$bench" --backend cpu --parts grouped --out "$out" >"$out/full.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "--parts grouped on the CPU at full size: exit $rc, expected 2"
grep -q 'error: --parts grouped on the CPU backend needs --parts_grouped_divide 16' "$out/full.log" ||
  { cat "$out/full.log"; fail "expected the divide message"; }
echo "PASS"
