#!/usr/bin/env bash
# Open MPI's rsh agent for the two-"node" test: `rsh_agent.sh HOST CMD...` runs CMD in the
# network namespace of HOST (an address of the test's private /24) with its own host name,
# as ssh would on a real node. The namespace names come from CGEMM_MN_PREFIX.
set -eu
host=$1
shift
case "$host" in
  *.1) ns=${CGEMM_MN_PREFIX}a; name=${CGEMM_MN_PREFIX}node-a ;;
  *.2) ns=${CGEMM_MN_PREFIX}b; name=${CGEMM_MN_PREFIX}node-b ;;
  *) echo "rsh_agent: unknown host $host" >&2; exit 1 ;;
esac
exec ip netns exec "$ns" unshare --uts sh -c "hostname $name; exec $*"
