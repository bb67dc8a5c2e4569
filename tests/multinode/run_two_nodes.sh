#!/usr/bin/env bash
# run_two_nodes.sh CGEMM_RUN: two "nodes" on one machine (network namespaces joined by a
# veth pair, each with its own host name), 2 ranks on each, and
# cgemm-run on the CPU backend over them:
#   dp 2 x tp 2: every TP group inside one node;
#   tp 4: the TP group spans both nodes (no shared memory between its halves);
#   dp 2 x tp 2 placed round-robin: TP groups span the nodes needlessly, which is warned about.
# Both must pass their check, and the report must say where the TP groups live. With tp 4 the
# UCX transport (transport = ucx) must give the MPI transport's bits, and a stopped or dead rank
# on the other host must end the job (the watchdog naming the UCX wait, or mpirun).
# Each mesh runs twice, under Open MPI's pml ob1 (btl tcp between the hosts) and pml ucx (UCX
# over TCP on the veth: Open MPI 4.1 takes UCX only on InfiniBand unless told any transport
# and device will do), with identical output checksums. Which pml ran is Open MPI's own word:
# `--mca pml_base_verbose 10` prints "select: component NAME selected" once per rank.
# Exits 77 (CTest: skipped) where namespaces cannot be made (not root, no iproute2).
set -u
run=$1
here=$(cd "$(dirname "$0")" && pwd)
export CGEMM_MN_PREFIX=cgemm$$
a=${CGEMM_MN_PREFIX}a b=${CGEMM_MN_PREFIX}b net=10.213.77
cleanup() {
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
}
trap cleanup EXIT
if ! ip netns add "$a" 2>/dev/null || ! ip netns add "$b" 2>/dev/null; then
  echo "SKIPPED: cannot create network namespaces here (needs root and iproute2)"
  exit 77
fi
set -e
ip link add "${a}v" type veth peer name "${b}v"
ip link set "${a}v" netns "$a"
ip link set "${b}v" netns "$b"
ip -n "$a" addr add "$net.1/24" dev "${a}v"
ip -n "$b" addr add "$net.2/24" dev "${b}v"
for ns in "$a" "$b"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "${ns}v" up
done
hostfile=$(mktemp)
printf '%s.1 slots=2\n%s.2 slots=2\n' "$net" "$net" >"$hostfile"
# The block as a config file: arguments pass through a shell on the "remote" side.
config=$(mktemp --suffix=.ini)
printf 'gemm = up all_gather 64 96\ngemm = down reduce_scatter 96 64\n' >"$config"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
mpi=(mpirun -np 4 --hostfile "$hostfile" --mca plm_rsh_agent "$here/rsh_agent.sh"
  --mca oob_tcp_if_include "$net.0/24" -x OPENBLAS_NUM_THREADS)
ob1=(--mca pml ob1 --mca btl tcp,self,vader --mca btl_tcp_if_include "$net.0/24")
ucx=(--mca pml ucx --mca opal_common_ucx_tls any --mca opal_common_ucx_devices any)
status=0
# pml_selected OUTPUT: "NAME on N ranks" from pml_base_verbose's lines (several names: mixed).
pml_selected() {
  echo "$1" | sed -n 's/.*select: component \([a-z0-9]*\) selected.*/\1/p' | sort | uniq -c |
    awk '{ printf "%s%s on %s ranks", (NR > 1 ? ", " : ""), $2, $1 }'
}
# checksums OUTPUT: the GEMMs' output checksums, one line.
checksums() { echo "$1" | grep -o 'output checksum [0-9a-f]*' | awk '{ printf "%s ", $3 }'; }
declare -A sums
for pml in ob1 ucx; do
  declare -n pml_args=$pml
  for mesh in "--dp 2" "--dp 1"; do
    out=$("$here/rsh_agent.sh" "$net.1" "${mpi[@]}" "${pml_args[@]}" --mca pml_base_verbose 10 \
      "$run" --backend cpu $mesh --batch 4 --seq_len 32 --config "$config" --warmup 0 \
      --iterations 1 2>&1) || status=1
    selected=$(pml_selected "$out")
    echo "pml $pml, $mesh: Open MPI selected pml $selected"
    echo "$out" | grep -E "^tensor-parallel groups|^hosts|checksum|check (PASSED|FAILED)|error"
    [ "$selected" = "$pml on 4 ranks" ] || {
      echo "FAIL (pml $pml, $mesh): Open MPI selected pml '$selected', not $pml on 4 ranks"
      status=1
    }
    expected="yes"
    [ "$mesh" = "--dp 1" ] && expected="no"
    echo "$out" | grep -q "tensor-parallel groups on one host: $expected" || {
      echo "FAIL (pml $pml, $mesh): the report does not say the TP groups are on one host: $expected"
      status=1
    }
    sums[$pml $mesh]=$(checksums "$out")
  done
  unset -n pml_args
done
for mesh in "--dp 2" "--dp 1"; do
  echo "checksums ($mesh): pml ob1 ${sums[ob1 $mesh]}| pml ucx ${sums[ucx $mesh]}"
  if [ -z "${sums[ob1 $mesh]}" ] || [ "${sums[ob1 $mesh]}" != "${sums[ucx $mesh]}" ]; then
    echo "FAIL ($mesh): the output checksums of pml ob1 and pml ucx differ (or are missing)"
    status=1
  fi
