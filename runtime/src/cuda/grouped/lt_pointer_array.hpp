#pragma once
// One cuBLASLt matmul in pointer-array batch mode over a ragged-rows geometry: `count` entries
// of `rows` rows each, entry i computing D[i] = B[i] rows @ A[i] (+ beta C[i], C = D), with A,
// B and D arrays of device pointers in device memory. Shared by the two runners built on it:
// cublaslt_tiles.cpp (pointers computed on the host per call) and cublaslt_device_tiles.cpp
// (pointers computed on the device from device sizes). Private to the CUDA backend.
//
// Row-major to column-major as cublas_grouped.cpp: cuBLASLt's A is rhs[g] (m = N), its B the
// tile's lhs rows (n = rows), k = K, C = D the tile's out rows (ldc = N).

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "grouped/grouped_rows.hpp"

namespace cgemm::grouped {

/// A matmul description, its layouts and its algorithm (desc null: none made, or no algorithm).
struct PointerArrayMatmul {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

/// Throws cgemm::Error "WHERE: CALL failed: STATUS (text)" unless rc is CUBLAS_STATUS_SUCCESS.
void check_lt(cublasStatus_t rc, const std::string& where, const std::string& call);

/// Makes `m` for `count` entries of `rows` rows of `g`, with cuBLASLt's first heuristic answer
/// for a workspace of `workspace_bytes`. Every pointer is assumed 16-byte aligned only (the
/// runners check or guarantee that), and split-K never reduces in place (entries may share D
/// rows, or D holds a bias to add). False, with `m` empty, where the heuristic has no
/// algorithm; throws cgemm::Error (prefixed by `where`) for any other failure.
bool make_pointer_array_matmul(cublasLtHandle_t handle, const RaggedRowsGeometry& g, int64_t rows,
                               int count, size_t workspace_bytes, const std::string& where,
                               PointerArrayMatmul& m);

/// Gives back what make_pointer_array_matmul made; `m` is empty after.
void destroy(PointerArrayMatmul& m) noexcept;

}  // namespace cgemm::grouped
