# MPI integration tests: cgemm-run under mpirun on small shapes, each checking the
# overlapped result against the sequential path (exit status 3 on a mismatch).
# Root (CI) and more ranks than cores are allowed through Open MPI's environment. The tests run
# on one host, over shared memory: Open MPI's own UCX components (pml, osc) are not probed, which
# cost about 0.5 s of every mpirun here (2-rank error test: 2.3 s against 1.7 s, 2026-12-07).
# cgemm's UCX transport calls libucp itself and is not affected; the multi-node and Slurm tests
# choose their pml on their own command lines.
set(CGEMM_MPI_ENV
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
  OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OPENBLAS_NUM_THREADS=1)

function(cgemm_add_mpi_test name np)
  add_test(NAME mpi_${name}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:cgemm-run> --backend cpu --warmup 1 --iterations 2 ${ARGN})
  set_tests_properties(mpi_${name} PROPERTIES LABELS mpi TIMEOUT 120 PROCESSORS ${np}
    ENVIRONMENT "${CGEMM_MPI_ENV}")
endfunction()

# Bad input: the job must end within seconds, non-zero, with exactly one clear message.
function(cgemm_add_mpi_failure_test name np regex)
  add_test(NAME mpi_error_${name}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/expect_failure.sh "${regex}"
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:cgemm-run> --backend cpu ${ARGN})
  set_tests_properties(mpi_error_${name} PROPERTIES LABELS mpi TIMEOUT 60
    ENVIRONMENT "${CGEMM_MPI_ENV}")
endfunction()

# Meshes: tp 2 on 2 ranks, tp 4 on 4 ranks, dp 2 x tp 2 on 4 ranks. Per mesh and collective,
# four variants cover batch 1 / > 1, bias on / off, batch-first / sequence-first.
foreach(mesh "tp2;2;1" "tp4;4;1" "dp2tp2;4;2")
  list(GET mesh 0 mname)
  list(GET mesh 1 np)
  list(GET mesh 2 dp)
  # Local batch 3 on one dp rank, 2 per rank on two (gemm.py's reorders need the local
  # batch divisible by dp, or 1).
  if(dp EQUAL 1)
    set(big_batch 3)
  else()
    math(EXPR big_batch "2 * ${dp}")
  endif()
  foreach(coll none all_gather reduce_scatter)
    set(shape --dp ${dp} --seq_len 16 --hidden_in 32 --hidden_out 48 --collective ${coll})
    cgemm_add_mpi_test(${mname}_${coll}_b1_bias ${np} ${shape} --batch ${dp} --bias on)
    cgemm_add_mpi_test(${mname}_${coll}_b${big_batch}_nobias ${np} ${shape} --batch ${big_batch} --bias off)
    cgemm_add_mpi_test(${mname}_${coll}_b${big_batch}_bias_seqfirst ${np} ${shape}
      --batch ${big_batch} --bias on --transpose_batch_sequence on)
    cgemm_add_mpi_test(${mname}_${coll}_b1_nobias_seqfirst ${np} ${shape}
      --batch ${dp} --bias off --transpose_batch_sequence on)
  endforeach()
endforeach()

# Schedule knobs and dtypes.
set(small --seq_len 16 --hidden_in 32 --hidden_out 48 --batch 2)
cgemm_add_mpi_test(tp4_all_gather_aggregate 4 ${small} --collective all_gather --aggregate_all_gather on)
cgemm_add_mpi_test(tp3_all_gather_aggregate 3 --seq_len 12 --hidden_in 24 --hidden_out 48 --batch 2
  --collective all_gather --aggregate_all_gather on)
cgemm_add_mpi_test(tp4_reduce_scatter_1stream 4 ${small} --collective reduce_scatter --num_max_streams 1)
cgemm_add_mpi_test(tp2_all_gather_fp16 2 ${small} --collective all_gather --dtype fp16)
# chunks_per_rank: chunks moved and multiplied in pieces (rows, or batch blocks batch-first),
# each collective and layout, with plain and aggregate all-gather rings, 2 check rounds each.
cgemm_add_mpi_test(tp2_chunks_per_rank 2 --seq_len 16 --hidden_in 32 --hidden_out 48 --batch 2
  --collective all_gather,reduce_scatter --transpose_batch_sequence off,on --chunks_per_rank 2
  --check_rounds 2)
cgemm_add_mpi_test(tp4_chunks_per_rank 4 --seq_len 16 --hidden_in 32 --hidden_out 48 --batch 4
  --collective all_gather,reduce_scatter --chunks_per_rank 4 --aggregate_all_gather on,off)
cgemm_add_mpi_test(tp2_reduce_scatter_fp32 2 ${small} --collective reduce_scatter --dtype fp32)
# The bias after the reduction in the output dtype (gemm.py: output += bias), in fp16 where a
# second rounding shows; and fp32 sums of three and four partials in a fixed order.
cgemm_add_mpi_test(tp2_reduce_scatter_fp16_bias 2 --seq_len 48 --hidden_in 256 --hidden_out 64
  --batch 2 --collective reduce_scatter --dtype fp16 --bias on)
cgemm_add_mpi_test(tp4_reduce_scatter_fp16_bias 4 --seq_len 48 --hidden_in 256 --hidden_out 64
  --batch 2 --collective reduce_scatter --dtype fp16 --bias on)
cgemm_add_mpi_test(tp3_reduce_scatter_fp32 3 --seq_len 48 --hidden_in 1536 --hidden_out 64
  --batch 1 --collective reduce_scatter --dtype fp32)
cgemm_add_mpi_test(tp4_all_gather_aggregate_3streams 4 ${small} --collective all_gather
  --aggregate_all_gather on --num_max_streams 3)
cgemm_add_mpi_test(tp2_block_from_config 2 --config ${CMAKE_SOURCE_DIR}/configs/demo.ini --dp 1
  --seq_len 64 --batch 2 --report ${CMAKE_CURRENT_BINARY_DIR}/mpi_block_report.json)

# The report in JSON's own types (specs, options, provenance), and merge_reports.py reading it.
add_test(NAME mpi_report_json
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_report.sh ${CMAKE_CURRENT_BINARY_DIR}/report_json
          ${CMAKE_SOURCE_DIR}/scripts/slurm/merge_reports.py
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cpu --warmup 0 --iterations 1 --seq_len 16
          --batch 2 --dtype fp16 --transpose_batch_sequence on --gemm "up all_gather 32 64"
          --gemm "down reduce_scatter 64 32")
set_tests_properties(mpi_report_json PROPERTIES LABELS mpi TIMEOUT 120 PROCESSORS 2
  ENVIRONMENT "${CGEMM_MPI_ENV}")

# Bad input ends every rank with one message naming the problem.
cgemm_add_mpi_failure_test(dp_does_not_divide 4 "--dp 3|dp.*3.*4" --dp 3)
cgemm_add_mpi_failure_test(seq_not_divisible 4 "seq_len" --seq_len 10 --collective all_gather)
cgemm_add_mpi_failure_test(unknown_option 2 "no_such_option" --no_such_option 1)
cgemm_add_mpi_failure_test(zero_size 2 "hidden_in" --hidden_in 0)
cgemm_add_mpi_failure_test(negative_size 2 "batch" --batch -2)
cgemm_add_mpi_failure_test(unknown_dtype 2 "dtype.*int7|int7" --dtype int7)
cgemm_add_mpi_failure_test(local_batch_not_divisible_by_dp 4 "_reorder_dp_leading.*divisible"
  --dp 2 --batch 6 --collective all_gather)
cgemm_add_mpi_failure_test(chunks_per_rank_batch 2
  "chunks_per_rank 2 does not divide the local batch 3" --batch 3 --chunks_per_rank 2
  --collective reduce_scatter)
cgemm_add_mpi_failure_test(malformed_ini 2 "malformed.ini" --config ${CMAKE_CURRENT_LIST_DIR}/malformed.ini)
cgemm_add_mpi_failure_test(missing_config 2 "no/such/file.ini" --config no/such/file.ini)
# Boost.Program_options 1.74 loops forever formatting an error that holds its placeholders.
cgemm_add_mpi_failure_test(boost_placeholder_cli 2 "%value%.*--batch" --batch %value%)
cgemm_add_mpi_failure_test(boost_placeholder_ini 2 "hang-boost-placeholder-value.ini, line 1.*%value%"
  --config ${CMAKE_SOURCE_DIR}/tests/fuzz/regressions/run_config/hang-boost-placeholder-value.ini)

# --trace writes a Chrome trace and an SVG timeline with every rank's GEMMs and transfers.
add_test(NAME mpi_tp2_trace
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_trace.sh ${CMAKE_CURRENT_BINARY_DIR}/mpi_trace.json
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cpu --warmup 0 --iterations 1 --seq_len 16
          --hidden_in 32 --hidden_out 48 --batch 2 --collective reduce_scatter
          --trace ${CMAKE_CURRENT_BINARY_DIR}/mpi_trace.json)
