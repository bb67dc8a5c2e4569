#pragma once
// The local GEMM of one rank, flattened: what the collective GEMMs (runtime/src/kinds/)
// build their programs from. Filled by GemmPlan from the planner's shard shapes and the mesh;
// each collective GEMM then adds its chunk geometry (chunk_rows, strided placement).

#include <cstdint>
#include <string>
#include <vector>

#include "cgemm/core/collective_op.hpp"
#include "cgemm/core/dtype.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/shape.hpp"
#include "cgemm/gemm/gemm_task.hpp"
#include "cgemm/runtime/operands.hpp"
#include "program/program.hpp"

namespace cgemm {

/// A tensor that travels the all-gather ring whole beside every lhs chunk (FP8: the chunk's
/// scale_inv), so the kind files move it without knowing what it is.
struct SideBand {
  std::string name;  // for transfer labels, e.g. "lhs scale_inv"
  Ref source;        // this rank's copy
  size_t bytes = 0;  // per rank
  // The chunk's lhs block scales (MXFP8): the GEMM of a chunk reads its copy, at the lhs
  // offset / block size (one scale byte per `block` lhs bytes, laid out as the lhs rows).
  bool lhs_block_scale = false;
  int block = 0;
};

/// FSDP's weight gradient (kinds/fsdp_reduce_scatter_gemm.cpp): how its output, reduced over
/// the fsdp group, is scattered over it.
enum class FsdpScatter {
  kNone,     // not at all (every other GEMM)
  kRows,     // by its rows: block j is rows [j M/f, (j+1) M/f)
  kColumns,  // by its columns: block j is columns [j N/f, (j+1) N/f)
};

struct GemmGeometry {
  std::string name;  // the GemmDesc's, for labels and errors
  CollectiveOp collective = CollectiveOp::kNone;
  // Mesh: this rank is `me` of the TP group of `tp`; `dp` data-parallel groups.
  int tp = 1, me = 0, dp = 1;
  int fsdp = 1, fsdp_rank = 0;  // the fsdp group and this rank's place in it
  FsdpScatter fsdp_scatter = FsdpScatter::kNone;
  bool fsdp_scatter_dp_sum =
      false;               // the planner reduces over (dp, fsdp): all-reduce over dp after
  int num_streams = 1;     // compute streams a collective GEMM may use
  bool aggregate = false;  // all-gather both ways round the ring
  int pieces = 1;          // chunks_per_rank: each ring chunk moves and multiplies in pieces

  DType in = DType::kBFloat16, out = DType::kBFloat16;
  // The local GEMM flattened (gemm_layout.hpp): k the product of the contracting dims, n of
  // the rhs's other dims (the output's columns), lhs_rows (M) of the lhs's other dims.
  int64_t k = 0, n = 0;
  int64_t lhs_rows = 0;         // M: the lhs's rows, or its columns when transposed
  bool lhs_transposed = false;  // lhs stored [K, M] (contracting its leading dims)
  bool rhs_transposed = false;  // rhs stored [N, K]
  int64_t ldb = 0;
  bool has_bias = false;
  bool fuse_bias = false;  // bias in the GEMM epilogue (no reduce axis), as gemm.py's fuse_bias

  Shape lhs_local, out_local;  // shard shapes, for the reorders
  bool need_reorder = false;   // gemm.py's need_reorder: batch-first activations
  int sequence_dim = -1;       // the planner's sequence dim of the output; -1: none
  std::string reduce_axis;     // the planner's reduce axis of the output as a spec; "": none
  // The groups the plain and the all-gather GEMM's all-reduce runs over for that axis, in
  // order: {tp} for the tensor-parallel axis, {dp} for the data-parallel one, {fsdp} for the
  // fsdp axis, {fsdp, dp} for ('dp', 'fsdp') (FSDP's bias gradients); empty where the runtime
  // runs no such reduction (make_plain_gemm and make_all_gather_gemm refuse it).
  std::vector<Group> reduce_groups;
  // The all-reduce over them sums float32 partials, then casts (NVTE_JAX_ALL_REDUCE_IN_FP32,
  // core/env.hpp; the default); false: in the output dtype.
  bool reduce_in_fp32 = true;
  std::vector<SideBand> lhs_side_band;  // travels with each lhs chunk

  // Where the GEMMs read their operands: the caller's, or (quantized GEMMs) the plan's
  // quantized copies; and the scales a quantized GEMM applies
  // (runtime/src/quantization/quantization.hpp).
  Ref lhs_src{Operand::kLhs}, rhs_src{Operand::kRhs};
  std::optional<DType> rhs_in;  // the rhs's dtype where it differs from `in` (FP8 pairs)
  GemmScales scales;            // lhs_block / rhs_block: of the whole local operand
  int lhs_block = 0;            // lhs bytes per block scale (MXFP8, NVFP4); 0: none
  BlockScaling block_scaling = BlockScaling::kTensor;
  bool fast_accumulation = true;

