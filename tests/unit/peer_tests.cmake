# The PyTorch peers (bench/peers/) in their dry runs, which need no torch: the problems they
# would time. torch_scaled_mm.py takes its cases from torch_chunking.py; both list the sweep.
set(CGEMM_PEERS ${PROJECT_SOURCE_DIR}/bench/peers)
add_test(NAME peer_torch_scaled_mm_dry_run
  COMMAND ${Python3_EXECUTABLE} ${CGEMM_PEERS}/torch_scaled_mm.py --dry-run --tp 1,8)
set_tests_properties(peer_torch_scaled_mm_dry_run PROPERTIES LABELS unit
  PASS_REGULAR_EXPRESSION "standard   all_gather     tp 1: 32768 x 8192 x 4096 .*fp8 chunks: 1 x 32768 rows, 4 x 8192 rows.*small      reduce_scatter tp 8: 2048 x 4096 x 512 ")
add_test(NAME peer_torch_chunking_dry_run
  COMMAND ${Python3_EXECUTABLE} ${CGEMM_PEERS}/torch_chunking.py --dry-run --tp 2)
set_tests_properties(peer_torch_chunking_dry_run PROPERTIES LABELS unit
  PASS_REGULAR_EXPRESSION "standard   all_gather     tp 2: 32768 x 4096 x 4096; chunks: ")
add_test(NAME peer_torch_grouped_mm_dry_run
  COMMAND ${Python3_EXECUTABLE} ${CGEMM_PEERS}/torch_grouped_mm.py --dry-run)
set_tests_properties(peer_torch_grouped_mm_dry_run PROPERTIES LABELS unit
  PASS_REGULAR_EXPRESSION "32768x8x4096x14336 uniform: sizes 4096,4096,4096,4096,4096,4096,4096,4096.*65536x64x4096x2048 skewed, 8 empty: sizes 14201,7101,")