set_tests_properties(mpi_tp2_trace PROPERTIES LABELS mpi TIMEOUT 60 ENVIRONMENT "${CGEMM_MPI_ENV}")
# A block's trace: each GEMM a labelled call, the same on both ranks; bytes and FLOPs in every
# event's args; every transfer's wait; the labels as text in the SVG.
add_test(NAME mpi_tp2_trace_block
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_trace_block.sh ${CMAKE_CURRENT_BINARY_DIR}/mpi_trace_block.json 2 16
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cpu --warmup 0 --iterations 1 --seq_len 16 --batch 2
          --gemm "up_proj all_gather 32 48" --gemm "down_proj reduce_scatter 48 32"
          --trace ${CMAKE_CURRENT_BINARY_DIR}/mpi_trace_block.json)
set_tests_properties(mpi_tp2_trace_block PROPERTIES LABELS mpi TIMEOUT 60
  ENVIRONMENT "${CGEMM_MPI_ENV}")

# cgemm-bench runs its whole measurement path (tiny shapes on CPUs, no knob sweep).
add_test(NAME mpi_tp2_bench_tiny
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-bench> --backend cpu --cases tiny --knobs off --warmup 1
          --iterations 2 --out ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(mpi_tp2_bench_tiny PROPERTIES LABELS mpi TIMEOUT 60
  ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "written: .*cgemm_bench")

# cgemm-bench --scaling: the quantized GEMMs (the FP8 GEMM alone on the plan's quantized copies,
# sequential and overlapped with the quantization), the mode and formats in every output, at
# tp 2 (current scaling) and tp 1 (delayed, e4m3 x e5m2).
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/bench_fp8_tp2 ${CMAKE_CURRENT_BINARY_DIR}/bench_fp8_tp1)
add_test(NAME mpi_tp2_bench_tiny_fp8
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-bench> --backend cpu --cases tiny --knobs off --scaling current
          --warmup 1 --iterations 2 --out ${CMAKE_CURRENT_BINARY_DIR}/bench_fp8_tp2)
set_tests_properties(mpi_tp2_bench_tiny_fp8 PROPERTIES LABELS mpi TIMEOUT 60 PROCESSORS 2
  ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION
  "tiny all_gather \\[default\\] current e4m3 x e4m3: gemm .*tiny reduce_scatter \\[default\\] current e4m3 x e4m3: .*Quantized: current e4m3 x e4m3 .*quantization included.*\\| tiny \\| all_gather \\| default \\| current e4m3 x e4m3 \\|.*written: .*cgemm_bench")
add_test(NAME mpi_tp1_bench_tiny_fp8
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 1 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-bench> --backend cpu --cases tiny --knobs off --scaling delayed
          --rhs_format e5m2 --amax_history_len 4 --warmup 1 --iterations 2
          --out ${CMAKE_CURRENT_BINARY_DIR}/bench_fp8_tp1)
set_tests_properties(mpi_tp1_bench_tiny_fp8 PROPERTIES LABELS mpi TIMEOUT 60
  ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION
  "tiny all_gather \\[default\\] delayed e4m3 x e5m2: gemm .*tiny reduce_scatter \\[default\\] delayed e4m3 x e5m2: .*written: .*cgemm_bench")

# FP8 GEMMs whose rows are not 16-byte aligned (cuBLASLt's rule) are refused when planned, on
# every backend and in --dry_run, with exit 2 and one message naming the operand, the shapes
# and the rule (they used to pass planning and the CPU backend, then abort on the GPU: MPI_ABORT,
# exit 1). The issue's shape first (tp 3, batch 2, seq 9, K 96, N 34, delayed, e5m2 x e4m3,
# reduce-scatter: n=34 bf16 is 68 bytes), then odd N / tp (all-gather, e4m3 x e5m2), odd
# K / tp (reduce-scatter, e4m3 x e4m3) and odd K (all-gather, e5m2 x e4m3); gemm.py's own rule
# on the contracting dim refuses those two first.
# name | ranks | options | what the message names
set(fp8_misaligned
  "issue_rs_n34|3|--tp 3 --batch 2 --seq_len 9 --hidden_in 96 --hidden_out 34 --collective reduce_scatter --scaling delayed --lhs_format e5m2 --rhs_format e4m3|the output rows of each GEMM hold n=34 bfloat16 elements, 68 bytes, not a multiple of 16: FP8 GEMMs need 16-byte aligned rows.*make n \\(N, or N / tp when it is sharded\\) a multiple of 8"
  "ag_odd_n_per_rank|2|--tp 2 --seq_len 8 --hidden_in 64 --hidden_out 34 --collective all_gather --scaling current --rhs_format e5m2|GEMM 'all_gather' \\(scaling current_tensor_scaling, all_gather, lhs .2, 8, 64., rhs .64, 34..*n=17 bfloat16 elements, 34 bytes"
  "rs_odd_k_per_rank|2|--tp 2 --seq_len 8 --hidden_in 34 --hidden_out 64 --collective reduce_scatter --scaling current|cuBLAS GEMM LHS tensor's contracting dimension must be a multiple of 16 when using quantized inputs. Got contracting_size=17"
  "ag_odd_k|2|--tp 2 --seq_len 8 --hidden_in 40 --hidden_out 64 --collective all_gather --scaling delayed --lhs_format e5m2|contracting dimension must be a multiple of 16 when using quantized inputs. Got contracting_size=40")
foreach(case ${fp8_misaligned})
  string(REPLACE "|" ";" fields "${case}")
  list(GET fields 0 name)
  list(GET fields 1 np)
  list(GET fields 2 opts)
  list(GET fields 3 regex)
  separate_arguments(opts)
  foreach(where "dry_run;--dry_run;on" "cpu;--backend;cpu")
    list(GET where 0 wname)
    list(SUBLIST where 1 2 wopts)
    add_test(NAME mpi_error_fp8_misaligned_${name}_${wname}
      COMMAND ${CMAKE_CURRENT_LIST_DIR}/expect_usage_error.sh "cgemm-run: error: .*${regex}"
              ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
              $<TARGET_FILE:cgemm-run> ${wopts} ${opts})
    set_tests_properties(mpi_error_fp8_misaligned_${name}_${wname} PROPERTIES LABELS mpi
      TIMEOUT 60 PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
  endforeach()
endforeach()
# MXFP8 scales blocks of 32 along K: K a multiple of 16 but not 32 is refused when planned (it
# used to be planned, then abort when run).
foreach(where "dry_run;--dry_run;on;--backend;cpu" "cpu;--backend;cpu")
  list(GET where 0 wname)
  list(SUBLIST where 1 -1 wopts)
  add_test(NAME mpi_error_mxfp8_k48_${wname}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/expect_usage_error.sh
            "cgemm-run: error: GEMM 'none': scaling mxfp8_1d_scaling scales blocks of 32 elements along the contracting dim, so each GEMM's k must be a multiple of 32; k=48"
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 1 ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:cgemm-run> ${wopts} --scaling mxfp8 --collective none --hidden_in 48
            --hidden_out 64)
  set_tests_properties(mpi_error_mxfp8_k48_${wname} PROPERTIES LABELS mpi TIMEOUT 60
    ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()
# Block scaling has no CUDA kernels: refused when planned for the CUDA backend, on any GPU
# (issue 43 item 5; the docs said compute capability 10.0 would run it).
add_test(NAME mpi_error_mxfp8_cuda_dry_run
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/expect_usage_error.sh
          "cgemm-run: error: GEMM 'none': scaling mxfp8_1d_scaling runs on the CPU backend's emulation only \\(backend = cpu\\): the CUDA backend has no block-scaling kernels yet, on any GPU"
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 1 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --dry_run on --backend cuda --compute_capability 100
          --scaling mxfp8 --collective none --hidden_in 64 --hidden_out 64)
set_tests_properties(mpi_error_mxfp8_cuda_dry_run PROPERTIES LABELS mpi TIMEOUT 60
  ENVIRONMENT "${CGEMM_MPI_ENV}")

# scripts/fp8_summary.py (device-fp8.sh's screen) joins cgemm-bench's bf16, FP8 and --parts
# quantize files with bench/peers/torch_scaled_mm.py's CSV.
add_test(NAME mpi_bench_fp8_summary
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_fp8_summary.sh ${MPIEXEC_EXECUTABLE}
          $<TARGET_FILE:cgemm-bench> ${CMAKE_CURRENT_BINARY_DIR}/bench_fp8_summary)
set_tests_properties(mpi_bench_fp8_summary PROPERTIES LABELS mpi TIMEOUT 120
  ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "^PASS")

# cgemm-bench's outputs: --out created with its parents; nccl-tests' bytes, algbw and busbw in
# stdout, CSV, JSON and Markdown; TFLOP/s with digits on CPUs; the JSON's run metadata.
add_test(NAME mpi_tp2_bench_outputs
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_bench.sh ${MPIEXEC_EXECUTABLE}
          $<TARGET_FILE:cgemm-bench> ${CMAKE_CURRENT_BINARY_DIR}/bench_outputs)
set_tests_properties(mpi_tp2_bench_outputs PROPERTIES LABELS mpi TIMEOUT 90 PROCESSORS 2
  ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "^PASS")

# cgemm-bench from an INI file (cgemm-run's --config rules; the command line wins).
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/bench_tiny.ini
  "# cgemm-bench, tiny shapes on CPUs\ncases = tiny\nknobs = off\nwarmup = 1\n"
  "iterations = 2\nbackend = cpu\n")
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/bench_config_out)
add_test(NAME mpi_tp2_bench_config
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-bench> --config ${CMAKE_CURRENT_BINARY_DIR}/bench_tiny.ini
          --iterations 1 --out ${CMAKE_CURRENT_BINARY_DIR}/bench_config_out)
