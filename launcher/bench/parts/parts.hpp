#pragma once
// cgemm-bench --parts: the parts of an overlapped schedule measured one at a time on one
// GPU, so the 2-GPU sweep can be read against them (docs/PERFORMANCE.md):
//   chunking        the chunk GEMMs of a schedule, back to back, against one whole GEMM of
//                   the same local problem (and, from bench/peers/torch_chunking.py, the same
//                   two with torch.mm: the floor any chunked schedule starts from); with
//                   --scaling delayed or current, the FP8 GEMMs the runtime runs on the
//                   quantized operands (against torch._scaled_mm's, bench/peers/
//                   torch_scaled_mm.py)
//   interference    a chunk GEMM alone against the same GEMM while a copy of the bytes one
//                   ring step moves runs on another stream (on one GPU both share HBM: a
//                   worst case, not a measure of NVLink)
//   copy_bandwidth  cudaMemcpyAsync device to device (the copy-engine transport's call)
//                   against transfer size
//   quantize        the per-tensor FP8 kernels of a quantized GEMM (amax, quantize,
//                   quantize-transpose, current scaling whole) against a copy of the same bytes
//   grouped         the grouped GEMM of a mixture-of-experts layer (issue 25): GroupedGemmPlan's
//                   loop of cuBLASLt GEMMs against its cublasGemmGroupedBatchedEx path and one
//                   dense GEMM of every row, on the five cases of its own (grouped.cpp;
//                   bench/peers/torch_grouped_mm.py times torch on the same sizes)
//   grouped_fp8     the same cases in FP8 (e4m3, a scale_inv per group): the loop and the
//                   cuBLASLt tiles against the bf16 tiles (grouped_fp8.cpp)
// Shapes are cgemm-bench's cases (bench_config.hpp), bf16 operands, one rank's local GEMM at
// a given tp; the chunk GEMMs are those of the programs the runtime plans for that rank
// (plan_gemm's ProgramView), chunks_per_rank pieces and quantization included, so --parts
// times what execute() runs.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_config.hpp"
#include "cgemm/core/collective_op.hpp"
#include "cgemm/gemm/gemm_task.hpp"
#include "cgemm/runtime/backend.hpp"
#include "cgemm/runtime/plan_description.hpp"
#include "common/table.hpp"

