# GPU tests: GoogleTest executables that skip (GTEST_SKIP, with the reason) when no GPU is
# visible, so they pass on machines without one. Labelled "gpu" (ctest -L gpu).
function(cgemm_add_gpu_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main cgemm_warnings)
  gtest_discover_tests(${name} PROPERTIES LABELS gpu DISCOVERY_TIMEOUT 60)
endfunction()

# cuBLASLt GEMM against an fp64 reference: dtypes, layouts, bias, strided placement.
cgemm_add_gpu_test(test_cublaslt_gemm
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cublaslt_gemm.cpp LIBS cgemm_gemm)

# cuBLASLt FP8 (per-tensor scales) against an fp64 reference of the dequantized inputs, and its
# refusals.
cgemm_add_gpu_test(test_cublaslt_fp8
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cublaslt_fp8.cpp LIBS cgemm_gemm)

# The CUDA backend's quantization calls (amax, the world's max, scale updates, FP8 casts plain
# and transposed) against host references, bit for bit, on 1 rank and on 2 (which share the
# GPU when there is one).
add_executable(test_cuda_quantize ${CMAKE_CURRENT_LIST_DIR}/test_cuda_quantize.cpp)
target_link_libraries(test_cuda_quantize PRIVATE cgemm GTest::gtest cgemm_warnings)
foreach(np 1 2)
  add_test(NAME gpu_cuda_quantize_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_cuda_quantize>)
  set_tests_properties(gpu_cuda_quantize_np${np} PROPERTIES LABELS "gpu;mpi" TIMEOUT 300
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}" SKIP_REGULAR_EXPRESSION "no GPU on some rank")
endforeach()

# The CUDA backend on its own under mpirun: kernels against their CPU definitions, copy-engine
# and NCCL exchanges under buffer reuse, the reference collectives. Run by hand with more
# ranks: mpirun -np 4 test_cuda_backend (one GPU per rank). Without GPUs every case skips.
add_executable(test_cuda_backend ${CMAKE_CURRENT_LIST_DIR}/test_cuda_backend.cpp)
target_link_libraries(test_cuda_backend PRIVATE cgemm GTest::gtest cgemm_warnings)
add_test(NAME gpu_cuda_backend_np2
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:test_cuda_backend>)
set_tests_properties(gpu_cuda_backend_np2 PROPERTIES LABELS "gpu;mpi" TIMEOUT 300 PROCESSORS 2
  ENVIRONMENT "${CGEMM_MPI_ENV};NCCL_NVLS_ENABLE=0"
  SKIP_REGULAR_EXPRESSION "no GPU on some rank")

# The copy-engine protocol alone under mpirun (ranks may share a GPU): ring with forwarding and
# reuse, both directions in one group, push bandwidth. Exit 77 = skipped.
add_executable(test_ce_transport ${CMAKE_CURRENT_LIST_DIR}/test_ce_transport.cpp)
target_link_libraries(test_ce_transport PRIVATE cgemm_collective cgemm_warnings)
add_test(NAME gpu_ce_transport_np2
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:test_ce_transport>)
set_tests_properties(gpu_ce_transport_np2 PROPERTIES LABELS "gpu;mpi" TIMEOUT 120 PROCESSORS 2
  ENVIRONMENT "${CGEMM_MPI_ENV}" SKIP_RETURN_CODE 77)

# The same with the ranks sharing the GPUs (gpu_sharing): no NCCL, reference collectives over
# the copy engines, use_ce = off refused. Runs with any number of GPUs, one included.
add_test(NAME gpu_cuda_backend_shared_np2
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:test_cuda_backend>)
set_tests_properties(gpu_cuda_backend_shared_np2 PROPERTIES LABELS "gpu;mpi" TIMEOUT 300
  PROCESSORS 2 ENVIRONMENT "${CGEMM_MPI_ENV};CGEMM_TEST_GPU_SHARING=1"
  SKIP_REGULAR_EXPRESSION "no GPU on some rank")

# The grouped GEMM's runtime (tests/mpi/test_grouped_plan.cpp) on the CUDA backend: the CPU
# test's cases, a loop of cuBLASLt GEMMs per call, against the same fp64 reference.
add_test(NAME gpu_grouped_plan_np1
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 1 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:test_grouped_plan> --backend=cuda)
set_tests_properties(gpu_grouped_plan_np1 PROPERTIES LABELS "gpu;mpi" TIMEOUT 300 PROCESSORS 1
  ENVIRONMENT "${CGEMM_MPI_ENV}" SKIP_REGULAR_EXPRESSION "no GPU: every case skips")

# cgemm-run's MoE expert block (experiment = moe) on the CUDA backend: configs/moe_demo.ini,
# its grouped GEMMs a loop of cuBLASLt GEMMs, checked per group against the fp64 host
# reference with the fp32-accumulation bound (tests/mpi/check_moe.sh); skips without a GPU.
add_test(NAME gpu_moe_demo_np1
  COMMAND ${CMAKE_SOURCE_DIR}/tests/mpi/check_moe.sh ${CMAKE_CURRENT_BINARY_DIR}/moe_gpu skewed
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 1 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --config ${CMAKE_SOURCE_DIR}/configs/moe_demo.ini
          --backend cuda)
set_tests_properties(gpu_moe_demo_np1 PROPERTIES LABELS "gpu;mpi" TIMEOUT 120 PROCESSORS 1
  ENVIRONMENT "${CGEMM_MPI_ENV}" SKIP_REGULAR_EXPRESSION "sees no usable GPU")

# The caller's stream (GemmPlan::execute(..., stream)): a kernel-free producer and consumer on a
# caller-created stream, ordered only by the call's events; and a borrowed NCCL communicator
# (BackendOptions::nccl_comm), which skips while ranks share a GPU (NCCL refuses that): np1
# runs it on a one-GPU machine, np2 runs the stream case with the ranks sharing the GPU there.
add_executable(test_caller_stream ${CMAKE_CURRENT_LIST_DIR}/test_caller_stream.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../mpi/mpi_gtest_main.cpp)
target_link_libraries(test_caller_stream PRIVATE cgemm GTest::gtest cgemm_warnings)
foreach(np 1 2)
  add_test(NAME gpu_caller_stream_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_caller_stream>)
  set_tests_properties(gpu_caller_stream_np${np} PROPERTIES LABELS "gpu;mpi" TIMEOUT 300
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV};NCCL_NVLS_ENABLE=0"
    SKIP_REGULAR_EXPRESSION "no GPU on some rank")
endforeach()

# CUDA graphs (tests/mpi/test_capture.cpp, built with the MPI tests) on the CUDA backend, the
# ranks sharing the GPU (copy engines): replays against eager calls byte for byte, 1 to 8 ranks.
foreach(np 1 2 4 8)
  add_test(NAME gpu_capture_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_capture>)
  set_tests_properties(gpu_capture_np${np} PROPERTIES LABELS "gpu;mpi" TIMEOUT 600
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV};CGEMM_TEST_BACKEND=cuda"
    SKIP_REGULAR_EXPRESSION "no GPU on some rank")
endforeach()