done
# The UCX transport of the ring (transport = ucx) with the TP group spanning both hosts (tp 4):
# the MPI transport's bits under both pmls, with the default knobs and with aggregate_all_gather
# on and chunks_per_rank 2. The namespaces share one kernel, so UCX's defaults reach the other
# "host" through shared memory (cma, posix) as well; the last variant allows TCP only
# (UCX_TLS=tcp,self), so the puts cross the veth as between real hosts.
for pml in ob1 ucx tcp; do
  what="pml $pml"
  [ "$pml" = tcp ] && what="pml ob1, UCX_TLS=tcp,self"
  ucx_tls=()
  if [ "$pml" = tcp ]; then
    declare -n pml_args=ob1
    ucx_tls=(-x UCX_TLS=tcp,self)
  else
    declare -n pml_args=$pml
  fi
  for knobs in "--aggregate_all_gather off" "--aggregate_all_gather on --chunks_per_rank 2"; do
    for transport in mpi ucx; do
      out=$("$here/rsh_agent.sh" "$net.1" "${mpi[@]}" "${pml_args[@]}" "${ucx_tls[@]}" "$run" \
        --backend cpu --dp 1 --batch 4 --seq_len 32 --config "$config" --warmup 0 \
        --iterations 1 --transport $transport $knobs 2>&1) || status=1
      echo "$out" | grep -q "cgemm-run: all checks PASSED" || {
        echo "$out" | tail -n 15
        echo "FAIL ($what, transport $transport, $knobs): the checks did not pass"
        status=1
      }
      echo "$out" | grep -q "backend cpu, transport $transport" || {
        echo "FAIL ($what, $knobs): the job did not run transport $transport"
        status=1
      }
      sums[$transport]=$(checksums "$out")
    done
    echo "tp 4 over both hosts, $what, $knobs: transport mpi ${sums[mpi]}| transport ucx ${sums[ucx]}"
    if [ -z "${sums[mpi]}" ] || [ "${sums[mpi]}" != "${sums[ucx]}" ]; then
      echo "FAIL ($what, $knobs): the checksums of transport mpi and ucx differ (or are missing)"
      status=1
    fi
  done
  unset -n pml_args
done
# A rank of the other host stopped (SIGSTOP) mid-run: the watchdog names the UCX exchange and a
# peer on that host within the timeout + 10 s (exit 4). A rank there that dies ends the job.
# 5 s, not 3: on a loaded machine a rank descheduled at a barrier before the stop could fire it
# on the wrong wait.
for fault in stop:2:5 die:3:3; do
  t0=$SECONDS
  out=$(timeout 60 "$here/rsh_agent.sh" "$net.1" env CGEMM_TEST_FAULT=$fault "${mpi[@]}" \
    "${ob1[@]}" -x CGEMM_TEST_FAULT "$run" --backend cpu --dp 1 --seq_len 64 --hidden_in 64 \
    --hidden_out 64 --collective all_gather --timeout 5 --iterations 50 --transport ucx 2>&1) &&
    rc=0 || rc=$?
  took=$((SECONDS - t0))
  echo "fault $fault over UCX across the hosts: exit status $rc after $took s"
  echo "$out" | grep -E "error:|exited on signal" | head -n 2
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$took" -gt 15 ]; then
    echo "FAIL (fault $fault): the job did not end within the timeout + 10 s with an error"
    status=1
  fi
  case $fault in
    stop:*)
      [ "$rc" -eq 4 ] && echo "$out" | grep -E -q "timed out after [0-9.]+ s waiting for exchange '[^']*' over UCX \(group [0-9]+\): (ready flag|data) from world rank [0-9]+ \(host [^)]+\)" &&
        echo "$out" | grep -q "not timed out (stalled, or busy elsewhere): .*world rank 2 (host ${CGEMM_MN_PREFIX}node-b)" || {
        echo "FAIL (fault $fault): no watchdog line (exit 4) naming the UCX exchange and the stopped rank"
        status=1
      } ;;
    die:*)
      echo "$out" | grep -q "exited on signal 9" || {
        echo "FAIL (fault $fault): mpirun did not say that the rank died"
        status=1
      } ;;
  esac
done
# Ranks placed round-robin over the hosts (--map-by node): each TP group of dp 2 x tp 2 spans
# both hosts although each host holds 2 ranks, which the job warns about, with the fix.
out=$("$here/rsh_agent.sh" "$net.1" "${mpi[@]}" "${ob1[@]}" --map-by node "$run" --backend cpu --dp 2 \
  --batch 4 --seq_len 32 --config "$config" --warmup 0 --iterations 1 2>&1) || status=1
echo "$out" | grep -E "warning|hosts of"
echo "$out" | grep -q "warning: tensor-parallel groups span hosts although every host holds 2" || {
  echo "FAIL (--map-by node): no warning that the TP groups span hosts"
  status=1
}
rm -f "$hostfile" "$config"
exit $status
