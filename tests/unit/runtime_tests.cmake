# cgemm-run's and cgemm-bench's options (launcher/common/run_config.cpp, bench_config.cpp, the rows of
# option_table.hpp): defaults, command line over --config, the
# GEMM block rule, every option error, the shipped configs/, resolve_mesh, to_ini round trip.
cgemm_add_unit_test(test_run_config
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_run_config.cpp
  LIBS cgemm_launcher_bench)
target_compile_definitions(test_run_config PRIVATE CGEMM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
# cgemm-run's sweep rows (launcher/run/sweep_rows.cpp): a column per sweepable option, typed JSON.
cgemm_add_unit_test(test_sweep_rows
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sweep_rows.cpp
  LIBS cgemm_launcher_run nlohmann_json::nlohmann_json)
# cgemm-run --dry_run's backend: the backend rule predicted from the placement, without CUDA.
cgemm_add_unit_test(test_dry_run_backend
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_dry_run_backend.cpp
  LIBS cgemm_launcher_common)

# collective/'s transport layer: exchange validation, the transport chosen per peer, the split
# of a group over transports (fake transports; no MPI, no GPU).
cgemm_add_unit_test(test_transport
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_transport.cpp
  LIBS cgemm_collective)
# launcher/common/report_json: cgemm-run's report in JSON types (specs, options, provenance).
cgemm_add_unit_test(test_report_json
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_report_json.cpp
  LIBS cgemm_launcher_common nlohmann_json::nlohmann_json)
# launcher/common/output_files: distinct outputs, the writable check, write-then-rename, symlinks,
# devices and FIFOs, rows cut back on a failed write, stale temporary files.
cgemm_add_unit_test(test_output_files
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_output_files.cpp
  LIBS cgemm_launcher_common)
# launcher/common/input_files: inputs must be regular files (a FIFO is refused, not opened).
cgemm_add_unit_test(test_input_files
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_input_files.cpp
  LIBS cgemm_launcher_bench)
# launcher/common/trace_writer and trace_svg on synthetic spans: calls laid out and named, bytes and
# FLOPs in the Chrome events' args, the SVG's call bands, bar labels and hatched waits.
cgemm_add_unit_test(test_trace_writer
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_trace_writer.cpp
  LIBS cgemm_launcher_common nlohmann_json::nlohmann_json)
# plan_gemm without a backend (runtime/src/plan/plan_description.cpp), the memory check and the
# checked size arithmetic.
# The scaling-recipe table (core/include/cgemm/core/scaling_modes.hpp): a row per mode, the
# planner's names and the options' words round-trip, the generated expected-lists.
cgemm_add_unit_test(test_scaling_modes
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_scaling_modes.cpp
  LIBS cgemm)
cgemm_add_unit_test(test_plan_description
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_plan_description.cpp
  LIBS cgemm)
# The transport table's rows (runtime/src/transport_table.hpp).
target_include_directories(test_plan_description PRIVATE ${CMAKE_SOURCE_DIR}/runtime/src)
# cgemm-bench --parts' chunk geometry (launcher/bench/parts/chunked_gemm.cpp) against the whole GEMM.
cgemm_add_unit_test(test_bench_parts
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_bench_parts.cpp
  LIBS cgemm_launcher_bench cgemm_gemm)
# The engine's programs (runtime/src/program/program.hpp) of every collective GEMM kind, run on a
# backend that records its calls, against tests/unit/golden/ (tp 2 to 8; no MPI, no GPU).
cgemm_add_unit_test(test_golden_programs
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_golden_programs.cpp
  LIBS cgemm)
target_include_directories(test_golden_programs PRIVATE ${CMAKE_SOURCE_DIR}/runtime/src)
target_compile_definitions(test_golden_programs PRIVATE
  CGEMM_GOLDEN_DIR="${CMAKE_CURRENT_SOURCE_DIR}/unit/golden")
# The engine's operand table, kinds table and ring payloads (recording backend).
cgemm_add_unit_test(test_engine
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_engine.cpp
  LIBS cgemm)
target_include_directories(test_engine PRIVATE ${CMAKE_SOURCE_DIR}/runtime/src)
# cgemm-bench's figures: nccl-tests' bytes, algbw and busbw, the digits of small rates, --help's
# case sizes and bandwidth definitions.
cgemm_add_unit_test(test_bench_output
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_bench_output.cpp
  LIBS cgemm_launcher_bench)
# Hostile option input (issue 22): sweep counts, empty booleans and list items, control bytes
# in messages, the bounds of --l2_mib and of a described dry run.
cgemm_add_unit_test(test_option_input
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_option_input.cpp
  LIBS cgemm_launcher_bench)
# cgemm-compare (launcher/compare/compare_main.cpp, output_dump.cpp's reading side) on dumps written
# byte by byte: the tolerances, the dtypes, headers that lie; the FP8 decoding of check.cpp.
cgemm_add_unit_test(test_cgemm_compare_cli
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cgemm_compare_cli.cpp
  LIBS cgemm_launcher_common)
target_compile_definitions(test_cgemm_compare_cli PRIVATE
  CGEMM_COMPARE_BIN="$<TARGET_FILE:cgemm-compare>")
add_dependencies(test_cgemm_compare_cli cgemm-compare)
# cgemm-train's options (launcher/train/train_config.cpp): its rows, errors, mesh rules, the shipped
# configs/train_demo.ini, the INI text read back.
cgemm_add_unit_test(test_train_config
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_train_config.cpp
  LIBS cgemm_launcher_train)
target_compile_definitions(test_train_config PRIVATE CGEMM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
# launcher/train/trace_split: a traced call's GEMM and communication busy times, and their overlap.
cgemm_add_unit_test(test_trace_split
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_trace_split.cpp
  LIBS cgemm_launcher_train)
# cgemm-run's MoE experiment (launcher/common/moe_router, moe_check): the router's rules, and the
# per-group fp64 check passing the right outputs and failing broken ones.
cgemm_add_unit_test(test_moe_router
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_moe_router.cpp
  LIBS cgemm_launcher_common)
cgemm_add_unit_test(test_moe_check
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_moe_check.cpp
  LIBS cgemm_launcher_run)
# The grouped GEMM's cuBLASLt tiles runner's row tiling (runtime/src/grouped/grouped_rows.hpp:
# tile_rows), fixed and random sizes.
cgemm_add_unit_test(test_row_tiles
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_row_tiles.cpp
  LIBS cgemm)
target_include_directories(test_row_tiles PRIVATE ${CMAKE_SOURCE_DIR}/runtime/src)
