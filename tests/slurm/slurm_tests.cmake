# A real Slurm on this machine (slurmctld, two slurmd as nodes n1 and n2, munged), and
# cgemm-run on the CPU backend through sbatch + srun, sbatch + mpirun, srun, and the sweep
# job array of scripts/slurm with its merge step. Installs the Slurm packages through
# scripts/install-deps.sh --test when they are missing; skipped (77) only where Slurm's
# daemons cannot start. Not labelled mpi: scripts/test.sh runs it in a step of its own.
add_test(NAME slurm_two_nodes
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_slurm.sh $<TARGET_FILE:cgemm-run> ${CMAKE_SOURCE_DIR})
set_tests_properties(slurm_two_nodes PROPERTIES LABELS slurm TIMEOUT 300
  SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
