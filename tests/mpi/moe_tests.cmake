# cgemm-run's MoE expert block (experiment = moe, launcher/run/moe_block.hpp) on the CPU backend:
# configs/moe_demo.ini with each router passes its per-group fp64 check and reports the
# ragged work (check_moe.sh); small shapes in fp16 and fp32, empty groups, one group holding
# every token, sampled rows and several check rounds; bad options end the job with one
# message and exit status 2 (expect_usage_error.sh).
# A broken run failing the check: no fault hook reaches the grouped GEMM's results, so
# tests/unit/test_moe_check.cpp feeds broken outputs to the check itself.
set(moe_out ${CMAKE_CURRENT_BINARY_DIR}/moe)
foreach(router uniform skewed one_group)
  set(extra)
  if(router STREQUAL "one_group")
    set(extra --moe_empty_groups 0)  # the demo empties 2; one_group empties all but one
  endif()
  add_test(NAME mpi_moe_demo_${router}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_moe.sh ${moe_out}/demo_${router} ${router}
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:cgemm-run> --config ${CMAKE_SOURCE_DIR}/configs/moe_demo.ini
            --backend cpu --warmup 1 --iterations 2 --moe_router ${router} ${extra})
  set_tests_properties(mpi_moe_demo_${router} PROPERTIES LABELS mpi TIMEOUT 120 PROCESSORS 2
    ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()

# dtypes, sizes and check options on one rank: fp16 with 5 of 8 experts empty (outputs down in
# fp16's subnormals), fp32 skewed over 2 rounds with 3 rows per group, bf16 with more experts
# than tokens, one expert.
foreach(variant
    "fp16_uniform_empty;uniform;--dtype;fp16;--moe_empty_groups;5"
    "fp32_skewed_rows;skewed;--dtype;fp32;--check_rounds;2;--moe_check_rows;3;--moe_hidden;40;--moe_ffn;24"
    "bf16_few_tokens;uniform;--moe_tokens;5;--moe_experts;16"
    "bf16_one_expert;skewed;--moe_experts;1")
  list(POP_FRONT variant name router)
  add_test(NAME mpi_moe_${name}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_moe.sh ${moe_out}/${name} ${router}
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 1 ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:cgemm-run> --experiment moe --backend cpu --warmup 0 --iterations 1
            --moe_router ${router} ${variant})
  set_tests_properties(mpi_moe_${name} PROPERTIES LABELS mpi TIMEOUT 60
    ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()

# Bad options: one clear line naming the option, exit status 2, on every rank count.
function(cgemm_add_moe_usage_test name regex)
  add_test(NAME mpi_error_moe_${name}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/expect_usage_error.sh "${regex}"
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:cgemm-run> --backend cpu --experiment moe ${ARGN})
  set_tests_properties(mpi_error_moe_${name} PROPERTIES LABELS mpi TIMEOUT 60
    ENVIRONMENT "${CGEMM_MPI_ENV}")
endfunction()
# A block larger than the memory: refused before any buffer with the binding limit named, as
# cgemm-run's GEMM blocks (it was OOM-killed without a word in a 1 GiB cgroup).
cgemm_add_moe_usage_test(memory_check
  "cgemm-run: error: not enough memory: 2 rank\\(s\\) sharing host memory.*\\(the MoE block: 512 tokens, 1024 experts, hidden 16384, ffn 65536, bfloat16; each rank needs [0-9]+ bytes for its buffers and the check; nothing was allocated\\)"
  --moe_experts 1024 --moe_hidden 16384 --moe_ffn 65536)
cgemm_add_moe_usage_test(unknown_router "--moe_router zipf.*uniform, skewed or one_group"
  --moe_router zipf)
cgemm_add_moe_usage_test(zero_tokens "--moe_tokens 0: must be 1 to 2147483647 \\[tokens\\]"
  --moe_tokens 0)
cgemm_add_moe_usage_test(all_groups_empty "--moe_empty_groups 8: must be less than moe_experts 8"
  --moe_empty_groups 8)
cgemm_add_moe_usage_test(sweep "experiment moe: the options give a sweep of 2 experiments"
  --moe_hidden 32 --dtype bf16,fp16)
cgemm_add_moe_usage_test(trace "--trace .*experiment moe writes no trace"
  --trace ${moe_out}/never.json)
cgemm_add_moe_usage_test(fp16_overflow "--std 3: the outputs .*moe_hidden.* overflow float16"
  --dtype fp16 --std 3 --moe_hidden 4096)
add_test(NAME mpi_error_moe_unknown_experiment
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/expect_usage_error.sh "--experiment moes: unknown experiment"
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cpu --experiment moes)
set_tests_properties(mpi_error_moe_unknown_experiment PROPERTIES LABELS mpi TIMEOUT 60
  ENVIRONMENT "${CGEMM_MPI_ENV}")