namespace cgemm::launcher::parts {

/// One GEMM of a chunked schedule: `task` with null pointers; its lhs starts lhs_offset
/// elements into the lhs buffer and its out out_offset elements into the out buffer.
struct ChunkGemm {
  GemmTask task;
  int64_t lhs_offset = 0, out_offset = 0;
};

/// One rank's local GEMM of a case at `tp` and its chunks. Buffers (elements): lhs lhs_elems,
/// rhs [k, n], out out_elems, in the tasks' dtypes: bf16, or (quantized, `whole.quantized()`)
/// lhs in whole.in_dtype, rhs [n, k] in whole.rhs_type() (the runtime's quantized copies) and
/// out bf16. Offsets below are elements of those dtypes.
///  all-gather:     lhs = the gathered activations, tp slots of [batch, seq/tp, k] (the ring);
///                  out [batch, seq, n]; whole = [batch*seq, k] @ [k, n] (the sequential
///                  path's GEMM). Chunk (r, j) = piece j of rank r's slot, written to its
///                  rows of every batch block.
///  reduce-scatter: lhs [batch, seq, k]; out = tp partials [batch, seq/tp, n] (the send
///                  slots); whole = [batch*seq, k] @ [k, n]. Chunk (d, j) = piece j of the
///                  rows destination d owns, in every batch block.
/// With batch > 1 a chunk is one strided batched GEMM (batch blocks), as the runtime's.
struct ChunkedGemm {
  GemmTask whole;
  std::vector<ChunkGemm> chunks;  // tp * chunks_per_rank, in schedule order of rank 0
  int64_t lhs_elems = 0, rhs_elems = 0, out_elems = 0;
  int64_t step_lhs_elems = 0;  // all-gather: one rank's slot (what a ring step moves)
  int64_t step_out_elems = 0;  // reduce-scatter: one destination's partial
};

/// Read from plan_gemm's programs for TP rank 0, of the bf16 GEMM quantized as `q` says (mode
/// kNoScaling: bf16; delayed or current: per-tensor FP8, the GEMM tasks the runtime builds for
/// it, runtime/src/quantization/quantization.cpp). Throws cgemm::Error naming the case with the
/// planner's reason when the case does not split (pieces that do not divide, a sequence or hidden
/// size that tp does not divide) or the planner refuses the quantization; block scaling (mxfp8,
/// nvfp4) is refused, as its block scales have no buffers here.
ChunkedGemm chunked_gemm(const BenchShape& shape, CollectiveOp op, int tp, int chunks_per_rank,
                         const QuantizationDesc& q = {});

/// Why chunked_gemm would refuse these ("": it accepts them), and whether it accepts them.
std::string why_not_split(const BenchShape& shape, CollectiveOp op, int tp, int chunks_per_rank,
                          const QuantizationDesc& q = {});
bool splits(const BenchShape& shape, CollectiveOp op, int tp, int chunks_per_rank,
            const QuantizationDesc& q = {});

/// The chunking table's dtype column for GEMMs quantized as `q`: "bf16", or the FP8 formats
/// "e4m3 x e4m3" (lhs x rhs).
std::string chunk_dtype(const QuantizationDesc& q);

struct Settings {
  int warmup = 5;
  int iterations = 20;
  size_t l2_bytes = 60u << 20;  // inputs rotate over enough copies to exceed twice this
  std::vector<int> tps{2, 4, 8};
  std::vector<int> chunks_per_rank{1, 4};
  int64_t max_copy_mib = 512;     // copy_bandwidth: 1, 2, 4, ... MiB up to this
  QuantizationDesc quantization;  // chunking: kNoScaling times bf16, else per-tensor FP8
  int64_t grouped_divide = 1;     // grouped: tokens, K and N divided by this
};

/// torch's times on the same chunks, by key(case, collective, tp, chunks), of one dtype:
/// torch.mm on bf16 (bench/peers/torch_chunking.py) or torch._scaled_mm on e4m3
/// (bench/peers/torch_scaled_mm.py).
struct TorchChunks {
  double whole_ms = 0, chunks_ms = 0;
};
struct TorchChunkTable {
  std::string dtype = "bf16";     // chunk_dtype()'s name of what the file timed
  std::string peer = "torch.mm";  // the call, for the table's titles
  std::map<std::string, TorchChunks> rows;
};
std::string torch_key(const std::string& shape, const std::string& collective, int tp, int chunks);
/// Reads either script's CSV, columns by header name: case, collective, tp, chunks, then
/// whole_ms and chunks_ms (torch_chunking.py: bf16), or, where the header has fp8_chunks_ms,
/// fp8_ms and fp8_chunks_ms (torch_scaled_mm.py: e4m3 x e4m3, use_fast_accum off in both).
/// Throws cgemm::Error naming the file and the missing column.
TorchChunkTable read_torch_chunks(const std::string& path);

/// One operand's per-tensor scale state (ScaleStateLayout, `history` amaxes) and an amax slot
/// after it, in backend memory: scale and scale_inv 1, as a fresh plan's.
class ScaleBuffers {
 public:
  explicit ScaleBuffers(Backend& be, int history = 0);
  ~ScaleBuffers();
  ScaleBuffers(const ScaleBuffers&) = delete;
  ScaleBuffers& operator=(const ScaleBuffers&) = delete;
  float* state() const { return state_; }
  float* amax() const { return amax_; }
  const float* scale_inv() const { return state_ + ScaleStateLayout::kScaleInv; }