  // Chunk geometry, set by the collective GEMM. A chunk is one ring step's rows: chunk_rows
  // contiguous rows, or (strided, batch-first with local batch > 1) `batch` blocks of
  // seq_rows rows, seq_total rows apart in the full sequence.
  int64_t chunk_rows = 0;
  bool strided = false;
  int64_t batch = 1, seq_rows = 0, seq_total = 0;

  size_t in_size() const { return dtype_size(in); }
  size_t out_size() const { return dtype_size(out); }
  // Byte counts in checked 64-bit arithmetic (throw cgemm::Error naming the GEMM on overflow).
  size_t bytes(int64_t rows, int64_t cols, size_t esize, const char* what) const {
    const std::string where = "GEMM '" + name + "' " + what;
    return static_cast<size_t>(checked_bytes(checked_mul(rows, cols, where), esize, where));
  }
  size_t lhs_bytes() const { return bytes(lhs_rows, k, in_size(), "lhs"); }
  size_t chunk_lhs_bytes() const { return bytes(chunk_rows, k, in_size(), "lhs chunk"); }
  size_t chunk_out_bytes() const { return bytes(chunk_rows, n, out_size(), "output chunk"); }
  /// count x bytes, checked.
  size_t times(size_t bytes_each, int64_t count, const char* what) const {
    return static_cast<size_t>(
        checked_mul(static_cast<int64_t>(bytes_each), count, "GEMM '" + name + "' " + what));
  }

  /// The local GEMM's dtypes, k, n and dense leading dimensions; rows and pointers unset.
  GemmTask task() const {
    GemmTask t;
    t.in_dtype = in;
    t.out_dtype = out;
    t.k = k;
    t.n = n;
    // A transposed lhs [K, M]: a chunk of its rows is a column block of the whole local lhs
    // (the reduce-scatter's partials, FSDP's blocks), read with M as the leading dimension.
    t.lda = lhs_transposed ? lhs_rows : k;
    t.lhs_transposed = lhs_transposed;
    t.ldb = ldb;
    t.rhs_transposed = rhs_transposed;
    t.ldc = n;
    t.rhs_dtype = rhs_in;
    t.fast_accumulation = fast_accumulation;
    t.block_scaling = block_scaling;
    return t;
  }

  /// A GEMM of this geometry reading lhs at `lhs` (the lhs rows `lhs_offset` bytes into the
  /// local lhs, for its block scales) and the rhs at rhs_src, with the geometry's scales.
  /// `lhs_scales` overrides where the lhs block scales are (a chunk that came over the ring).
  GemmOp gemm(GemmTask t, Ref lhs, Ref out, std::optional<Ref> bias, int stream, std::string label,
              size_t lhs_offset = 0, std::optional<Ref> lhs_scales = std::nullopt) const {
    GemmScales sc = scales;
    if (lhs_block > 0) {
      const Ref base = lhs_scales ? *lhs_scales : *scales.lhs_block;
      sc.lhs_block = base.plus(lhs_offset / static_cast<size_t>(lhs_block));
    }
    return GemmOp{t, lhs, rhs_src, out, std::move(bias), stream, std::move(label), sc};
  }
  // Pieces (chunks_per_rank): a chunk splits into `pieces` parts that are contiguous where the
  // chunk lies in a ring or send slot: rows of the chunk, or (strided) whole batch blocks, so
  // each piece is one transfer and one GEMM (split_into_pieces checks that they divide).
  size_t piece_lhs_bytes() const { return chunk_lhs_bytes() / static_cast<size_t>(pieces); }
  size_t piece_out_bytes() const { return chunk_out_bytes() / static_cast<size_t>(pieces); }
  /// Elements from one piece to the next along `cols`-wide rows: in a slot (one chunk, packed)
  /// or in the whole local tensor (strided chunks' batch blocks lie seq_total rows apart).
  int64_t piece_step(bool in_slot, int64_t cols) const {
    if (strided) return batch / pieces * (in_slot ? seq_rows : seq_total) * cols;
    return chunk_rows / pieces * cols;
  }
  /// FLOP of one piece's GEMM (the overlap = auto rule's measure).
  double piece_flop() const {
    return 2.0 * static_cast<double>(chunk_rows / pieces) * static_cast<double>(n) *
           static_cast<double>(k);
  }
  /// The GEMM of one piece: chunk_task with 1/pieces of its rows or batch blocks.
  GemmTask piece_task(int64_t lhs_stride, int64_t out_stride) const {
    GemmTask t = chunk_task(lhs_stride, out_stride);
    if (strided) {
      t.batch = batch / pieces;
    } else {
      t.m = chunk_rows / pieces;
    }
    return t;
  }

  /// The GEMM of one chunk: chunk_rows rows, or `batch` blocks of seq_rows rows whose lhs and
  /// out blocks lie lhs_stride / out_stride elements apart when strided.
  GemmTask chunk_task(int64_t lhs_stride, int64_t out_stride) const {
    GemmTask t = task();
    if (strided) {
      t.batch = batch;
      t.m = seq_rows;
      t.lhs_batch_stride = lhs_stride;
      t.out_batch_stride = out_stride;
    } else {
      t.m = chunk_rows;
    }
    return t;
  }
};

}  // namespace cgemm
