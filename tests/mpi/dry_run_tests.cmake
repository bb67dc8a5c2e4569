# cgemm-run --dry_run (launcher/dry_run.cpp) and the checks before a run: sizes, --std and
# memory, each refused with one message and exit status 2 before anything is allocated.

function(cgemm_add_dry_run_test name np ranks hosts)
  add_test(NAME mpi_dry_run_${name}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/expect_dry_run.sh ${ranks} ${hosts}
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:cgemm-run> --dry_run ${ARGN})
  set_tests_properties(mpi_dry_run_${name} PROPERTIES LABELS mpi TIMEOUT 60 PROCESSORS ${np}
    ENVIRONMENT "${CGEMM_MPI_ENV}")
endfunction()

function(cgemm_add_usage_error_test name np regex)
  add_test(NAME mpi_error_${name}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/expect_usage_error.sh "${regex}"
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:cgemm-run> --backend cpu ${ARGN})
  set_tests_properties(mpi_error_${name} PROPERTIES LABELS mpi TIMEOUT 90
    ENVIRONMENT "${CGEMM_MPI_ENV}")
endfunction()

# 4 ranks of this job: 4 rank lines on this host, the plans of a block of two GEMMs.
cgemm_add_dry_run_test(dp2tp2 4 4 1 --dp 2 --tp 2 --backend cpu
  --config ${CMAKE_SOURCE_DIR}/configs/demo.ini)
# One process describing 8 ranks, 4 per host: 2 hosts.
cgemm_add_dry_run_test(described_dp2tp4 1 8 2 --dp 2 --tp 4 --ranks_per_node 4)
# The CUDA backend planned on a machine without a GPU: no CUDA call, still exit 0.
cgemm_add_dry_run_test(cuda_without_gpu 2 2 1 --backend cuda --tp 2 --collective reduce_scatter)

# Sizes: 2^40 tokens (fits int64, not the host), a product that overflows int64, a shape of
# about 10^15 bytes; --std out of the dtype's range.
cgemm_add_usage_error_test(seq_len_2_40 2 "not enough memory.*seq_len 1099511627776"
  --seq_len 1099511627776)
cgemm_add_usage_error_test(size_overflows_int64 2 "overflows int64"
  --seq_len 1099511627776 --hidden_in 1073741824)
cgemm_add_usage_error_test(memory_larger_than_host 2 "not enough memory.*host memory"
  --batch 1000000 --seq_len 1000000 --hidden_in 512 --hidden_out 512)
cgemm_add_usage_error_test(std_overflows 2 "--std 1e\\+20.*overflow" --std 1e20)
cgemm_add_usage_error_test(std_underflows 2 "--std.*underflow to zero" --std 1e-45)
cgemm_add_usage_error_test(ranks_per_node_needs_dry_run 1 "ranks_per_node.*dry_run"
  --ranks_per_node 4 --tp 2)

# chunks_per_rank in the dry run: tp x N pieces, each of a piece's rows (64 rows / 2 / 4).
add_test(NAME mpi_dry_run_chunks_per_rank
  COMMAND $<TARGET_FILE:cgemm-run> --dry_run --tp 2 --ranks_per_node 2 --batch 1 --seq_len 64
          --hidden_in 32 --hidden_out 48 --collective reduce_scatter --chunks_per_rank 4)
set_tests_properties(mpi_dry_run_chunks_per_rank PROPERTIES LABELS mpi TIMEOUT 60
  ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "in 4 pieces each.*8 chunk\\(s\\) of 8 rows")
