# Fuzzing. Always: test_fuzz_regressions replays the saved inputs of the fuzz targets
# (tests/fuzz/regressions/<target>/) through their checks. With -DCGEMM_FUZZ=ON (clang only):
# the libFuzzer targets fuzz_plan_line and fuzz_run_config, built with
# -fsanitize=fuzzer,address,undefined; tests/fuzz/run_fuzz.sh builds and runs them.
set(CGEMM_FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR})

cgemm_add_unit_test(test_fuzz_regressions
  SOURCES ${CGEMM_FUZZ_DIR}/test_fuzz_regressions.cpp ${CGEMM_FUZZ_DIR}/fuzz_plan_line.cpp
          ${CGEMM_FUZZ_DIR}/fuzz_run_config.cpp
  LIBS cgemm_plan_json cgemm_launcher_common)
target_include_directories(test_fuzz_regressions PRIVATE ${CGEMM_FUZZ_DIR})
target_compile_definitions(test_fuzz_regressions PRIVATE CGEMM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")

if(CGEMM_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "CGEMM_FUZZ needs clang (libFuzzer): configure with "
                        "-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++")
  endif()
  set(fuzz_flags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
                 -fno-omit-frame-pointer)
  # The code under test is compiled into each target, so it is instrumented too.
  get_target_property(sharding_sources cgemm_sharding SOURCES)
  list(TRANSFORM sharding_sources PREPEND ${CMAKE_SOURCE_DIR}/sharding/)
  get_target_property(core_sources cgemm_core SOURCES)
  list(TRANSFORM core_sources PREPEND ${CMAKE_SOURCE_DIR}/core/)
  list(APPEND sharding_sources ${core_sources})
  get_target_property(plan_json_sources cgemm_plan_json SOURCES)
  list(TRANSFORM plan_json_sources PREPEND ${CMAKE_SOURCE_DIR}/sharding/)

  add_executable(fuzz_plan_line ${CGEMM_FUZZ_DIR}/fuzz_plan_line.cpp ${plan_json_sources}
                 ${sharding_sources})
  target_include_directories(fuzz_plan_line PRIVATE ${CGEMM_FUZZ_DIR}
                             ${CMAKE_SOURCE_DIR}/sharding/include ${CMAKE_SOURCE_DIR}/sharding/tools
                             ${CMAKE_SOURCE_DIR}/core/include)
  target_link_libraries(fuzz_plan_line PRIVATE nlohmann_json::nlohmann_json Threads::Threads
                        cgemm_warnings)

  set(option_sources option_sources.cpp option_table.cpp option_sweep.cpp shared_options.cpp
                     run_config.cpp output_files.cpp input_files.cpp
                     option_list.cpp output_target.cpp printable_text.cpp temp_files.cpp
                     moe_options.cpp moe_router.cpp)
  list(TRANSFORM option_sources PREPEND ${CMAKE_SOURCE_DIR}/launcher/common/)
  add_executable(fuzz_run_config ${CGEMM_FUZZ_DIR}/fuzz_run_config.cpp ${option_sources}
                 ${CMAKE_SOURCE_DIR}/runtime/src/plan/options.cpp
                 ${CMAKE_SOURCE_DIR}/runtime/src/quantization/quantization_names.cpp
                 ${CMAKE_SOURCE_DIR}/gemm/src/scaling_recipe.cpp ${sharding_sources})
  target_include_directories(fuzz_run_config PRIVATE ${CGEMM_FUZZ_DIR}
                             ${CMAKE_SOURCE_DIR}/sharding/include ${CMAKE_SOURCE_DIR}/runtime/include
                             ${CMAKE_SOURCE_DIR}/launcher ${CMAKE_SOURCE_DIR}/core/include
                             ${CMAKE_SOURCE_DIR}/gemm/include ${CMAKE_SOURCE_DIR}/collective/include)
  # No MPI: run_config.cpp reads the described dry run's bounds from dry_run_limits.hpp, which
  # (unlike dry_run.hpp) pulls in no runtime, collective or MPI header.
  target_link_libraries(fuzz_run_config PRIVATE Boost::program_options Threads::Threads
                        cgemm_build_info cgemm_warnings)

  foreach(t fuzz_plan_line fuzz_run_config)
    target_compile_definitions(${t} PRIVATE CGEMM_FUZZ_MAIN)
    target_compile_options(${t} PRIVATE ${fuzz_flags})
    target_link_options(${t} PRIVATE ${fuzz_flags})
    set_target_properties(${t} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
  endforeach()
endif()
