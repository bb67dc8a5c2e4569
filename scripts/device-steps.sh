# Sourced by the device scripts that run a list of checks (device-graphs.sh): step() runs one
# with its log in $out/NAME.log (a timeout of $step_timeout seconds, default 300) and notes
# PASS or FAIL with the log's last line that says how it went; finish() prints the notes, also
# to $out/summary.txt, and exits 1 when a step failed. Needs $out.
status=0
summary=()
step() {
  local name=$1
  shift
  local t0=$SECONDS
  if timeout "${step_timeout:-300}" "$@" >"$out/$name.log" 2>&1; then
    summary+=("PASS  $name ($((SECONDS - t0)) s; $(grep -E '^PASS|skipped|passed|PASSED|checks|x eager' "$out/$name.log" | tail -1 | tr -d '\033'))")
  else
    status=1
    summary+=("FAIL  $name ($((SECONDS - t0)) s; $out/$name.log)")
  fi
  tail -n 20 "$out/$name.log"
}
finish() {
  printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
  exit $status
}
