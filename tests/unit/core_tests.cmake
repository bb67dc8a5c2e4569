# core/ units: the environment flag parser, checked element counts, the dtype conversions.
cgemm_add_unit_test(test_core
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_core.cpp LIBS cgemm_core)
target_compile_definitions(test_core PRIVATE CGEMM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
# The include graph keeps its layers (no upward #include "cgemm/LAYER/...").
find_package(Python3 COMPONENTS Interpreter REQUIRED)
add_test(NAME include_layers
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_layers.py ${CMAKE_SOURCE_DIR})
set_tests_properties(include_layers PROPERTIES LABELS unit)
# No source file over 650 lines outside tests/ (tests/unit/check_file_lengths.py names them).
add_test(NAME source_file_lengths
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_file_lengths.py ${CMAKE_SOURCE_DIR})
set_tests_properties(source_file_lengths PROPERTIES LABELS unit)
# The watchdog and the process timers: each case in a child process (a timeout ends it).
cgemm_add_unit_test(test_watchdog
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_watchdog.cpp LIBS cgemm_core)
# scripts/test.sh on a stand-in project: every step runs after a failure, and the end lists
# each failed step and test with the command that reruns it alone (needs cmake, ctest, ninja).
add_test(NAME test_script_runs_every_step
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_test_script.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(test_script_runs_every_step PROPERTIES LABELS unit TIMEOUT 120)