set_tests_properties(mpi_tp2_bench_config PROPERTIES LABELS mpi TIMEOUT 60 PROCESSORS 2
  ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "tiny all_gather .*written: .*cgemm_bench")

# The knob sweep skips, with a line, a knob the first case cannot take (tiny's batch 2 does not
# split into chunks_per_rank=4 pieces) and measures the rest.
add_test(NAME mpi_tp2_bench_knobs
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-bench> --backend cpu --cases tiny --knobs on --warmup 0
          --iterations 1 --l2_mib 1 --out ${CMAKE_CURRENT_BINARY_DIR}/bench_knobs_out)
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/bench_knobs_out)
set_tests_properties(mpi_tp2_bench_knobs PROPERTIES LABELS mpi TIMEOUT 180 PROCESSORS 2
  ENVIRONMENT "${CGEMM_MPI_ENV}"
  PASS_REGULAR_EXPRESSION "chunks_per_rank=2\\]: gemm.*chunks_per_rank=4\\]: skipped: .*does not divide the local batch.*written: ")

# cgemm-bench joins the PyTorch peers' CSV (bench/peers/torch_async_tp.py's columns) by case;
# a CSV without a needed column is refused with one message. A NaN async-TP time (the peer at
# tp 1, where PyTorch has no async-TP) reads n/a with a note, never "nan" or "nanx".
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/peers_tiny.csv
  "case,collective,gemm_ms,sequential_ms,async_tp_ms\ntiny,all_gather,1.5,2,3\n"
  "tiny,reduce_scatter,1.5,2,nan\n")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/peers_bad.csv "case,collective,gemm_ms\ntiny,all_gather,1\n")
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/bench_peers_out)
add_test(NAME mpi_tp2_bench_peers
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-bench> --backend cpu --cases tiny --knobs off --warmup 0
          --iterations 1 --l2_mib 1 --peers ${CMAKE_CURRENT_BINARY_DIR}/peers_tiny.csv
          --out ${CMAKE_CURRENT_BINARY_DIR}/bench_peers_out)
set_tests_properties(mpi_tp2_bench_peers PROPERTIES LABELS mpi TIMEOUT 90 PROCESSORS 2
  ENVIRONMENT "${CGEMM_MPI_ENV}"
  PASS_REGULAR_EXPRESSION "Against PyTorch.*\\| tiny \\| all_gather \\| [0-9.]+ \\| 2\\.000 \\| 3\\.000 \\|.*\\| tiny \\| reduce_scatter \\| [0-9.]+ \\| 2\\.000 \\| n/a \\| [0-9.]+ \\| n/a \\|.*n/a: the peer ran no async-TP"
  FAIL_REGULAR_EXPRESSION "\\| nan \\||nanx")

# cgemm-bench --parts: the one-GPU studies (launcher/bench/parts/) on the CPU backend, tiny case.
add_test(NAME mpi_bench_parts
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_parts.sh ${MPIEXEC_EXECUTABLE}
          $<TARGET_FILE:cgemm-bench> ${CMAKE_CURRENT_BINARY_DIR}/bench_parts_out)
set_tests_properties(mpi_bench_parts PROPERTIES LABELS mpi TIMEOUT 90
  ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "^PASS")
# cgemm-bench --parts chunking --scaling current: the FP8 chunking table (issue 23 item 7) on
# the CPU backend's FP8 emulation, joined with a torch_scaled_mm.py CSV.
add_test(NAME mpi_bench_parts_fp8
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_parts_fp8.sh ${MPIEXEC_EXECUTABLE}
          $<TARGET_FILE:cgemm-bench> ${CMAKE_CURRENT_BINARY_DIR}/bench_parts_fp8_out)
set_tests_properties(mpi_bench_parts_fp8 PROPERTIES LABELS mpi TIMEOUT 90
  ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "^PASS")
# cgemm-bench --parts grouped (issue 25 item 5's study) on the CPU backend, cases divided by
# 64, with the peer's dry run and the joined table.
add_test(NAME mpi_bench_parts_grouped
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_parts_grouped.sh ${MPIEXEC_EXECUTABLE}
          $<TARGET_FILE:cgemm-bench> ${Python3_EXECUTABLE} ${CMAKE_CURRENT_BINARY_DIR}/bench_parts_grouped_out)
set_tests_properties(mpi_bench_parts_grouped PROPERTIES LABELS mpi TIMEOUT 60
  ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "^PASS")

# cgemm-bench's bad options: one "cgemm-bench: error:" line naming the option and the value
# (the shared options in cgemm-run's words), exit status 2, before any run.
function(cgemm_add_bench_failure_test name regex)
  add_test(NAME mpi_bench_error_${name}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/expect_usage_error.sh --program cgemm-bench "${regex}"
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:cgemm-bench> --backend cpu --knobs off ${ARGN})
  set_tests_properties(mpi_bench_error_${name} PROPERTIES LABELS mpi TIMEOUT 90 PROCESSORS 2
    ENVIRONMENT "${CGEMM_MPI_ENV}")
endfunction()
cgemm_add_bench_failure_test(shared_option
  "cgemm-bench: error: --num_max_streams 0: must be at least 1 \\[streams\\]"
  --cases tiny --num_max_streams 0)
cgemm_add_bench_failure_test(shared_bool
  "cgemm-bench: error: command line: .*'maybe'.*use_ce.*run cgemm-bench --help"
  --cases tiny --use_ce maybe)
cgemm_add_bench_failure_test(own_option "cgemm-bench: error: --cases bogus: unknown case 'bogus'"
  --cases bogus)
cgemm_add_bench_failure_test(mesh "cgemm-bench: error: --dp 3 does not divide the world size 2"
  --cases tiny --dp 3)
cgemm_add_bench_failure_test(peers_column
  "cgemm-bench: error: --peers: '.*peers_bad.csv' has no column 'sequential_ms'"
  --cases tiny --peers ${CMAKE_CURRENT_BINARY_DIR}/peers_bad.csv)
cgemm_add_bench_failure_test(parts_two_ranks
  "cgemm-bench: error: --parts measures one rank's device alone: run it with one rank \\(mpirun -np 1\\), not 2"
  --cases tiny --parts chunking)
cgemm_add_bench_failure_test(parts_all_and_unknown
  "cgemm-bench: error: --parts all,bogus: unknown study 'bogus'" --cases tiny --parts all,bogus)
cgemm_add_bench_failure_test(parts_scaling
  "cgemm-bench: error: --scaling current: --parts takes a scaling for chunking only"
  --cases tiny --parts quantize --scaling current)
cgemm_add_bench_failure_test(parts_scaling_blocks
  "cgemm-bench: error: --scaling mxfp8: --parts chunking times per-tensor FP8 GEMMs: delayed or current"
  --cases tiny --parts chunking --scaling mxfp8)
cgemm_add_bench_failure_test(parts_unknown
  "cgemm-bench: error: --parts chunks: unknown study 'chunks'" --cases tiny --parts chunks)
cgemm_add_bench_failure_test(parts_tp
  "cgemm-bench: error: --parts_tp 2,0: each value must be >= 1" --cases tiny --parts all --parts_tp 2,0)
cgemm_add_bench_failure_test(parts_chunks
  "cgemm-bench: error: --parts_chunks_per_rank 1,x: 'x' is not an integer"
  --cases tiny --parts all --parts_chunks_per_rank 1,x)
# Lists: one rule with cgemm-run's (an empty item is refused, not skipped); --l2_mib bounded.
cgemm_add_bench_failure_test(cases_empty_item
  "cgemm-bench: error: --cases tiny,: an empty value in the list" --cases tiny,)
cgemm_add_bench_failure_test(parts_empty
  "cgemm-bench: error: --parts \" \": an empty value in the list" --cases tiny --parts " ")
cgemm_add_bench_failure_test(l2_mib_bound
  "cgemm-bench: error: --l2_mib 1e\\+12: must be at most 4096 \\[MiB\\]" --cases tiny --l2_mib 1e12)
