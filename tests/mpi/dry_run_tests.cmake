# cgemm-run --dry_run (launcher/common/dry_run.cpp) and the checks before a run: sizes, --std and
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
# The same 8 ranks as dp 2 x fsdp 2 x tp 2: each rank's fsdp coordinate, the weight's shard.
cgemm_add_dry_run_test(described_dp2fsdp2tp2 1 8 2 --dp 2 --fsdp 2 --tp 2 --ranks_per_node 4
  --batch 4 --collective all_gather)
set_tests_properties(mpi_dry_run_described_dp2fsdp2tp2 PROPERTIES ENVIRONMENT
  "${CGEMM_MPI_ENV};EXPECT_DRY_RUN=8 ranks \\(dp 2 x fsdp 2 x tp 2\\)\nrank 6: .*, dp 1, fsdp 1, tp 0, \nrhs \\[256, 512\\] \\('fsdp', 'tpsp'\\) -> local \\[128, 256\\]\nrhs gathered over fsdp=2")
# transport = ucx: every TP peer's transport in the rank lines (and the JSON report) is ucx, or,
# in a build without UCX, the refusal a real run gives.
if(CGEMM_HAVE_UCX)
  set(dry_ucx_peers "rank 0 ucx, rank 1 ucx, rank 2 ucx;")
else()
  set(dry_ucx_peers "rank 0 refused: transport = ucx: this cgemm was built without UCX,")
endif()
add_test(NAME mpi_dry_run_transport_ucx
  COMMAND sh -c "\"$@\" | tee /dev/stderr | grep -q '^rank 3: .*to TP peers: ${dry_ucx_peers}'" dry
          ${CMAKE_CURRENT_LIST_DIR}/expect_dry_run.sh 4 2 $<TARGET_FILE:cgemm-run> --dry_run
          --tp 4 --ranks_per_node 2 --backend cpu --transport ucx)
set_tests_properties(mpi_dry_run_transport_ucx PROPERTIES LABELS mpi TIMEOUT 60)
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
# Under `ulimit -v` (RLIMIT_AS) a job that fits the host's memory but not the address space
# each rank may map is refused up front, naming the limit (it used to fail at allocation).
add_test(NAME mpi_error_memory_over_rlimit_as
  COMMAND sh -c "ulimit -v 3000000 && exec \"$@\"" sh
          ${CMAKE_CURRENT_LIST_DIR}/expect_usage_error.sh "not enough memory: this rank's address space \\(RLIMIT_AS"
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cpu --seq_len 8192 --hidden_in 8192 --hidden_out 8192
          --check off)
set_tests_properties(mpi_error_memory_over_rlimit_as PROPERTIES LABELS mpi TIMEOUT 90
  ENVIRONMENT "${CGEMM_MPI_ENV}")
cgemm_add_usage_error_test(std_overflows 2 "--std 1e\\+20.*overflow" --std 1e20)
cgemm_add_usage_error_test(std_underflows 2 "--std.*underflow to zero" --std 1e-45)
cgemm_add_usage_error_test(ranks_per_node_needs_dry_run 1 "ranks_per_node.*dry_run"
  --ranks_per_node 4 --tp 2)
# A described world of a million ranks printed nothing for minutes: refused at once.
cgemm_add_usage_error_test(described_world_too_large 1
  "--dp 1000 x --tp 1000 = 1000000 ranks: .*at most 8192 ranks" --dry_run --dp 1000 --tp 1000
  --ranks_per_node 8 --batch 1000 --seq_len 1000 --hidden_out 1000)
# 16 lists of 16 values: 2^64 experiments wrapped the count to 0 and every rank segfaulted.
set(sixteen 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16)
cgemm_add_usage_error_test(sweep_count_wraps 2 "the sweep's lists give 16 \\(batch\\).* = more than 100000 experiments"
  --batch ${sixteen} --seq_len ${sixteen} --hidden_in ${sixteen} --hidden_out ${sixteen}
  --warmup ${sixteen} --iterations ${sixteen} --check_rounds ${sixteen} --std ${sixteen}
  --seed ${sixteen} --num_max_streams ${sixteen} --chunks_per_rank ${sixteen}
  --compute_stream_priority ${sixteen} --communication_stream_priority ${sixteen}
  --dtype ${sixteen} --bias ${sixteen} --check ${sixteen})

