# Planner (sharding/) tests. Test suites are named Planner*, so `ctest -R Planner` runs them.
cgemm_add_unit_test(test_planner_cases
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_planner_cases.cpp
  LIBS cgemm_plan_json)
cgemm_add_unit_test(test_grouped_gemm
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_grouped_gemm.cpp
  LIBS cgemm_sharding)
cgemm_add_unit_test(test_reorder
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_reorder.cpp
  LIBS cgemm_sharding)
cgemm_add_unit_test(test_partition_spec
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_partition_spec.cpp
  LIBS cgemm_sharding)
cgemm_add_unit_test(test_cgemm_plan_cli
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cgemm_plan_cli.cpp
  LIBS cgemm_plan_json)
target_compile_definitions(test_cgemm_plan_cli PRIVATE CGEMM_PLAN_BIN="$<TARGET_FILE:cgemm-plan>")
add_dependencies(test_cgemm_plan_cli cgemm-plan)
