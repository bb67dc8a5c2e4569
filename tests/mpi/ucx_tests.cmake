# The UCX transport (transport = ucx, collective/ucx_transport.hpp) on one host under mpirun,
# CPU backend. Only where cgemm was built with UCX; tests/multinode runs it across two hosts.

# cgemm-ucx-info --version prints the line every tool prints, and --help lists it, with or
# without UCX (neither asks the library).
add_test(NAME ucx_info_version
  COMMAND sh -c "\"$1\" --version | grep -Eqx 'cgemm-ucx-info [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit ([0-9a-f]+(-dirty)?|unknown)\\)' && \"$1\" --help | grep -q -- '--version' && \"$1\" --help | grep -q -- '--no_transports'" ucx_info_version
          $<TARGET_FILE:cgemm-ucx-info>)
set_tests_properties(ucx_info_version PROPERTIES LABELS unit TIMEOUT 30)
# As every tool: a bad argument is one message on stderr and exit 2 (it used to print the usage
# on stdout, no message); a standard output that cannot be written is an error (exit 3; it
# used to exit 0).
add_test(NAME ucx_info_bad_input
  COMMAND sh -c "out=$(\"$1\" --bogus 2>err.txt); rc=$?; cat err.txt; [ $rc -eq 2 ] && [ -z \"$out\" ] && [ $(wc -l < err.txt) -eq 1 ] && grep -q \"^cgemm-ucx-info: error: unknown argument '--bogus' (see cgemm-ucx-info --help)$\" err.txt || exit 1; for a in --version --help; do \"$1\" $a >/dev/full 2>err.txt; rc=$?; cat err.txt; [ $rc -eq 3 ] && grep -q '^cgemm-ucx-info: error: cannot write to standard output: No space left on device$' err.txt || exit 1; \"$1\" $a >&- 2>err.txt; rc=$?; cat err.txt; [ $rc -eq 3 ] && grep -q '^cgemm-ucx-info: error: cannot write to standard output' err.txt || exit 1; done" ucx_info_bad_input
          $<TARGET_FILE:cgemm-ucx-info>)
set_tests_properties(ucx_info_bad_input PROPERTIES LABELS unit TIMEOUT 30)

if(NOT CGEMM_HAVE_UCX)
  # Without UCX, transport = ucx is refused with one message.
  cgemm_add_mpi_failure_test(transport_ucx_not_built 2 "transport = ucx: this cgemm was built without UCX"
    --transport ucx --seq_len 16 --hidden_in 32 --hidden_out 48)
  return()
endif()

# cgemm-ucx-info asks the library (no MPI): a context with RMA on host memory, the device path
# and UCP's transport list.
add_test(NAME ucx_info
  COMMAND sh -c "out=$(\"$1\") || exit 1; echo \"$out\"; echo \"$out\" | grep -q '^memory types: host' && echo \"$out\" | grep -q '^device buffers: ' && echo \"$out\" | grep -q '^flag ordering: ' && echo \"$out\" | grep -q 'UCP context'" ucx_info
          $<TARGET_FILE:cgemm-ucx-info>)
set_tests_properties(ucx_info PROPERTIES LABELS unit TIMEOUT 30)
# The data flag is ordered by ucp_worker_fence only where the fence is strong (UCX >= 1.14),
# else by an endpoint flush: the line must match the library's version.
add_test(NAME ucx_info_flag_ordering
  COMMAND sh -c "out=$(\"$1\" --no_transports) || exit 1; echo \"$out\"; v=$(echo \"$out\" | sed -n 's/^UCX library: \\([0-9]*\\)\\.\\([0-9]*\\)\\..*/\\1 \\2/p'); set -- $v; if [ \"$1\" -gt 1 ] || [ \"$2\" -ge 14 ]; then want=ucp_worker_fence; else want=ucp_ep_flush_nbx; fi; echo \"$out\" | grep -q \"^flag ordering: $want\"" ucx_info
          $<TARGET_FILE:cgemm-ucx-info>)
set_tests_properties(ucx_info_flag_ordering PROPERTIES LABELS unit TIMEOUT 30)

