#!/usr/bin/env bash
# run_slurm.sh CGEMM_RUN SOURCE_DIR: a real Slurm on this machine (slurmctld, two slurmd as
# nodes n1 and n2, munged), and cgemm-run on the CPU backend through it, 4 tasks on 2 nodes
# (--ntasks-per-node=2), dp 2 x tp 2 with each TP group inside a node:
#   1. sbatch, with `srun --mpi=pmix` inside (job_srun.sbatch);
#   2. sbatch, with `mpirun` inside (job_mpirun.sbatch);
#   3. srun straight from here (an interactive allocation; MpiDefault=pmix), once under Open
#      MPI's pml ob1 and once under pml ucx, whose output checksums must be identical;
#   4. scripts/slurm/sweep.sbatch as a 3-task job array (CPU backend, tiny sizes), then its
#      merge step as a job that depends on the array.
# Each job must end with exit code 0, print PASSED, put ranks 0,1 on n1 and 2,3 on n2 with the
# TP groups inside a host, and write a JSON report saying so.
#
# Each slurmd runs in its own UTS namespace (host name n1 / n2) so that Open MPI sees two
# hosts. Where namespaces are not allowed (or CGEMM_SLURM_NO_UTS=1), both nodes keep this
# machine's host name and Open MPI runs over TCP on loopback only (OMPI_MCA_btl=self,tcp);
# placement is then checked through SLURMD_NODENAME.
#
# Exits 77 (CTest: skipped) only where Slurm cannot be installed or its daemons cannot start,
# saying why. Every daemon started here is stopped by its PID on exit, also on failure.
# CGEMM_SLURM_KEEP=1 keeps the work directory (configs, logs, job outputs).
set -u
run=$1
src=$2
here=$(cd "$(dirname "$0")" && pwd)

t0=$EPOCHREALTIME
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f s", b - a }'; }
note() { echo "slurm-test: $*"; }
skip() { note "SKIPPED: $*"; exit 77; }

# --- packages (the project's test group) ---------------------------------------------------
need=(slurmctld slurmd sbatch srun scontrol sinfo munged)
have_all() { for c in "${need[@]}"; do command -v "$c" >/dev/null || return 1; done; }
if ! have_all; then
  note "installing Slurm through scripts/install-deps.sh --test"
  "$src/scripts/install-deps.sh" --test || skip "could not install the Slurm packages"
  have_all || skip "Slurm commands still missing after install-deps.sh --test"