# --l2_mib's copies over the host's memory: refused before they are allocated.
add_test(NAME mpi_bench_l2_memory
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_l2_memory.sh ${MPIEXEC_EXECUTABLE}
          $<TARGET_FILE:cgemm-bench> ${CMAKE_CURRENT_BINARY_DIR}/bench_l2_memory_out)
set_tests_properties(mpi_bench_l2_memory PROPERTIES LABELS mpi TIMEOUT 90
  ENVIRONMENT "${CGEMM_MPI_ENV}" SKIP_RETURN_CODE 77)
cgemm_add_bench_failure_test(config_file
  "cgemm-bench: error: --config .*no_such.ini: cannot open the config file"
  --cases tiny --config ${CMAKE_CURRENT_BINARY_DIR}/no_such.ini)

# tp = 1: the collectives reduce to a GEMM (the reduce-scatter writes its output directly).
cgemm_add_mpi_test(tp1_reduce_scatter_bias 1 ${small} --collective reduce_scatter --bias on)
cgemm_add_mpi_test(tp1_all_gather_bias 1 ${small} --collective all_gather --bias on)

# Check rounds: every GEMM of a block checked three times on fresh inputs, the two plans in
# turn on the same buffers.
cgemm_add_mpi_test(tp2_block_check_rounds 2 --config ${CMAKE_SOURCE_DIR}/configs/demo.ini --dp 1
  --seq_len 32 --batch 2 --check_rounds 3)
set_tests_properties(mpi_tp2_block_check_rounds PROPERTIES
  PASS_REGULAR_EXPRESSION "down_proj\\] check PASSED.*over 3 rounds")

# Output dumps of two meshes agree element by element; another seed's do not (cgemm-compare).
add_test(NAME mpi_cross_mesh_dump
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/cross_check.sh ${CMAKE_CURRENT_BINARY_DIR}/cross
          ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:cgemm-run> $<TARGET_FILE:cgemm-compare>)
set_tests_properties(mpi_cross_mesh_dump PROPERTIES LABELS mpi TIMEOUT 120 PROCESSORS 4
  ENVIRONMENT "${CGEMM_MPI_ENV}")

# --backend cuda where no rank has a GPU: one message, exit 2 (skipped where a GPU exists).
add_test(NAME mpi_error_cuda_without_gpu
  COMMAND sh -c "nvidia-smi -L >/dev/null 2>&1 && exit 77; exec \"$@\"" expect
          ${CMAKE_CURRENT_LIST_DIR}/expect_failure.sh "backend cuda: rank 0 .* sees no usable GPU"
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cuda --gpu_sharing on --seq_len 16 --hidden_in 32
          --hidden_out 48)
set_tests_properties(mpi_error_cuda_without_gpu PROPERTIES LABELS mpi TIMEOUT 60
  SKIP_RETURN_CODE 77 ENVIRONMENT "${CGEMM_MPI_ENV}")
cgemm_add_mpi_failure_test(output_dump_without_check 2 "output_dump.*check = on"
  --check off --output_dump ${CMAKE_CURRENT_BINARY_DIR}/never.dump)

