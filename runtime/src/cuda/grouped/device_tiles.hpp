#pragma once
// The kernels of the device tiles runner (cublaslt_device_tiles.cpp): a ragged-rows call whose
// group sizes stay in device memory. Every pointer of its one pointer-array matmul is computed
// on the device from the sizes, so the call issues the same launches whatever the sizes and
// can be captured into a CUDA graph and replayed with sizes that change between replays.
// Private to the CUDA backend; compiled by nvcc too (C++17).
//
// The matmul has F + G entries of T rows (T a power of two, F = M / T, fixed at planning):
//   - entries [0, F): the whole T-row tiles of every group, in group order, straight from lhs
//     rows into out rows; the entries no group needs (at most G of them, all F with padded
//     sizes summing to less than T) compute a spare tile
//     from lhs rows [0, T) into the spare scratch tile (never read);
//   - entry F + g: group g's last r_g = size_g mod T rows, as the T-row window of lhs that
//     holds them and stays inside [0, M) (rows [min(p, M - T), + T) where p is their first
//     row), into scratch tile g; a copy kernel then moves those r_g rows to out. An entry with
//     r_g = 0 computes scratch tile g, unread.
// So a call computes (F + G) T rows whatever the sizes: at most M + G T, since F T <= M.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cgemm/core/dtype.hpp"

namespace cgemm::grouped {

/// What the plan kernel found wrong with a call's sizes. The device copy holds this call's
/// verdict (bad) and the count of bad calls so far (seq / 2). The host's mapped copy is
/// published as a sequence lock the host never writes: for the k-th bad call the device sets
/// seq to 2k - 1 (odd: being written), then the details, then 2k, each after a system fence;
/// the host reads seq, the details, seq again, and keeps them only when both reads are the
/// same even number.
struct DeviceSizesStatus {
  int32_t bad = 0;              // device copy: this call's sizes were bad
  int32_t negative_group = -1;  // the first group with a negative size, or -1
  int32_t negative_size = 0;
  uint32_t seq = 0;  // 2 x the calls with bad sizes since the plan was made (odd: writing)
  int64_t sum = 0;   // the sizes' sum (int64: G sizes of int32)
};

/// One call's device pointers and fixed geometry.
struct DeviceTilesCall {
  const int32_t* sizes = nullptr;  // G int32 in device memory
  int64_t groups = 0, m_total = 0, n = 0, k = 0;
  int64_t tile_rows = 0;      // T
  int64_t full_entries = 0;   // F = m_total / T
  int64_t elem_bytes = 0;     // 2 (bfloat16, float16) or 4 (float32)
  bool rhs_trans = false;     // rhs[g] is [N, K] (else [K, N]): its size is K N either way
  const void* lhs = nullptr;  // [M, K] row-major
  const void* rhs = nullptr;  // [G, K, N] or [G, N, K]
  void* out = nullptr;        // [M, N] row-major
  void* scratch = nullptr;    // G + 1 tiles of [T, N]: one per group, then the spare
  // The matmul's pointer arrays, F + G entries each (device memory), then the per-call state.
  const void** a = nullptr;
  const void** b = nullptr;
  void** d = nullptr;
  int64_t* row_ends = nullptr;               // G: cumulative row ends
  int32_t* full_before = nullptr;            // G: whole tiles of the groups before g
  DeviceSizesStatus* status = nullptr;       // device memory: this call's
  DeviceSizesStatus* host_status = nullptr;  // the host's mapped copy: written when bad
};

/// Reads the sizes, checks them (none negative, sum at most M: else status->bad, the bad-call count
/// advanced and published to host_status, and every entry the spare) and writes the pointer
/// arrays and row_ends.
cudaError_t launch_device_tiles_plan(const DeviceTilesCall& c, cudaStream_t stream);

/// Fills out with each row's group bias (grouped_bias.hpp) and every scratch tile g with
/// bias[g] in all T rows, before a matmul with beta = 1.
cudaError_t launch_device_tiles_bias(const DeviceTilesCall& c, const void* bias, DType dtype,
                                     cudaStream_t stream);

/// After the matmul: group g's last r_g rows from scratch tile g to out, and zeros to the rows
/// past the sizes' sum (padding). When the sizes were bad, fills all of out with NaN instead
/// (never a silent wrong answer).
cudaError_t launch_device_tiles_scatter(const DeviceTilesCall& c, DType dtype, cudaStream_t stream);

}  // namespace cgemm::grouped