fi
# Slurm's PMIx plugin loads libpmix.so, which only libpmix-dev ships.
ls /usr/lib/*/libpmix.so >/dev/null 2>&1 ||
  note "warning: no libpmix.so (package libpmix-dev): srun --mpi=pmix will fail"

# --- work directory, ports, cleanup --------------------------------------------------------
work=$(mktemp -d /tmp/cgemm-slurm.XXXXXX)
# munged wants every directory above its socket searchable by all and writable by root only.
chmod 755 "$work"
mkdir -p "$work"/{munge,state,log,spool,tmp,jobs}
pids=()
stopping=0
cleanup() {
  local rc=$?
  [ "$stopping" = 1 ] && return
  stopping=1
  # Jobs first (a failed check may leave one running), then the daemons, newest first.
  if [ ${#pids[@]} -gt 0 ] && [ -n "${SLURM_CONF:-}" ]; then
    scancel --quiet --full --signal=KILL $(squeue -h -o %A 2>/dev/null) 2>/dev/null
  fi
  local i p
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && { note "PID $p ignored SIGTERM: SIGKILL"; kill -KILL "$p"; }
    wait "$p" 2>/dev/null
  done
  [ ${#pids[@]} -gt 0 ] && note "stopped daemons (PIDs ${pids[*]})"
  if [ "$rc" = 0 ] || [ "$rc" = 77 ]; then
    [ "${CGEMM_SLURM_KEEP:-0}" = 1 ] && note "kept $work" || rm -rf "$work"
  else
    note "kept $work for inspection (logs in $work/log, job outputs in $work/jobs)"
  fi
  note "total $(since "$t0")"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_free() { ! ss -Htln "sport = :$1" 2>/dev/null | grep -q .; }
base=$((20000 + ($$ % 4000) * 10))
for _ in $(seq 20); do
  port_free "$base" && port_free $((base + 1)) && port_free $((base + 2)) && break
  base=$((base + 37))
done
ctld_port=$base n1_port=$((base + 1)) n2_port=$((base + 2))

# --- namespaces or loopback ----------------------------------------------------------------
uts=1
if [ "${CGEMM_SLURM_NO_UTS:-0}" = 1 ]; then
  uts=0
  note "UTS namespaces off (CGEMM_SLURM_NO_UTS=1)"
elif ! unshare --uts true 2>/dev/null; then
  uts=0
  note "no rights for UTS namespaces here: both nodes keep host name $(hostname)"
fi
# Open MPI between the two nodes: TCP on loopback (it skips lo by default).
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
if [ "$uts" = 0 ]; then
  # One host name for both nodes: shared-memory segments of the two would collide.
  export OMPI_MCA_btl=self,tcp
  note "Open MPI over TCP on loopback only (OMPI_MCA_btl=self,tcp)"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# Open MPI names its shared-memory files after the host and a job ID hashed from Slurm's job
# and step IDs, which every fresh cluster numbers from 1 again: another run of this test on
# the machine (or a crashed one's leftovers) would share them in /dev/shm, and ranks crash in
# the shared-memory transport. Each run keeps them, and Open MPI's session files, to itself.
mkdir -p "$work/shm" "$work/tmpdir"
export OMPI_MCA_btl_vader_backing_directory=$work/shm TMPDIR=$work/tmpdir

# --- munge and slurm.conf ------------------------------------------------------------------
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge/munge.key"
cat >"$work/slurm.conf" <<EOF
# Written by tests/slurm/run_slurm.sh for one test run; everything lives under $work.
ClusterName=cgemmtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/munge.socket
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool/%n
TmpFS=$work/tmp/%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.%n.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# Nodes advertise 4 CPUs whatever this machine has.
SlurmdParameters=config_overrides
SchedulerParameters=batch_sched_delay=0
MpiDefault=pmix
ReturnToService=2
# Resolving 127.0.0.1 fails on a loopback-only network without it.
CommunicationParameters=EnableIPv6
NodeName=n1 NodeAddr=127.0.0.1 Port=$n1_port CPUs=4 State=UNKNOWN
NodeName=n2 NodeAddr=127.0.0.1 Port=$n2_port CPUs=4 State=UNKNOWN
PartitionName=test Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
# slurmd always loads a cgroup plugin; v1 loads without systemd or a mounted hierarchy.
echo "CgroupPlugin=cgroup/v1" >"$work/cgroup.conf"
mkdir -p "$work/spool/n1" "$work/spool/n2" "$work/tmp/n1" "$work/tmp/n2"
export SLURM_CONF=$work/slurm.conf

# --- daemons -------------------------------------------------------------------------------
t_start=$EPOCHREALTIME
log_tails() {
  local f
  for f in "$work"/log/*.log; do
    [ -s "$f" ] && { echo "--- tail of $f"; tail -n 15 "$f"; }
  done
}
alive_or_skip() { # NAME PID
  kill -0 "$2" 2>/dev/null && return
  log_tails
  skip "$1 exited at start (see the log above)"
}
munged -F --socket="$work/munge/munge.socket" --key-file="$work/munge/munge.key" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/log/munged.log" \
  --seed-file="$work/munge/munged.seed" >"$work/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$work/munge/munge.socket" ] && break; kill -0 "${pids[0]}" || break; sleep 0.1; done
[ -S "$work/munge/munge.socket" ] || { cat "$work/log/munged.out"; skip "munged did not start"; }

slurmctld -D -f "$SLURM_CONF" >"$work/log/slurmctld.out" 2>&1 &
pids+=($!)
ctld=$!
for n in n1 n2; do
  if [ "$uts" = 1 ]; then
    # unshare and sh exec into slurmd: $! is slurmd's PID.
    unshare --uts sh -c "hostname $n && exec slurmd -D -N $n -f '$SLURM_CONF'" \
      >"$work/log/slurmd.$n.out" 2>&1 &
  else
    slurmd -D -N "$n" -f "$SLURM_CONF" >"$work/log/slurmd.$n.out" 2>&1 &
  fi
  pids+=($!)
done
deadline=$((SECONDS + 30))
until [ "$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u | tr '\n' ' ')" = "n1 idle n2 idle " ]; do
  alive_or_skip slurmctld "$ctld"
  alive_or_skip "slurmd n1" "${pids[2]}"
  alive_or_skip "slurmd n2" "${pids[3]}"
  if [ $SECONDS -ge $deadline ]; then
    sinfo -N 2>&1
    log_tails
    skip "the nodes did not become idle within 30 s"
  fi
  sleep 0.2
done
t_daemons=$(since "$t_start")
note "daemons up in $t_daemons: munged, slurmctld, slurmd n1, slurmd n2 (PIDs ${pids[*]}; uts namespaces: $([ $uts = 1 ] && echo yes || echo no))"

# --- from here on, a failed check fails the test -------------------------------------------
failures=0
fail() { note "FAIL: $*"; failures=$((failures + 1)); }

# wait_job ID SECONDS: polls until every task of the job has ended; 0 when all COMPLETED.
wait_job() {
  local id=$1 deadline=$((SECONDS + $2)) states
  while :; do
    states=$(scontrol -o show job "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | sort -u)
    if [ -n "$states" ] && ! echo "$states" | grep -qE '=(PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED)$'; then
      [ "$states" = "JobState=COMPLETED" ] && return 0
      note "job $id ended: $(echo $states) $(scontrol -o show job "$id" | grep -o 'ExitCode=[0-9:]*' | sort -u | tr '\n' ' ')"
      return 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      note "job $id still not done after $2 s: $(echo $states); cancelling it"
      scancel "$id"
      return 1
    fi
    sleep 0.2
  done
}

shape=(--backend cpu --dp 2 --batch 2 --seq_len 64 --warmup 0 --iterations 1)
block=(--gemm "up all_gather 64 128" --gemm "down reduce_scatter 128 64")

# check_run NAME OUTPUT REPORT: the job's output and its JSON report.
check_run() {
  local name=$1 out=$2 report=$3
  [ "$(grep -c 'check PASSED' "$out")" = 2 ] || fail "$name: expected 2 'check PASSED' lines"
  grep -q 'cgemm-run: all checks PASSED' "$out" || fail "$name: no 'all checks PASSED'"
  grep -q 'tensor-parallel groups on one host: yes' "$out" ||
    fail "$name: TP groups not reported inside one host"
  local hosts
  hosts=$(grep -m1 'hosts of the ranks:' "$out")
  if [ "$uts" = 1 ]; then
    [ "$hosts" = "hosts of the ranks: 0=n1 1=n1 2=n2 3=n2" ] ||
      fail "$name: expected ranks 0,1 on n1 and 2,3 on n2, got '$hosts'"
    local want='["n1", "n1", "n2", "n2"]'
  else
    local want=null
  fi
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1])); want = json.loads(sys.argv[2])
assert r["passed"] is True, "passed is not true"
assert r["world_size"] == 4, r["world_size"]
m = r["mesh"]
assert (m["dp"], m["tp"]) == (2, 2), (m["dp"], m["tp"])
assert m["tp_groups"] == [[0, 1], [2, 3]], m["tp_groups"]
assert m["tp_groups_on_one_host"] is True
assert len(m["hosts"]) == 4
if want is not None:
    assert m["hosts"] == want, m["hosts"]
assert [g["name"] for g in r["gemms"]] == ["up", "down"]
assert all(g["check"]["passed"] and g["check"]["failures"] == 0 for g in r["gemms"])
' "$report" "$want" 2>"$work/pycheck.err" || fail "$name: report $report: $(tail -n1 "$work/pycheck.err")"
}

# Without UTS namespaces the host names cannot tell the nodes apart: Slurm's own word.
check_placement() { # NAME FILE (lines "PROCID NODENAME")
  [ "$(sort -n "$2" | tr '\n' ' ')" = "0 n1 1 n1 2 n2 3 n2 " ] ||
    fail "$1: Slurm placed the tasks as: $(sort -n "$2" | tr '\n' ' ')"
}

timings=()
submit() { sbatch --parsable "$@" | cut -d';' -f1; } # SBATCH-ARGS...: prints the job ID

# 1 and 2: batch jobs, srun inside and mpirun inside.
for launcher in srun mpirun; do
  t=$EPOCHREALTIME
  out=$work/jobs/$launcher.out report=$work/jobs/$launcher.json
  id=$(submit --job-name="cgemm-$launcher" --nodes=2 --ntasks-per-node=2 \
    --output="$out" --chdir="$work/jobs" "$here/job_$launcher.sbatch" "$run" "$report" \
    "${shape[@]}" "${block[@]}")
  if [ -z "$id" ]; then
    fail "sbatch ($launcher inside) was refused"
    continue
  fi
  if wait_job "$id" 60; then
    check_run "sbatch + $launcher" "$out" "$report"
    [ "$uts" = 1 ] || check_placement "sbatch + $launcher" "$work/jobs/$launcher.placement"
  else
    fail "sbatch + $launcher: job $id did not complete"
  fi
  took="sbatch + $launcher inside (job $id): $(since "$t")"
  timings+=("$took")
  note "$took"
  grep -E 'hosts of the ranks|groups on one host|check (PASSED|FAILED)|rror' "$out" | sed 's/^/  | /'
done

# 3: srun from here, an allocation of its own, under Open MPI's pml ob1 and pml ucx (UCX over
# TCP and shared memory: Open MPI 4.1 takes UCX only on InfiniBand unless told any transport
# and device will do), with identical output checksums. pml_base_verbose 10 makes each rank
# say which pml it selected ("select: component NAME selected").
pml_selected() { # OUTPUT-FILE: "NAME on N ranks" (several names: mixed)
  sed -n 's/.*select: component \([a-z0-9]*\) selected.*/\1/p' "$1" | sort | uniq -c |
    awk '{ printf "%s%s on %s ranks", (NR > 1 ? ", " : ""), $2, $1 }'
}
declare -A sums
for pml in ob1 ucx; do
  t=$EPOCHREALTIME
  out=$work/jobs/direct-$pml.out report=$work/jobs/direct-$pml.json
  env OMPI_MCA_pml=$pml OMPI_MCA_pml_base_verbose=10 OMPI_MCA_opal_common_ucx_tls=any \
    OMPI_MCA_opal_common_ucx_devices=any timeout 60 srun --job-name=cgemm-direct-$pml \
    --nodes=2 --ntasks-per-node=2 "$run" "${shape[@]}" "${block[@]}" --report "$report" \
    >"$out" 2>&1
  rc=$?
  selected=$(pml_selected "$out")
  if [ "$rc" = 0 ]; then
    check_run "srun (pml $pml)" "$out" "$report"
    [ "$selected" = "$pml on 4 ranks" ] ||
      fail "srun (pml $pml): Open MPI selected pml '$selected', not $pml on 4 ranks"
    if [ "$uts" = 0 ] && [ "$pml" = ob1 ]; then
      srun --nodes=2 --ntasks-per-node=2 sh -c 'echo $SLURM_PROCID $SLURMD_NODENAME' \
        >"$work/jobs/direct.placement"
      check_placement srun "$work/jobs/direct.placement"
    fi
  else
    fail "srun (pml $pml) exited with $rc"
    tail -n 20 "$out"
  fi
  sums[$pml]=$(grep -o 'output checksum [0-9a-f]*' "$out" | awk '{ printf "%s ", $3 }')
  timings+=("srun (interactive, pml $pml): $(since "$t")")
  note "${timings[-1]}: Open MPI selected pml $selected"
  grep -E 'hosts of the ranks|groups on one host|checksum|check (PASSED|FAILED)|rror' "$out" |
    sed 's/^/  | /'
