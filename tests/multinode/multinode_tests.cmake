# Two "nodes" on one machine (network namespaces, see run_two_nodes.sh): TP groups inside
# a node and a TP group across both, on the CPU backend. Skipped where namespaces cannot be
# made (needs root and iproute2).
add_test(NAME multinode_two_hosts
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_two_nodes.sh $<TARGET_FILE:cgemm-run>)
set_tests_properties(multinode_two_hosts PROPERTIES LABELS "mpi;multinode" TIMEOUT 120
  SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