# chunks_per_rank in the dry run: tp x N pieces, each of a piece's rows (64 rows / 2 / 4).
add_test(NAME mpi_dry_run_chunks_per_rank
  COMMAND $<TARGET_FILE:cgemm-run> --dry_run --tp 2 --ranks_per_node 2 --batch 1 --seq_len 64
          --hidden_in 32 --hidden_out 48 --collective reduce_scatter --chunks_per_rank 4)
set_tests_properties(mpi_dry_run_chunks_per_rank PROPERTIES LABELS mpi TIMEOUT 60
  ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "in 4 pieces each.*8 chunk\\(s\\) of 8 rows")

# A host without a GPU (none visible here): backend auto plans for the CPU backend a real run
# here takes, with its transport (mpi) and host memory, and says why; --ranks_per_node (a job
# described for elsewhere, one GPU per rank) and --backend cuda still plan for CUDA, the
# latter saying a real run here would refuse it.
set(CGEMM_NO_GPU_ENV ${CGEMM_MPI_ENV} CUDA_VISIBLE_DEVICES=-1)
add_test(NAME mpi_dry_run_auto_without_gpu
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --dry_run --tp 2 --seq_len 16 --hidden_in 32 --hidden_out 48)
set_tests_properties(mpi_dry_run_auto_without_gpu PROPERTIES LABELS mpi TIMEOUT 60 PROCESSORS 2
  ENVIRONMENT "${CGEMM_NO_GPU_ENV}"
  PASS_REGULAR_EXPRESSION "backend cpu \\(auto: (this cgemm was built without CUDA|rank 0 on host [^ ]+ sees no GPU), so a real run takes the CPU backend\\)\nnothing created[^\n]*\nrank 0: host [^,]+, local rank 0, dp 0, tp 0, to TP peers: rank 1 mpi;.*fp64 copies.*: 2 rank\\(s\\) need [^\n]* of host memory\ncgemm-run --dry_run: done"
  FAIL_REGULAR_EXPRESSION "GPU memory|copy-engine|cuBLAS|planned as cuda")
add_test(NAME mpi_dry_run_described_plans_cuda
  COMMAND $<TARGET_FILE:cgemm-run> --dry_run --tp 2 --ranks_per_node 2 --seq_len 16
          --hidden_in 32 --hidden_out 48)
set_tests_properties(mpi_dry_run_described_plans_cuda PROPERTIES LABELS mpi TIMEOUT 60
  ENVIRONMENT "${CGEMM_NO_GPU_ENV}"
  PASS_REGULAR_EXPRESSION "backend cuda \\(auto: every rank has a GPU of its own, so a real run takes cuda\\), planned for sm 90.*of GPU memory")
add_test(NAME mpi_dry_run_cuda_asked_without_gpu
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --dry_run --backend cuda --tp 2 --seq_len 16 --hidden_in 32
          --hidden_out 48)
set_tests_properties(mpi_dry_run_cuda_asked_without_gpu PROPERTIES LABELS mpi TIMEOUT 60
  PROCESSORS 2 ENVIRONMENT "${CGEMM_NO_GPU_ENV}"
  PASS_REGULAR_EXPRESSION "backend cuda, planned for sm 90\nnote: a real run of this job would refuse backend cuda: (this cgemm was built without CUDA|rank 0 on host [^ ]+ sees no GPU) \\(planned for cuda as asked\\).*of GPU memory")

# --dry_run --report FILE: the plan as the JSON report (not silently nothing).
add_test(NAME mpi_dry_run_report
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_dry_run_report.sh ${out}/dry_run_report.json 4 cpu
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --dry_run --dp 2 --tp 2 --config
          ${CMAKE_SOURCE_DIR}/configs/demo.ini --report ${out}/dry_run_report.json)
add_test(NAME mpi_dry_run_report_described
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_dry_run_report.sh ${out}/dry_run_described.json 8
          cuda $<TARGET_FILE:cgemm-run> --dry_run --dp 2 --tp 4 --ranks_per_node 4
          --report ${out}/dry_run_described.json)
set_tests_properties(mpi_dry_run_report PROPERTIES LABELS mpi TIMEOUT 60 PROCESSORS 4
  ENVIRONMENT "${CGEMM_NO_GPU_ENV}")
set_tests_properties(mpi_dry_run_report_described PROPERTIES LABELS mpi TIMEOUT 60
  ENVIRONMENT "${CGEMM_NO_GPU_ENV}")
# A report it cannot write: one message, exit status 2.
cgemm_add_usage_error_test(dry_run_report_unwritable 2 "--report /nonexistent/plan.json"
  --dry_run --tp 2 --seq_len 16 --hidden_in 32 --hidden_out 48 --report /nonexistent/plan.json)