done
note "checksums: pml ob1 ${sums[ob1]}| pml ucx ${sums[ucx]}"
[ -n "${sums[ob1]}" ] && [ "${sums[ob1]}" = "${sums[ucx]}" ] ||
  fail "srun: the output checksums of pml ob1 and pml ucx differ (or are missing)"

# 4: the sweep as a job array (CPU backend, tiny sizes, 2 tasks on one node each), then the
# merge step, as a user runs them on a cluster (scripts/slurm/sweep.sbatch says how).
t=$EPOCHREALTIME
sweep_dir=$work/jobs/sweep
export CGEMM_RUN=$run CGEMM_BACKEND=cpu CGEMM_SWEEP_SIZES=tiny CGEMM_SWEEP_DIR=$sweep_dir
# The #SBATCH lines ask for 8 GPUs on a node; this cluster has 2 tasks' worth per node, no GPU.
aid=$(submit --array=0-2 --nodes=1 --ntasks-per-node=2 --gpus-per-node=0 \
  --output="$work/jobs/sweep-%A_%a.out" --chdir="$work/jobs" "$src/scripts/slurm/sweep.sbatch")
mid=
if [ -n "$aid" ]; then
  mid=$(submit --dependency="afterany:$aid" --nodes=1 --ntasks=1 \
    --output="$work/jobs/merge.out" --chdir="$work/jobs" \
    --wrap="python3 '$src/scripts/slurm/merge_reports.py' '$sweep_dir' --expect 3")