 private:
  Backend& be_;
  float* state_ = nullptr;
  float* amax_ = nullptr;
};

/// A ChunkedGemm's buffers on a backend, filled with normal values: enough lhs copies that
/// one pass over them exceeds twice the L2, so no run finds its inputs cached. A quantized
/// ChunkedGemm's operands are made as the runtime makes them, once, before any timing: each
/// bf16 lhs copy and the bf16 rhs [k, n] go through Backend::amax, Backend::update_scale (the
/// rule of `q`: the scale from this amax) and Backend::quantize (the rhs transposed into
/// [n, k]), each with its own scale state, whose scale_inv bind() hands the GEMM.
class Operands {
 public:
  Operands(Backend& be, const ChunkedGemm& g, size_t l2_bytes, const QuantizationDesc& q = {});
  ~Operands();
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;
  /// One lhs copy and its scale_inv (null: bf16).
  struct Lhs {
    const char* data = nullptr;
    const float* scale_inv = nullptr;
  };
  /// The next lhs copy, in turn.
  Lhs next_lhs();
  /// `t` with its pointers set: lhs at lhs_offset elements into `lhs`, out at out_offset, and
  /// (quantized) both scale_inv.
  GemmTask bind(const GemmTask& t, const Lhs& lhs, int64_t lhs_offset, int64_t out_offset) const;
  size_t sets() const { return lhs_.size(); }

 private:
  void quantize(const QuantizationDesc& q, DType format, const void* src, int64_t rows,
                int64_t cols, bool transpose, void* dst, ScaleBuffers& scale);
  void release_all() noexcept;
  Backend& be_;
  size_t lhs_size_ = 2, out_size_ = 2;  // bytes per element
  std::vector<void*> lhs_;
  std::vector<std::unique_ptr<ScaleBuffers>> lhs_scales_;  // quantized: one per lhs copy
  std::unique_ptr<ScaleBuffers> rhs_scale_;
  void* rhs_ = nullptr;
  void* out_ = nullptr;
  size_t turn_ = 0;
};

/// Rotating source/destination pairs for copies of `bytes`: enough that one pass exceeds
/// twice the L2.
class CopyBuffers {
 public:
  CopyBuffers(Backend& be, size_t bytes, size_t l2_bytes);
  ~CopyBuffers();
  CopyBuffers(const CopyBuffers&) = delete;
  CopyBuffers& operator=(const CopyBuffers&) = delete;
  /// The next (destination, source) pair, in turn.
  std::pair<void*, void*> next();
  size_t sets() const { return src_.size(); }

 private:
  void release_all() noexcept;
  Backend& be_;
  std::vector<void*> src_, dst_;
  size_t turn_ = 0;
};

/// "[batch x] m x n x k" of a GEMM.
std::string gemm_text(const GemmTask& t);

/// Medians of `fns` timed in interleaved rounds (one run of each per round, so drifts hit all
/// alike), after `warmup` untimed rounds; Backend::time_ms per run.
std::vector<double> interleaved_medians(Backend& be, const std::vector<std::function<void()>>& fns,
                                        int warmup, int iterations);

/// The studies: each prints a progress line per row and returns its table.
Table chunking(Backend& be, const std::vector<BenchShape>& shapes, const Settings& s,
               const TorchChunkTable& torch);
Table interference(Backend& be, const std::vector<BenchShape>& shapes, const Settings& s);
Table copy_bandwidth(Backend& be, const Settings& s);
/// 1 MiB up to max_copy_mib of bf16, as copy_bandwidth's sizes.
Table quantize_bandwidth(Backend& be, const Settings& s);
/// Issue 25's MoE cases (tokens, K, N divided by s.grouped_divide), grouped.cpp.
Table grouped(Backend& be, const Settings& s);
/// The same cases in FP8 on the loop and the tiles, against the bf16 tiles (grouped_fp8.cpp).
Table grouped_fp8(Backend& be, const Settings& s);

/// "chunking", "interference", "copy_bandwidth", "quantize", "grouped", "grouped_fp8": the
/// names --parts takes, in run order ("all" is every one but the grouped two).
const std::vector<std::string>& study_names();

/// cgemm-bench --parts: checks the job (one rank) and the outputs, runs cfg.parts in order on
/// one rank's backend, writes cgemm_parts.md (headed by `when` and `command`) and
/// cgemm_parts_STUDY.csv to cfg.out. Returns the exit status (kExitUsage on bad input).
int run_parts(const BenchConfig& cfg, const std::string& command, const std::string& when);

}  // namespace cgemm::launcher::parts
