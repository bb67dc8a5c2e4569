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
