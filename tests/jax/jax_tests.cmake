# The JAX plugin (plugins/jax/, python/cgemm_jax.py) under mpirun on JAX's cpu platform and
# cgemm's CPU backend, with the Python that built it (CGEMM_JAX_PYTHON: scripts/test.sh's virtual
# environment, which holds the pinned jax of python/requirements-test.txt). Every collective x
# bias x dtype x layout against numpy in float64, jax.grad of a TP MLP against the plain-jnp
# model's, the grouped GEMM and its grad, jit + grad + vmap, and the errors; a fresh seed per run.
# Not built (no target cgemm_jax): these tests do not exist, and configure says why.
if(NOT TARGET cgemm_jax)
  return()
endif()
foreach(np 1 2 3 4)
  add_test(NAME mpi_jax_plugin_np${np}
    COMMAND sh -c "exec \"$@\" $(date +%s)" sh
            env CGEMM_LIBRARY=$<TARGET_FILE:cgemm_capi> CGEMM_JAX_LIBRARY=$<TARGET_FILE:cgemm_jax>
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            ${CGEMM_JAX_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_jax_plugin.py)
  set_tests_properties(mpi_jax_plugin_np${np} PROPERTIES LABELS mpi TIMEOUT 180
    PROCESSORS ${np} ENVIRONMENT "${CGEMM_MPI_ENV};JAX_PLATFORMS=cpu")
endforeach()
# The example trains the TP MLP block for a few steps and checks its loss against pure JAX.
add_test(NAME mpi_jax_mlp_example_np2
  COMMAND env CGEMM_LIBRARY=$<TARGET_FILE:cgemm_capi> CGEMM_JAX_LIBRARY=$<TARGET_FILE:cgemm_jax>
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
          ${CGEMM_JAX_PYTHON} ${PROJECT_SOURCE_DIR}/examples/jax_mlp.py --steps 10)
set_tests_properties(mpi_jax_mlp_example_np2 PROPERTIES LABELS mpi TIMEOUT 180 PROCESSORS 2
  ENVIRONMENT "${CGEMM_MPI_ENV};JAX_PLATFORMS=cpu")