fi
if [ -z "$aid" ] || [ -z "$mid" ]; then
  fail "sbatch refused the sweep array or its merge job"
else
  wait_job "$aid" 60 || fail "sweep array $aid did not complete"
  wait_job "$mid" 30 || fail "merge job $mid did not complete"
  ls "$sweep_dir"/report-{0,1,2}.json >/dev/null || fail "sweep: a per-task report is missing"
  python3 -c '
import csv, json, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(d + "/sweep.csv")))
lines = [json.loads(l) for l in open(d + "/sweep.jsonl")]
assert len(rows) == 3 and len(lines) == 3, (len(rows), len(lines))
assert sorted(int(r["task"]) for r in rows) == [0, 1, 2], [r["task"] for r in rows]
assert {r["collective"] for r in rows} == {"all_gather", "reduce_scatter", "none"}, rows
assert all(r["passed"] == "true" and r["backend"] == "cpu" and r["tp"] == "2" for r in rows), rows
assert all(l["passed"] is True and l["overlapped_ms"] > 0 for l in lines), lines
' "$sweep_dir" 2>"$work/pycheck.err" || fail "sweep: merged files: $(tail -n1 "$work/pycheck.err")"
  grep -q '^#  *task' "$work/jobs/merge.out" || fail "sweep: merge printed no table"
  sed 's/^/  | /' "$work/jobs/merge.out"
fi
timings+=("sweep array of 3 + merge (jobs $aid, $mid): $(since "$t")")
note "${timings[-1]}"

note "timings: daemon start $t_daemons"
for x in "${timings[@]}"; do note "  $x"; done
if [ "$failures" -gt 0 ]; then
  note "$failures check(s) FAILED"
  log_tails
  exit 1
fi
note "all Slurm checks passed"
exit 0