# The watchdog: a rank stopped mid-run (SIGSTOP) or one that never posts its half of an
# exchange ends the job within the timeout + 10 s, exit 4, with a line naming the exchange.
# Ranks inherit CGEMM_TEST_FAULT from mpirun (one host). 5 s rather than 3: on a loaded machine
# (4 ranks on 2 busy cores) a rank descheduled for 3 s at a barrier before the fault would
# fire the watchdog on the wrong wait.
foreach(fault "stop:2:5;all_gather" "skip_exchange:1:3;reduce_scatter")
  list(GET fault 0 spec)
  list(GET fault 1 coll)
  string(REGEX REPLACE ":.*" "" kind ${spec})
  add_test(NAME mpi_watchdog_${kind}_${coll}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/fault_check.sh 5 ${spec}
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:cgemm-run> --backend cpu --seq_len 64 --hidden_in 64 --hidden_out 64
            --collective ${coll} --timeout 5 --iterations 50)
  set_tests_properties(mpi_watchdog_${kind}_${coll} PROPERTIES LABELS mpi TIMEOUT 60
    PROCESSORS 4 ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()
# The process timers (cgemm/core/process_timer.hpp): a rank stalled in MPI_Init (every rank,
# before MPI_Init) or in MPI_Finalize (one rank) ends the job within --timeout + 10 s, exit 4.
# The finalize cases run a whole job before their stall, so their watchdog watches every
# barrier: a tiny problem and 6 s keep a loaded machine (2 cores, load 5-7) from firing it at a
# barrier before the stall, which the default problem and 3 s once did.
foreach(stall "init;MPI_Init;cgemm-run;3" "finalize:1;MPI_Finalize;cgemm-run;6"
              "init;MPI_Init;cgemm-bench;3" "finalize_stop:1;MPI_Finalize;cgemm-run;6")
  list(GET stall 0 spec)
  list(GET stall 1 call)
  list(GET stall 2 tool)
  list(GET stall 3 timeout)
  set(problem "")
  if(tool STREQUAL "cgemm-run")
    set(problem --seq_len 16 --hidden_in 32 --hidden_out 48 --warmup 0 --iterations 1)
  endif()
  string(REGEX REPLACE ":.*" "" kind ${spec})
  add_test(NAME mpi_timer_${kind}_stall_${tool}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/stall_check.sh ${timeout} ${spec} ${call}
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:${tool}> --backend cpu --timeout ${timeout} ${problem})
  set_tests_properties(mpi_timer_${kind}_stall_${tool} PROPERTIES LABELS mpi TIMEOUT 60
    PROCESSORS 2 ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()
# Output files (launcher/common/output_files.hpp): no output may name the config or another output,
# an explicitly empty path is a bad option, and every output is checked writable up front
# without creating it.
set(out ${CMAKE_CURRENT_BINARY_DIR}/outputs)
file(MAKE_DIRECTORY ${out})
file(WRITE ${out}/same_file.ini "seq_len = 16\nhidden_in = 32\nhidden_out = 48\n")
cgemm_add_mpi_failure_test(report_names_config 2 "--report .*same_file.ini.*--config"
  --config ${out}/same_file.ini --report ${out}/same_file.ini)
cgemm_add_mpi_failure_test(trace_names_report 2 "--trace .*--report"
  --report ${out}/both.json --trace ${out}/both.json)
cgemm_add_mpi_failure_test(report_names_trace_svg 2 "--trace's SVG .*--report"
  --report ${out}/t.json.svg --trace ${out}/t.json)
cgemm_add_mpi_failure_test(output_dump_names_report 2 "--output_dump .*--report"
  --report ${out}/d.out --output_dump ${out}/d.out)
file(WRITE ${out}/empty_report.ini "report =\n")
cgemm_add_mpi_failure_test(empty_report_path_ini 2 "report = .*empty_report.ini, line 1.*empty path"
  --config ${out}/empty_report.ini)
# An empty argument does not survive CMake's argument lists: sh appends it.
add_test(NAME mpi_error_empty_report_path
  COMMAND sh -c "exec \"$@\" --report ''" sh ${CMAKE_CURRENT_LIST_DIR}/expect_failure.sh
          "--report \"\": an empty path"
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cpu)
set_tests_properties(mpi_error_empty_report_path PROPERTIES LABELS mpi TIMEOUT 60
  ENVIRONMENT "${CGEMM_MPI_ENV}")
cgemm_add_mpi_failure_test(report_in_missing_folder 2 "--report .*no such folder"
  --report ${out}/no/such/folder/r.json)
cgemm_add_mpi_failure_test(trace_is_a_folder 2 "--trace .*is a folder" --trace ${out})

# A run that fails after the output checks (here: a planner error) leaves an old report
# byte-identical and creates none of its other outputs.
add_test(NAME mpi_failed_run_keeps_old_report
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/keeps_old_outputs.sh ${out}/failed_run
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cpu --dp 2 --batch 6 --collective all_gather
          --report ${out}/failed_run/report.json --trace ${out}/failed_run/trace.json)
set_tests_properties(mpi_failed_run_keeps_old_report PROPERTIES LABELS mpi TIMEOUT 60
  PROCESSORS 4 ENVIRONMENT "${CGEMM_MPI_ENV}")
# Paths that are not plain files (output_target.hpp, input_files.hpp): a symlinked report is
# followed, /dev/null stays a device, a FIFO is refused at once as output, --config and
# cgemm-compare input, a killed run's temporary file goes, a row on /dev/full names ENOSPC.
add_test(NAME mpi_special_paths
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/special_paths.sh ${out}/special_paths
          $<TARGET_FILE:cgemm-compare>
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cpu --seq_len 16 --hidden_in 32 --hidden_out 48
          --warmup 0 --iterations 1)
set_tests_properties(mpi_special_paths PROPERTIES LABELS mpi TIMEOUT 240 PROCESSORS 2
  ENVIRONMENT "${CGEMM_MPI_ENV}")

# Sweeps: lists of values expand to their product, run one after another in this job; each
# experiment appends a row to the CSV and JSON Lines files and to the printed table.
file(WRITE ${out}/sweep.ini "seq_len = 16, 32\nhidden_in = 32\nhidden_out = 48\n"
  "collective = all_gather, reduce_scatter\nwarmup = 0\niterations = 1\n")
add_test(NAME mpi_sweep_2x2
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_sweep.sh ${out}/sweep_2x2 4
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cpu --config ${out}/sweep.ini
          --sweep_csv ${out}/sweep_2x2/sweep.csv --sweep_jsonl ${out}/sweep_2x2/sweep.jsonl)
add_test(NAME mpi_sweep_knobs_cli
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_sweep.sh ${out}/sweep_knobs 4
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cpu --warmup 0 --iterations 1 --seq_len 16
          --hidden_in 32 --hidden_out 48 --dtype bf16,fp16 --num_max_streams 1,2
          --sweep_csv ${out}/sweep_knobs/sweep.csv --sweep_jsonl ${out}/sweep_knobs/sweep.jsonl)
# The 3rd value of a list is bad (seq_len 6 is not divisible by tp 4): nothing runs.
add_test(NAME mpi_sweep_bad_third_value
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_sweep.sh ${out}/sweep_bad 0
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cpu --seq_len 16,32,6 --hidden_in 32 --hidden_out 48
          --sweep_csv ${out}/sweep_bad/sweep.csv --sweep_jsonl ${out}/sweep_bad/sweep.jsonl)
# Every sweepable option in every row, typed in JSON; the config once, a line per experiment,
# the verdict once at the end.
add_test(NAME mpi_sweep_columns
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_sweep_columns.sh ${out}/sweep_columns 4
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cpu --warmup 0 --iterations 1 --seq_len 16,32
          --hidden_in 32 --hidden_out 48 --dtype bf16,fp32
          --sweep_csv ${out}/sweep_columns/sweep.csv --sweep_jsonl ${out}/sweep_columns/sweep.jsonl)
set_tests_properties(mpi_sweep_2x2 mpi_sweep_knobs_cli mpi_sweep_columns PROPERTIES LABELS mpi
  TIMEOUT 120 PROCESSORS 2 ENVIRONMENT "${CGEMM_MPI_ENV}")
set_tests_properties(mpi_sweep_bad_third_value PROPERTIES LABELS mpi TIMEOUT 60 PROCESSORS 4
  ENVIRONMENT "${CGEMM_MPI_ENV}")
cgemm_add_mpi_failure_test(sweep_bad_third_value 4 "experiment 3/3 \\(seq_len=6\\).*--seq_len 6"
  --seq_len 16,32,6 --hidden_in 32 --hidden_out 48)
cgemm_add_mpi_failure_test(sweep_bad_dtype 2 "experiment 3/3 \\(dtype=int7\\).*int7"
  --dtype bf16,fp16,int7)
cgemm_add_mpi_failure_test(sweep_mesh_option 2 "--dp 1,2: .*may not be swept" --dp 1,2)
cgemm_add_mpi_failure_test(sweep_with_report 2 "--report .*a sweep" --seq_len 16,32
  --report ${out}/never.json)

# Repeatable bits: the same job twice gives the same checksum of every output shard on every
# rank (both paths; reduce-scatter sums in a fixed order), overlap = auto included.
add_test(NAME mpi_repeatable_bits
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/repeat_check.sh ${CMAKE_CURRENT_BINARY_DIR}/repeat
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-run> --backend cpu --config ${CMAKE_SOURCE_DIR}/configs/demo.ini
          --dp 1 --seq_len 64 --batch 2 --warmup 0 --iterations 1 --check_rounds 2)
set_tests_properties(mpi_repeatable_bits PROPERTIES LABELS mpi TIMEOUT 120 PROCESSORS 4
  ENVIRONMENT "${CGEMM_MPI_ENV}")
# A sweep list on the single GEMM's options in a file whose gemm entries define the block
# would sweep nothing: refused.
file(WRITE ${out}/sweep_with_block.ini "gemm = up all_gather 32 48\ncollective = all_gather, reduce_scatter\n")
cgemm_add_mpi_failure_test(sweep_list_ignored_by_block 2 "collective = .*sweeps nothing"
  --config ${out}/sweep_with_block.ini --seq_len 16)

# The backward pass's GEMM layouts (issue 24: wgrad's transposed lhs and two contracting dims,
# lhs [K, M], rhs [N, K], an N-D rhs) as plain GEMMs on the CPU backend against an fp64
# reference, on 1 rank, dp 2 x tp 1, tp 3 and dp 2 x tp 2 (the reductions over dp, tp or both);
# the collective GEMMs on an N-D rhs and several contracting dims (issue 43 item 1); the layouts
# that cannot run are refused.
add_executable(test_gemm_layouts ${CMAKE_CURRENT_LIST_DIR}/test_gemm_layouts.cpp)
target_link_libraries(test_gemm_layouts PRIVATE cgemm GTest::gtest cgemm_warnings)
foreach(np 1 2 3 4)
  add_test(NAME mpi_gemm_layouts_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_gemm_layouts>)
  set_tests_properties(mpi_gemm_layouts_np${np} PROPERTIES LABELS mpi TIMEOUT 120
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()

# cgemm-run --fsdp: the demo's layer pair at fsdp 2 x tp 2 (the column-parallel weight gathered
# by its contracting rows, the row-parallel one by its output columns) and the all-gather GEMM at
# dp 2 x fsdp 2, each path checked against the other; the refusals, one message each.
cgemm_add_mpi_test(fsdp2_tp2 4 --fsdp 2 --batch 2 --seq_len 32 --bias on
  --gemm "up all_gather 64 96" --gemm "down reduce_scatter 96 64")
cgemm_add_mpi_test(dp2_fsdp2 4 --dp 2 --fsdp 2 --batch 4 --seq_len 16 --collective all_gather
  --hidden_in 32 --hidden_out 48 --bias on)
cgemm_add_mpi_failure_test(fsdp_row_parallel_with_replicas 4
  "GEMM 'down': gemm.py keeps the rhs \\('tpsp', 'fsdp'\\) sharded over the fsdp axis.*shard the lhs batch over 'fsdp' alone"
  --dp 2 --fsdp 2 --batch 4 --seq_len 16 --gemm "down reduce_scatter 32 48")
cgemm_add_mpi_failure_test(fsdp_batch_not_divisible 4
  "--batch 2 is not divisible by --dp 2 x --fsdp 2" --dp 2 --fsdp 2 --batch 2)
cgemm_add_mpi_failure_test(fsdp_does_not_divide_world 4
  "--dp 1 x --fsdp 3 does not divide the world size 4" --fsdp 3)
cgemm_add_mpi_failure_test(fsdp_weight_not_divisible 2
  "rhs \\(None, 'fsdp'\\): dim 1 of size 49 does not divide into fsdp=2 shards; cgemm does not pad"
  --fsdp 2 --batch 2 --seq_len 16 --collective all_gather --hidden_in 32 --hidden_out 49)
cgemm_add_mpi_failure_test(fsdp_moe 2 "--fsdp 2: the MoE block's grouped GEMMs have no FSDP gather"
  --fsdp 2 --config ${CMAKE_SOURCE_DIR}/configs/moe_demo.ini)

# FSDP (runtime/src/fsdp/fsdp_gather.hpp): weights sharded over the fsdp axis, gathered inside
# the GEMM over the fsdp group, on the CPU backend against an fp64 reference and byte for byte
# against the GEMM on the whole weight: fsdp 2, fsdp 3, fsdp 2 x tp 2 and dp 2 x fsdp 2.
add_executable(test_fsdp_gemm ${CMAKE_CURRENT_LIST_DIR}/test_fsdp_gemm.cpp)
target_link_libraries(test_fsdp_gemm PRIVATE cgemm GTest::gtest cgemm_warnings)
foreach(mesh "2;1;2" "3;1;3" "4;1;2" "4;2;2")
  list(GET mesh 0 np)
  list(GET mesh 1 dp)
  list(GET mesh 2 fsdp)
  add_test(NAME mpi_fsdp_gemm_np${np}_dp${dp}_fsdp${fsdp}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_fsdp_gemm> --dp ${dp} --fsdp ${fsdp})
  set_tests_properties(mpi_fsdp_gemm_np${np}_dp${dp}_fsdp${fsdp} PROPERTIES LABELS mpi
    TIMEOUT 180 PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()

# The grouped GEMM's runtime (issue 25 item 2: runtime/include/cgemm/runtime/grouped_plan.hpp)
# on the CPU backend, one rank: every form and layout, bf16 / fp16 / fp32, per group against an
# fp64 reference; uniform, skewed and empty groups, G = 1, bias, host and backend sizes; the
# size checks and the planner's refusals with their messages.
add_executable(test_grouped_plan ${CMAKE_CURRENT_LIST_DIR}/test_grouped_plan.cpp)
target_link_libraries(test_grouped_plan PRIVATE cgemm GTest::gtest cgemm_warnings)
add_test(NAME mpi_grouped_plan_np1
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 1 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:test_grouped_plan>)
set_tests_properties(mpi_grouped_plan_np1 PROPERTIES LABELS mpi TIMEOUT 120
  PROCESSORS 1 ENVIRONMENT "${CGEMM_MPI_ENV}")

# The tensor-parallel layer pair (column- and row-parallel, sequence parallel) and the
# activation all-gather of its weight gradients on the CPU backend against an fp64 reference:
# 1 rank, tp 2, tp 3, tp 4, dp 2 x tp 2; and with an fsdp axis (issue 41): fsdp 2, fsdp 3,
# fsdp 2 x tp 2, dp 2 x fsdp 2, dp 2 x fsdp 2 x tp 2.
add_executable(test_tp_linear ${CMAKE_CURRENT_LIST_DIR}/test_tp_linear.cpp)
target_link_libraries(test_tp_linear PRIVATE cgemm GTest::gtest cgemm_warnings)
foreach(mesh "np1;1;" "tp2;2;" "tp3;3;" "tp4;4;" "dp2tp2;4;--dp=2" "fsdp2;2;--fsdp=2"
             "fsdp3;3;--fsdp=3" "fsdp2tp2;4;--fsdp=2" "dp2fsdp2;4;--dp=2 --fsdp=2"
             "dp2fsdp2tp2;8;--dp=2 --fsdp=2")
  list(GET mesh 0 mname)
  list(GET mesh 1 np)
  list(GET mesh 2 flag)
  separate_arguments(flags UNIX_COMMAND "${flag}")
  add_test(NAME mpi_tp_linear_${mname}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_tp_linear> ${flags})
  set_tests_properties(mpi_tp_linear_${mname} PROPERTIES LABELS mpi TIMEOUT 120
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()

# The bucketed data-parallel gradient all-reduce (issue 24 item 2, gradient_buckets.hpp) and the
# world's amax (Backend::all_reduce_max) on the CPU backend against an fp64 reference: dp 1
# (nothing communicated), dp 2 and dp 3 (tp 1). The GPU machine runs it with --backend=cuda.
add_executable(test_gradient_buckets ${CMAKE_CURRENT_LIST_DIR}/test_gradient_buckets.cpp)
target_link_libraries(test_gradient_buckets PRIVATE cgemm GTest::gtest cgemm_warnings)
foreach(np 1 2 3)
  add_test(NAME mpi_gradient_buckets_dp${np}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_gradient_buckets>)
  set_tests_properties(mpi_gradient_buckets_dp${np} PROPERTIES LABELS mpi TIMEOUT 120
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()
# A dp rank that never starts a bucket: the other's wait ends under the watchdog (3 s) with one
# line naming the bucket and its slot.
add_test(NAME mpi_error_gradient_buckets_stall
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/expect_failure.sh --program cgemm
          "cgemm: error: .*timed out after .* waiting for all-reduce 'the data-parallel gradient all-reduce of bucket 1 of 4 \\(b2; 3 fp32 values\\)' over the DP group, world ranks 0, 1"
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:test_gradient_buckets> --stall)
set_tests_properties(mpi_error_gradient_buckets_stall PROPERTIES LABELS mpi TIMEOUT 60
  PROCESSORS 2 ENVIRONMENT "${CGEMM_MPI_ENV}")

# The all-gather GEMM's gathered lhs (Operand::kGatheredLhs, issue 24 item 2) equals the
# ActivationGather of the same shards bit for bit on both paths; other GEMMs refuse it.
add_executable(test_gathered_lhs ${CMAKE_CURRENT_LIST_DIR}/test_gathered_lhs.cpp)
target_link_libraries(test_gathered_lhs PRIVATE cgemm GTest::gtest cgemm_warnings)
foreach(mesh "np1;1;" "tp2;2;" "tp3;3;" "tp4;4;" "dp2tp2;4;--dp=2")
  list(GET mesh 0 mname)
  list(GET mesh 1 np)
  list(GET mesh 2 flag)
  add_test(NAME mpi_gathered_lhs_${mname}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_gathered_lhs> ${flag})
  set_tests_properties(mpi_gathered_lhs_${mname} PROPERTIES LABELS mpi TIMEOUT 120
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()

# cgemm-train (issue 24 items 3 and 4): the loss curve of tp 2 and dp 2 x tp 2 equals one
# rank's (fp32 within 1e-5 relative per step, bf16 within 1e-2), the loss falls, and the demo
# config runs with its trace. check_train.sh states the figures.
add_test(NAME mpi_train_parity
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_train.sh parity ${CMAKE_CURRENT_BINARY_DIR}/train_parity
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:cgemm-train>)
set_tests_properties(mpi_train_parity PROPERTIES LABELS mpi TIMEOUT 120 PROCESSORS 4
  ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "PASS")
# cgemm-train --fsdp (issue 41): loss parity with one rank at fsdp 2, fsdp 2 x tp 2, dp 2 x
# fsdp 2, fsdp 4 and fsdp 3 (odd sizes), 1/fsdp of the weight bytes, the fsdp share of each
# layer call, the graph replays.
add_test(NAME mpi_train_fsdp
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_train.sh fsdp ${CMAKE_CURRENT_BINARY_DIR}/train_fsdp
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:cgemm-train>)
set_tests_properties(mpi_train_fsdp PROPERTIES LABELS mpi TIMEOUT 240 PROCESSORS 4
  ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "PASS")
# --cuda_graph on gives --cuda_graph off's losses bit for bit (the CPU backend's emulated
# graphs here; scripts/device-graphs.sh runs the same on the GPU).
add_test(NAME mpi_train_graph
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_train.sh graph ${CMAKE_CURRENT_BINARY_DIR}/train_graph
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:cgemm-train>)
set_tests_properties(mpi_train_graph PROPERTIES LABELS mpi TIMEOUT 180 PROCESSORS 4
  ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "PASS")
add_test(NAME mpi_train_demo
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_train.sh demo ${CMAKE_CURRENT_BINARY_DIR}/train_demo
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:cgemm-train>
          ${CMAKE_SOURCE_DIR}/configs/train_demo.ini)
set_tests_properties(mpi_train_demo PROPERTIES LABELS mpi TIMEOUT 120 PROCESSORS 4
  ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "PASS")

# cgemm-train --scaling (issue 42 items 3 and 4): FP8 training's loss within 2% of bf16's at
# every 10th of 200 steps, at 1 rank and dp 2 x tp 2; check_train.sh states the figures.
add_test(NAME mpi_train_fp8
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_train.sh fp8 ${CMAKE_CURRENT_BINARY_DIR}/train_fp8
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:cgemm-train>
          ${CMAKE_SOURCE_DIR}/configs/train_demo.ini)
set_tests_properties(mpi_train_fp8 PROPERTIES LABELS mpi TIMEOUT 400 PROCESSORS 4
  ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "PASS")

# cgemm-train's bad input: one "cgemm-train: error:" line naming the option, exit status 2.
function(cgemm_add_train_failure_test name np regex)
  add_test(NAME mpi_train_error_${name}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/expect_usage_error.sh --program cgemm-train "${regex}"
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:cgemm-train> ${ARGN})
  set_tests_properties(mpi_train_error_${name} PROPERTIES LABELS mpi TIMEOUT 90 PROCESSORS ${np}
    ENVIRONMENT "${CGEMM_MPI_ENV}")
endfunction()
cgemm_add_train_failure_test(ffn_not_divisible 4
  "cgemm-train: error: --ffn 65 is not divisible by tp 2" --dp 2 --ffn 65)
cgemm_add_train_failure_test(seq_len_not_divisible 2
  "cgemm-train: error: --seq_len 15 is not divisible by tp 2" --seq_len 15)
cgemm_add_train_failure_test(local_batch_by_dp 4
  "cgemm-train: error: --batch 8 on --dp 4: each data-parallel rank's 2 sequences must be 1 or a multiple of dp 4"
  --dp 4 --batch 8)
# FP8 training (--scaling): not with an fsdp axis yet; sizes off cuBLASLt's FP8 alignment are
# refused by the planner before anything runs.
cgemm_add_train_failure_test(fp8_fsdp 2
  "cgemm-train: error: layer 'up_proj': FP8 training with an fsdp axis is not run yet"
  --fsdp 2 --scaling current)
cgemm_add_train_failure_test(fp8_alignment 1
  "cgemm-train: error: the planner refuses the MLP block .*contracting dimension must be a multiple of 16 when using quantized inputs"
  --hidden 24 --ffn 48 --scaling delayed)
cgemm_add_train_failure_test(batch_not_divisible 4
  "cgemm-train: error: --batch 3 is not divisible by --dp 2" --dp 2 --batch 3)
# A bucket of more KiB than size_t bytes hold wrapped around (2^54 KiB: "bucket_bytes 0";
# 2^54 + 1 KiB: silently 1 KiB buckets).
cgemm_add_train_failure_test(bucket_kib_too_large 2
  "cgemm-train: error: --bucket_kib 18014398509481985: must be at most 8388608 \\[KiB\\]"
  --dp 2 --bucket_kib 18014398509481985)
# An MLP block larger than the memory: refused before any buffer with the binding limit named,
# as cgemm-run's (it was OOM-killed without a word in a 1 GiB cgroup).
cgemm_add_train_failure_test(memory_check 2
  "cgemm-train: error: not enough memory: 2 rank\\(s\\) sharing host memory.*\\(the MLP block: batch 4, seq_len 16, hidden 65536, ffn 262144, float32 on dp 1 x tp 2; each rank needs [0-9]+ bytes for its activations, weights, optimizer state and GEMM plans; nothing was allocated\\)"
  --backend cpu --hidden 65536 --ffn 262144)
# A loss that overflows ends the run at that step: exit 5, one line, the report's losses as
# strings (before: "nan% of the first", exit 0, the losses null).
add_test(NAME mpi_train_diverged
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/train_diverged_check.sh train_diverged.json
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:cgemm-train> --backend cpu --lr 1e30 --steps 6 --report
          train_diverged.json)
set_tests_properties(mpi_train_diverged PROPERTIES LABELS mpi TIMEOUT 120 PROCESSORS 2
  ENVIRONMENT "${CGEMM_MPI_ENV}")
if(NOT CGEMM_HAVE_CUDA)
  cgemm_add_train_failure_test(cuda_without_gpu 2
    "cgemm-train: error: backend cuda: rank 0 on host .* sees no usable GPU" --backend cuda)
endif()
cgemm_add_train_failure_test(fsdp_weight_not_divisible 2
  "cgemm-train: error: the planner refuses the MLP block \\(batch 4, seq_len 16, hidden 32, ffn 65 on dp 1 x fsdp 2 x tp 1\\): GEMM 'up_proj forward' rhs \\(None, 'fsdp'\\): dim 1 of size 65 does not divide into fsdp=2 shards; cgemm does not pad FSDP shards"
  --fsdp 2 --ffn 65)
cgemm_add_train_failure_test(fsdp_batch_not_divisible 4
  "cgemm-train: error: --batch 6 is not divisible by --dp 2 x --fsdp 2" --dp 2 --fsdp 2 --batch 6)
cgemm_add_train_failure_test(fsdp_mesh_not_the_world 3
  "cgemm-train: error: --dp 1 x --fsdp 2 does not divide the world size 3" --fsdp 2)
cgemm_add_train_failure_test(unknown_optimizer 2
  "cgemm-train: error: --optimizer lbfgs: unknown value 'lbfgs' \\(known: sgd, adam\\)"
  --optimizer lbfgs)
cgemm_add_train_failure_test(bad_lr 2 "cgemm-train: error: --lr -1: must be a positive finite number"
  --lr -1)
cgemm_add_train_failure_test(bad_dtype 2
  "cgemm-train: error: --dtype fp16: unknown value 'fp16'" --dtype fp16)

# cgemm-train's model on 1 rank: its gradients against finite differences of its loss, and the
# first SGD and Adam updates (the meshes are held to this by check_train.sh's loss curves).
add_executable(test_train_model ${CMAKE_CURRENT_LIST_DIR}/test_train_model.cpp)
target_link_libraries(test_train_model PRIVATE cgemm_launcher_train GTest::gtest cgemm_warnings)
add_test(NAME mpi_train_model
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 1 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:test_train_model>)
set_tests_properties(mpi_train_model PROPERTIES LABELS mpi TIMEOUT 120 PROCESSORS 1
  ENVIRONMENT "${CGEMM_MPI_ENV}")
# TrainOps (GELU, its gradient, the loss, SGD and Adam) against fp64 on the CPU backend and,
# where there is a GPU, the CUDA backend (those cases skip without one).
add_executable(test_train_ops ${CMAKE_CURRENT_LIST_DIR}/test_train_ops.cpp)
target_link_libraries(test_train_ops PRIVATE cgemm GTest::gtest cgemm_warnings)
add_test(NAME mpi_train_ops
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 1 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:test_train_ops>)
set_tests_properties(mpi_train_ops PROPERTIES LABELS "mpi;gpu" TIMEOUT 120 PROCESSORS 1
  ENVIRONMENT "${CGEMM_MPI_ENV}")
# gemm.py's reorder rule, which the planner also enforces (in its own words), named by option.
cgemm_add_train_failure_test(local_batch_by_dp_2 4
  "cgemm-train: error: --batch 6 on --dp 2: each data-parallel rank's 3 sequences must be 1 or a multiple of dp 2"
  --dp 2 --batch 6)

# The Python module (python/cgemm.py) over libcgemm.so's C API on the CPU backend: numpy
# buffers, each GEMM against a float64 numpy reference on fresh inputs (a new seed per run,
# printed), poisoned outputs; the C API's errors as cgemm.Error. Passes on every rank's exit
# status. Debian's python3-numpy (scripts/install-deps.sh) is /usr/bin/python3's, which is
# looked for first.
find_program(CGEMM_NUMPY_PYTHON NAMES python3 HINTS /usr/bin
  DOC "a Python 3 with numpy, for the Python module's test")
foreach(mesh "tp2;2;1" "dp2tp2;4;2")
  list(GET mesh 0 mname)
  list(GET mesh 1 np)
  list(GET mesh 2 dp)
  add_test(NAME mpi_python_capi_${mname}
    COMMAND sh -c "exec \"$@\" --seed $(date +%s)" sh
            env CGEMM_LIBRARY=$<TARGET_FILE:cgemm_capi>
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            ${CGEMM_NUMPY_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_python_capi.py --dp ${dp})
  set_tests_properties(mpi_python_capi_${mname} PROPERTIES LABELS mpi TIMEOUT 120
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()

# Pre-quantized operands through the C API and the Python module (issue 42 item 1): the
# dequantized product, the gathered FP8 codes, the scale_inv rules and the refusals.
foreach(mesh "np1;1;1" "tp2;2;1" "dp2tp2;4;2")
  list(GET mesh 0 mname)
  list(GET mesh 1 np)
  list(GET mesh 2 dp)
  add_test(NAME mpi_python_prequantized_${mname}
    COMMAND sh -c "exec \"$@\" --seed $(date +%s)" sh
            env CGEMM_LIBRARY=$<TARGET_FILE:cgemm_capi>
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            ${CGEMM_NUMPY_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_python_prequantized.py --dp ${dp})
  set_tests_properties(mpi_python_prequantized_${mname} PROPERTIES LABELS mpi TIMEOUT 120
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "PASS")
endforeach()

# cgemm.QuantizedTensor (cgemm_quantized_tensor_*): its codes, scale_inv and delayed history,
# its codes into pre-quantized plans (the bytes of the plan that quantizes), the refusals.
foreach(mesh "np1;1;1" "tp2;2;1" "dp2tp2;4;2")
  list(GET mesh 0 mname)
  list(GET mesh 1 np)
  list(GET mesh 2 dp)
  add_test(NAME mpi_python_quantized_tensor_${mname}
    COMMAND sh -c "exec \"$@\" --seed $(date +%s)" sh
            env CGEMM_LIBRARY=$<TARGET_FILE:cgemm_capi>
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            ${CGEMM_NUMPY_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_python_quantized_tensor.py --dp ${dp})
  set_tests_properties(mpi_python_quantized_tensor_${mname} PROPERTIES LABELS mpi TIMEOUT 120
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "PASS")
endforeach()

# Context(fsdp=...) (python/cgemm.py over cgemm_context_options.fsdp) on the CPU backend: the
# weight's shard in, the GEMM on the whole weight out, against float64; fsdp 2, fsdp 2 x tp 2
# and dp 2 x fsdp 2; the refusals.
foreach(mesh "fsdp2;2;1;2" "fsdp2tp2;4;1;2" "dp2fsdp2;4;2;2")
  list(GET mesh 0 mname)
  list(GET mesh 1 np)
  list(GET mesh 2 dp)
  list(GET mesh 3 fsdp)
  add_test(NAME mpi_python_fsdp_${mname}
    COMMAND sh -c "exec \"$@\" --seed $(date +%s)" sh
            env CGEMM_LIBRARY=$<TARGET_FILE:cgemm_capi>
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            ${CGEMM_NUMPY_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_python_fsdp.py --dp ${dp}
            --fsdp ${fsdp})
  set_tests_properties(mpi_python_fsdp_${mname} PROPERTIES LABELS mpi TIMEOUT 120
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()

# Context.grouped_plan (python/cgemm.py over cgemm_grouped_plan_*) on the CPU backend: every
# form against a float64 numpy reference on fresh inputs (seed printed), poisoned outputs, each
# rank its own sizes; the errors as cgemm.Error, ValueError.
add_test(NAME mpi_python_grouped_np2
  COMMAND sh -c "exec \"$@\" --seed $(date +%s)" sh
          env CGEMM_LIBRARY=$<TARGET_FILE:cgemm_capi>
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          ${CGEMM_NUMPY_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_python_grouped.py)
set_tests_properties(mpi_python_grouped_np2 PROPERTIES LABELS mpi TIMEOUT 120 PROCESSORS 2
  ENVIRONMENT "${CGEMM_MPI_ENV}")

# GemmPlan's caller stream on the CPU backend (ignored: the same bits on every path) and a
# borrowed NCCL communicator refused there (tests/mpi/test_caller_stream_cpu.cpp).
add_executable(test_caller_stream_cpu ${CMAKE_CURRENT_LIST_DIR}/test_caller_stream_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/mpi_gtest_main.cpp)
target_link_libraries(test_caller_stream_cpu PRIVATE cgemm GTest::gtest cgemm_warnings)
foreach(np 1 2)
  add_test(NAME mpi_caller_stream_cpu_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_caller_stream_cpu>)
  set_tests_properties(mpi_caller_stream_cpu_np${np} PROPERTIES LABELS mpi TIMEOUT 60
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()

# A plan's workspaces are made when it is made; a rank that cannot allocate them fails the plan
# on every rank (tests/mpi/test_plan_allocation.cpp).
add_executable(test_plan_allocation ${CMAKE_CURRENT_LIST_DIR}/test_plan_allocation.cpp
  ${CMAKE_CURRENT_LIST_DIR}/mpi_gtest_main.cpp)
target_link_libraries(test_plan_allocation PRIVATE cgemm GTest::gtest cgemm_warnings)
add_test(NAME mpi_plan_allocation_np2
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:test_plan_allocation>)
set_tests_properties(mpi_plan_allocation_np2 PROPERTIES LABELS mpi TIMEOUT 60 PROCESSORS 2
  ENVIRONMENT "${CGEMM_MPI_ENV}")

# The C API's contract from C (tests/mpi/test_capi.c, linked to libcgemm.so): statuses,
# messages, the per-thread last error, the Fortran-handle constructor, the tensor queries, the
# context options (gpu_sharing) and the plan options (FP8 current and delayed scaling).
add_executable(test_capi ${CMAKE_CURRENT_LIST_DIR}/test_capi.c)
target_link_libraries(test_capi PRIVATE cgemm_capi Threads::Threads m)
set_target_properties(test_capi PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON)
target_compile_options(test_capi PRIVATE -Wall -Wextra -Werror)
foreach(np 1 2)
  add_test(NAME mpi_capi_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_capi>)
  set_tests_properties(mpi_capi_np${np} PROPERTIES LABELS mpi TIMEOUT 60 PROCESSORS ${np}
    ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()

# The C API's grouped plans from C (tests/mpi/test_capi_grouped.c, CPU backend): both forms and
# FP8 against float64 on fresh random inputs, poisoned outputs, each rank its own sizes (the
# family is local), and the refusals with their statuses and messages.
add_executable(test_capi_grouped ${CMAKE_CURRENT_LIST_DIR}/test_capi_grouped.c)
target_link_libraries(test_capi_grouped PRIVATE cgemm_capi m)
set_target_properties(test_capi_grouped PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON)
target_compile_options(test_capi_grouped PRIVATE -Wall -Wextra -Werror)
foreach(np 1 2)
  add_test(NAME mpi_capi_grouped_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_capi_grouped>)
  set_tests_properties(mpi_capi_grouped_np${np} PROPERTIES LABELS mpi TIMEOUT 60
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()

# The C API against a hostile caller (tests/mpi/test_capi_hostile.c): Fortran handles that name
# no communicator, stale and double-destroyed handles, ranks with different arguments, the
# timeout_s option, amax_history_len's bound and the plan's memory check, control bytes in
# messages, a bias_spec without a bias. Then a rank that skips a collective call: the others
# end the job at the context's timeout_s (2 s) with exit 4 and one line, never a hang.
add_executable(test_capi_hostile ${CMAKE_CURRENT_LIST_DIR}/test_capi_hostile.c)
target_link_libraries(test_capi_hostile PRIVATE cgemm_capi)
set_target_properties(test_capi_hostile PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON)
target_compile_options(test_capi_hostile PRIVATE -Wall -Wextra -Werror)
foreach(np 1 2)
  add_test(NAME mpi_capi_hostile_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_capi_hostile>)
  set_tests_properties(mpi_capi_hostile_np${np} PROPERTIES LABELS mpi TIMEOUT 60
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()
add_test(NAME mpi_capi_skipped_call
  COMMAND sh -c "start=$(date +%s); \"$@\" > out.txt 2>&1; rc=$?; took=$(( $(date +%s) - start )); cat out.txt; echo \"exit status $rc after $took s\"; [ $rc -eq 4 ] && [ $took -le 20 ] && grep -q \"timed out after 2[.0-9]* s waiting for the other ranks' arguments of the same call\" out.txt" sh
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:test_capi_hostile> --skip-plan 1)
set_tests_properties(mpi_capi_skipped_call PROPERTIES LABELS mpi TIMEOUT 60 PROCESSORS 2
  ENVIRONMENT "${CGEMM_MPI_ENV}")

# libcgemm.so exports the C API only: every defined dynamic symbol is cgemm_*, and the header's
# later additions (the caller's stream, the borrowed NCCL communicator, the context and plan
# options) are among them.
add_test(NAME capi_exports
  COMMAND sh -c "nm -D --defined-only \"$1\" | awk '{print $NF}' | grep -v '^cgemm_' && exit 1; for f in cgemm_plan_execute cgemm_plan_execute_on_stream cgemm_context_create_nccl cgemm_context_create_nccl_fortran cgemm_context_options_init cgemm_context_create_ex cgemm_context_create_ex_fortran cgemm_context_create_world_ex cgemm_plan_options_init cgemm_plan_create_ex cgemm_grouped_plan_create cgemm_grouped_plan_execute cgemm_grouped_plan_destroy cgemm_grouped_plan_tensor_info cgemm_grouped_plan_get_info cgemm_grouped_plan_desc_init; do nm -D --defined-only \"$1\" | grep -q \" T $f\$\" || { echo \"missing: $f\"; exit 1; }; done" sh $<TARGET_FILE:cgemm_capi>)
set_tests_properties(capi_exports PROPERTIES LABELS unit)

# A torchrun-style launch (RANK / WORLD_SIZE / LOCAL_RANK set, no MPI launcher: each process an
# MPI world of 1) stops with one message saying to use mpirun or srun, in cgemm-run and in the
# Python module's Context (the C API); the same run without those variables passes.
add_test(NAME mpi_torchrun_env_refused
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_torchrun_env.sh $<TARGET_FILE:cgemm-run>
          ${CGEMM_NUMPY_PYTHON} ${PROJECT_SOURCE_DIR}/python $<TARGET_FILE:cgemm_capi>)
set_tests_properties(mpi_torchrun_env_refused PROPERTIES LABELS mpi TIMEOUT 120 PROCESSORS 2
  ENVIRONMENT "${CGEMM_MPI_ENV}")

# `cmake --install` puts the Python modules under the prefix, where `import cgemm` finds the
# installed library with only PYTHONPATH set (tests/unit/check_install_python.sh).
add_test(NAME install_python_modules
  COMMAND ${PROJECT_SOURCE_DIR}/tests/unit/check_install_python.sh ${CMAKE_BINARY_DIR}
          ${CGEMM_NUMPY_PYTHON})
set_tests_properties(install_python_modules PROPERTIES LABELS mpi TIMEOUT 120)

# CUDA graphs on the CPU backend's emulation: replays against eager calls, byte for byte, in
# every order; the refusals, before anything is recorded (tests/mpi/test_capture.cpp; the same
# program runs on the GPU machine with CGEMM_TEST_BACKEND=cuda, tests/gpu/gpu_tests.cmake).
add_executable(test_capture ${CMAKE_CURRENT_LIST_DIR}/test_capture.cpp
  ${CMAKE_CURRENT_LIST_DIR}/mpi_gtest_main.cpp)
target_link_libraries(test_capture PRIVATE cgemm GTest::gtest cgemm_warnings)
foreach(np 1 2 3 4)
  add_test(NAME mpi_capture_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_capture>)
  set_tests_properties(mpi_capture_np${np} PROPERTIES LABELS mpi TIMEOUT 300
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()
