# PyTorch training through cgemm (python/cgemm_torch.py) under mpirun on CPU tensors and cgemm's
# CPU backend, with CGEMM_TORCH_PYTHON: a Python whose torch imports (scripts/test.sh passes its
# virtual environment's, which holds the pinned torch of python/requirements-test.txt). The
# autograd of the ops for every layer kind x dtype x bias x layout against float64, the modules
# (shards, state_dict, the block's grads, torch.compile), the refusals; the MLP block trained with
# AdamW against plain PyTorch. The GPU machine runs the same on CUDA tensors
# (scripts/device-torch.sh). Without such a Python these tests do not exist (configure says so).
set(CGEMM_TORCH_PYTHON "" CACHE STRING "Python with torch for the PyTorch tests (tests/torch)")
if(NOT CGEMM_TORCH_PYTHON)
  message(STATUS "cgemm: PyTorch tests not registered (set CGEMM_TORCH_PYTHON to a Python with torch)")
  return()
endif()
execute_process(COMMAND ${CGEMM_TORCH_PYTHON} -c "import torch, numpy; print(torch.__version__)"
  OUTPUT_VARIABLE torch_version RESULT_VARIABLE torch_found ERROR_QUIET
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT torch_found EQUAL 0)
  message(STATUS "cgemm: PyTorch tests not registered (${CGEMM_TORCH_PYTHON} cannot import torch and numpy)")
  return()
endif()
message(STATUS "cgemm: PyTorch tests with torch ${torch_version} (${CGEMM_TORCH_PYTHON})")
foreach(np 1 2 3)
  add_test(NAME mpi_torch_training_np${np}
    COMMAND sh -c "exec \"$@\" $(date +%s)" sh
            env CGEMM_LIBRARY=$<TARGET_FILE:cgemm_capi>
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            ${CGEMM_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_torch_training.py --device cpu)
  set_tests_properties(mpi_torch_training_np${np} PROPERTIES LABELS mpi TIMEOUT 180
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()
# FP8 training in the layers (scaling=, python/_cgemm_torch_fp8.py): each GEMM within FP8's
# bound of float64, the weight quantized once per step, 20 steps' loss against float32.
foreach(mesh "np1;1;1" "tp2;2;1" "tp3;3;1" "dp2tp2;4;2")
  list(GET mesh 0 mname)
  list(GET mesh 1 np)
  list(GET mesh 2 dp)
  add_test(NAME mpi_torch_fp8_${mname}
    COMMAND sh -c "exec \"$@\" $(date +%s)" sh
            env CGEMM_LIBRARY=$<TARGET_FILE:cgemm_capi>
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            ${CGEMM_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_torch_fp8.py --dp ${dp} --device cpu)
  set_tests_properties(mpi_torch_fp8_${mname} PROPERTIES LABELS mpi TIMEOUT 180
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}" PASS_REGULAR_EXPRESSION "PASS")
endforeach()
foreach(run "2;float32" "3;float32" "2;bfloat16")
  list(GET run 0 np)
  list(GET run 1 dtype)
  add_test(NAME mpi_torch_mlp_train_np${np}_${dtype}
    COMMAND env CGEMM_LIBRARY=$<TARGET_FILE:cgemm_capi>
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            ${CGEMM_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/examples/torch_mlp_train.py --device cpu
            --dtype ${dtype} --steps 50)
  set_tests_properties(mpi_torch_mlp_train_np${np}_${dtype} PROPERTIES LABELS mpi TIMEOUT 180
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV}")
endforeach()
