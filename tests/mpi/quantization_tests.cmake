# Quantized GEMMs (--scaling) on the CPU backend, which emulates every mode: each mode with
# each collective on tp 2, tp 3 and dp 2 x tp 2, checked against the sequential path (the
# same quantized operands: tight) and against the unquantized GEMM (TE's FP8 tolerances and a
# relative bound per mode, launcher/run/quantization_check.hpp), over two check rounds so delayed
# scaling's history moves. Shapes keep MXFP8's collective rule (both sides of each operand's
# flatten axis multiples of 128, the lhs scale's sequence dim divisible by tp). Inputs of
# standard deviation 1, as TE's tests.
foreach(mesh "tp2;2;1;256;256;256;2" "tp3;3;1;1152;384;384;1" "dp2tp2;4;2;256;256;256;2")
  list(GET mesh 0 mname)
  list(GET mesh 1 np)
  list(GET mesh 2 dp)
  list(GET mesh 3 seq)
  list(GET mesh 4 k)
  list(GET mesh 5 n)
  list(GET mesh 6 batch)
  set(shape --dp ${dp} --batch ${batch} --seq_len ${seq} --hidden_in ${k} --hidden_out ${n}
    --std 1 --check_rounds 2)
  foreach(scaling delayed current mxfp8)
    foreach(coll none all_gather reduce_scatter)
      cgemm_add_mpi_test(${mname}_${coll}_${scaling} ${np} ${shape} --collective ${coll}
        --scaling ${scaling})
    endforeach()
  endforeach()
  # gemm.py runs NVFP4 without a collective only.
  cgemm_add_mpi_test(${mname}_none_nvfp4 ${np} ${shape} --collective none --scaling nvfp4)
  cgemm_add_mpi_test(${mname}_none_nvfp4_2d ${np} ${shape} --collective none --scaling nvfp4_2d)
endforeach()
# The other FP8 pairs, the recipe knobs and a bias, batch-first and sequence-first.
set(q2 --seq_len 256 --hidden_in 256 --hidden_out 256 --batch 2 --std 1 --check_rounds 2)
cgemm_add_mpi_test(tp2_all_gather_current_e4m3_e5m2 2 ${q2} --collective all_gather
  --scaling current --rhs_format e5m2 --bias on)
cgemm_add_mpi_test(tp2_reduce_scatter_delayed_e5m2_e4m3 2 ${q2} --collective reduce_scatter
  --scaling delayed --lhs_format e5m2 --amax_history_len 2 --amax_compute_algo most_recent
  --margin 1 --transpose_batch_sequence on)
cgemm_add_mpi_test(tp2_all_gather_mxfp8_chunks 2 ${q2} --collective all_gather --scaling mxfp8
  --chunks_per_rank 2 --aggregate_all_gather on --bias on)

# What gemm.py refuses, and the recipe's bounds: one message each.
cgemm_add_mpi_failure_test(fp8_e5m2_pair 2 "incompatible data types: float8_e5m2 x float8_e5m2"
  --scaling current --lhs_format e5m2 --rhs_format e5m2)
cgemm_add_mpi_failure_test(nvfp4_collective 2
  "Collective GEMM is not yet supported with nvfp4_1d_scaling" --scaling nvfp4
  --collective all_gather)
cgemm_add_mpi_failure_test(mxfp8_collective_not_128 2 "MXFP8 \\+ Collective AG/RS requires"
  --scaling mxfp8 --collective all_gather --seq_len 64 --hidden_in 64 --hidden_out 64)
cgemm_add_mpi_failure_test(fp8_contracting_alignment 2 "multiple of 16"
  --scaling current --collective none --hidden_in 40)
cgemm_add_mpi_failure_test(margin_out_of_range 2 "--margin 200.*0 to 127" --scaling current
  --margin 200)
cgemm_add_mpi_failure_test(unknown_scaling 2 "unknown scaling 'fp8'" --scaling fp8)

# One scale per global tensor: the same config on 1 rank and on dp 2 x tp 2 quantizes with the
# same scale_inv bit for bit (so the same quantized operands), for both per-tensor modes.
add_test(NAME mpi_quantized_scales_mesh_independent
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_quantized_scales.sh
          ${CMAKE_CURRENT_BINARY_DIR}/quantized_scales ${MPIEXEC_EXECUTABLE}
          $<TARGET_FILE:cgemm-run>)
set_tests_properties(mpi_quantized_scales_mesh_independent PROPERTIES LABELS mpi TIMEOUT 180
  PROCESSORS 4 ENVIRONMENT "${CGEMM_MPI_ENV}")

# Pre-quantized operands and QuantizedTensor (issue 42 items 1 and 2): the GEMM fed the caller's
# FP8 copies equals the GEMM that quantizes the same inputs itself, bit for bit, on every
# collective, layout and per-tensor mode, and the fp64 product of the dequantized operands; the
# copies equal the host's quantization; the all-gather hands out the FP8 bytes it gathered.
add_executable(test_prequantized ${CMAKE_CURRENT_LIST_DIR}/test_prequantized.cpp)
target_link_libraries(test_prequantized PRIVATE cgemm GTest::gtest cgemm_warnings)
foreach(mesh "np1;1;" "tp2;2;" "tp3;3;" "dp2tp2;4;--dp=2")
  list(GET mesh 0 mname)
  list(GET mesh 1 np)
  list(GET mesh 2 flag)
  add_test(NAME mpi_prequantized_${mname}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_prequantized> ${flag})
  set_tests_properties(mpi_prequantized_${mname} PROPERTIES LABELS mpi TIMEOUT 180
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()

# The layer pair in FP8 (issue 42 item 3): forward e4m3, gradients e5m2 or e4m3, every GEMM
# against the fp64 layer on the dequantized operands, both paths and layouts.
add_executable(test_tp_linear_fp8 ${CMAKE_CURRENT_LIST_DIR}/test_tp_linear_fp8.cpp)
target_link_libraries(test_tp_linear_fp8 PRIVATE cgemm GTest::gtest cgemm_warnings)
foreach(mesh "np1;1;" "tp2;2;" "tp3;3;" "dp2tp2;4;--dp=2")
  list(GET mesh 0 mname)
  list(GET mesh 1 np)
  list(GET mesh 2 flag)
  add_test(NAME mpi_tp_linear_fp8_${mname}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_tp_linear_fp8> ${flag})
  set_tests_properties(mpi_tp_linear_fp8_${mname} PROPERTIES LABELS mpi TIMEOUT 180
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()

# The plain GEMM's all-reduce in float32 (issue 43 item 3), and the seed's switch back to the
# output dtype (NVTE_JAX_ALL_REDUCE_IN_FP32=0).
add_executable(test_all_reduce_fp32 ${CMAKE_CURRENT_LIST_DIR}/test_all_reduce_fp32.cpp)
target_link_libraries(test_all_reduce_fp32 PRIVATE cgemm GTest::gtest cgemm_warnings)
foreach(np 1 2 4)
  add_test(NAME mpi_all_reduce_fp32_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_all_reduce_fp32>)
  set_tests_properties(mpi_all_reduce_fp32_np${np} PROPERTIES LABELS mpi TIMEOUT 120
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()
