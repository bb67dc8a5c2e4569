# core/ units: the environment flag parser, checked element counts, the dtype conversions.
cgemm_add_unit_test(test_core
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_core.cpp LIBS cgemm_core)
target_compile_definitions(test_core PRIVATE CGEMM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
