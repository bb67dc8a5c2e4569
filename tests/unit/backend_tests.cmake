# Runtime and CPU-backend units: ring schedules, CPU GEMM against fp64, conversions.
cgemm_add_unit_test(test_schedule
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_schedule.cpp LIBS cgemm)
cgemm_add_unit_test(test_cpu_gemm
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cpu_gemm.cpp LIBS cgemm_gemm)
# The MXFP8 scale layouts cuBLAS reads (padding, swizzle) against the seed's operations.
cgemm_add_unit_test(test_scale_layouts
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_scale_layouts.cpp LIBS cgemm_gemm)