# Same bits as the MPI transport: both collectives, aggregate on and off, chunks_per_rank 1 and
# 2, on tp 4 and on dp 2 x tp 2.
foreach(mesh "tp4;1" "dp2tp2;2")
  list(GET mesh 0 mname)
  list(GET mesh 1 dp)
  add_test(NAME mpi_ucx_same_bits_${mname}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/transport_bits.sh 4 ${MPIEXEC_EXECUTABLE}
            $<TARGET_FILE:cgemm-run> --dp ${dp})
  set_tests_properties(mpi_ucx_same_bits_${mname} PROPERTIES LABELS mpi TIMEOUT 120
    PROCESSORS 4 ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()

# The watchdog over UCX: a stopped rank, or one that never starts its exchange, ends the job
# within the timeout + 10 s (exit 4) with one line naming the exchange, the step it waits for
# (a peer's ready flag or its data) and the peer by world rank and host. 5 s, as the MPI
# transport's watchdog tests, for a loaded machine.
foreach(fault "stop:2:5;all_gather" "skip_exchange:1:3;reduce_scatter")
  list(GET fault 0 spec)
  list(GET fault 1 coll)
  string(REGEX REPLACE ":.*" "" kind ${spec})
  add_test(NAME mpi_ucx_watchdog_${kind}_${coll}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/fault_check.sh 5 ${spec}
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:cgemm-run> --backend cpu --seq_len 64 --hidden_in 64 --hidden_out 64
            --collective ${coll} --timeout 5 --iterations 50 --transport ucx)
  set_tests_properties(mpi_ucx_watchdog_${kind}_${coll} PROPERTIES LABELS mpi TIMEOUT 60
    PROCESSORS 4 ENVIRONMENT "${CGEMM_MPI_ENV};CGEMM_FAULT_WAIT=exchange '[a-z_]+ step [0-9]+: [^']*' over UCX \\(group [0-9]+\\): (ready flag|data) from world rank [0-9]+ \\(host [^)]+\\), tp rank [0-9]+")
endforeach()

# A peer that dies (SIGKILL) mid-exchange ends the whole job, long before the timeout.
add_test(NAME mpi_ucx_dead_peer
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/dead_peer_check.sh 20 1
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cpu --seq_len 64 --hidden_in 64 --hidden_out 64
          --collective all_gather --timeout 20 --iterations 50 --transport ucx)
set_tests_properties(mpi_ucx_dead_peer PROPERTIES LABELS mpi TIMEOUT 60 PROCESSORS 4
  ENVIRONMENT "${CGEMM_MPI_ENV}")

# A UCX context that cannot be made (no such transport): one message naming every rank's reason,
# exit 2. Ranks inherit UCX_TLS from mpirun (one host).
add_test(NAME mpi_error_ucx_no_context
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/expect_failure.sh
          "transport = ucx: no UCX context on every rank of the TP group .*tp rank 0: ucp_init failed"
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cpu --transport ucx --seq_len 16 --hidden_in 32
          --hidden_out 48)
set_tests_properties(mpi_error_ucx_no_context PROPERTIES LABELS mpi TIMEOUT 60
  ENVIRONMENT "${CGEMM_MPI_ENV};UCX_TLS=bogus")
# A context whose only transport is self reaches no peer: one message naming the ranks.
add_test(NAME mpi_error_ucx_unreachable_peer
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/expect_failure.sh
          "transport = ucx: world rank 0 \\(host [^)]+\\) cannot reach world rank 1 \\(host [^)]+\\) over UCX \\(ucp_ep_create failed"
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cpu --transport ucx --seq_len 16 --hidden_in 32
          --hidden_out 48)
set_tests_properties(mpi_error_ucx_unreachable_peer PROPERTIES LABELS mpi TIMEOUT 60
  ENVIRONMENT "${CGEMM_MPI_ENV};UCX_TLS=self")
# transport = nccl or ce on the CPU backend: one message.
cgemm_add_mpi_failure_test(transport_nccl_on_cpu 2 "transport = nccl needs the CUDA backend"
  --transport nccl --seq_len 16 --hidden_in 32 --hidden_out 48)
