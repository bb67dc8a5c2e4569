# Two "nodes" on one machine (network namespaces, see run_two_nodes.sh): TP groups inside
# a node and a TP group across both, on the CPU backend, under Open MPI's pml ob1 and pml ucx
# (same checksums), and the UCX transport across the hosts (the MPI transport's bits; a stopped
# or dead rank on the other host ends the job). Skipped where namespaces cannot be made (needs
# root and iproute2).
add_test(NAME multinode_two_hosts
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_two_nodes.sh $<TARGET_FILE:cgemm-run>)
set_tests_properties(multinode_two_hosts PROPERTIES LABELS "mpi;multinode" TIMEOUT 120
  SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
