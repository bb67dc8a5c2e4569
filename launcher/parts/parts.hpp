#pragma once
// cgemm-bench --parts: the parts of an overlapped schedule measured one at a time on one
// GPU, so the 2-GPU sweep can be read against them (docs/PERFORMANCE.md):
//   chunking        the chunk GEMMs of a schedule, back to back, against one whole GEMM of
//                   the same local problem (and, from bench/peers/torch_chunking.py, the same
//                   two with torch.mm: the floor any chunked schedule starts from)
//   interference    a chunk GEMM alone against the same GEMM while a copy of the bytes one
//                   ring step moves runs on another stream (on one GPU both share HBM: a
//                   worst case, not a measure of NVLink)
//   copy_bandwidth  cudaMemcpyAsync device to device (the copy-engine transport's call)
//                   against transfer size
//   quantize        the per-tensor FP8 kernels of a quantized GEMM (amax, quantize,
//                   quantize-transpose, current scaling whole) against a copy of the same bytes
// Shapes are cgemm-bench's cases (bench_config.hpp), bf16, one rank's local GEMM at a given
// tp; the chunk GEMMs are those of the programs the runtime plans for that rank (plan_gemm's
// ProgramView), chunks_per_rank pieces included, so --parts times what execute() runs.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench_config.hpp"
#include "cgemm/core/collective_op.hpp"
#include "cgemm/gemm/gemm_task.hpp"
#include "cgemm/runtime/backend.hpp"
#include "table.hpp"

namespace cgemm::launcher::parts {

/// One GEMM of a chunked schedule: `task` with null pointers; its lhs starts lhs_offset
/// elements into the lhs buffer and its out out_offset elements into the out buffer.
struct ChunkGemm {
  GemmTask task;
  int64_t lhs_offset = 0, out_offset = 0;
};

/// One rank's local GEMM of a case at `tp` and its chunks. Buffers (elements, bf16):
/// lhs lhs_elems, rhs [k, n], out out_elems.
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

/// Read from plan_gemm's programs for TP rank 0. Throws cgemm::Error naming the case with the
/// planner's reason when the case does not split (pieces that do not divide, a sequence or
/// hidden size that tp does not divide).
ChunkedGemm chunked_gemm(const BenchShape& shape, CollectiveOp op, int tp, int chunks_per_rank);

/// Why chunked_gemm would refuse these ("": it accepts them), and whether it accepts them.
std::string why_not_split(const BenchShape& shape, CollectiveOp op, int tp, int chunks_per_rank);
bool splits(const BenchShape& shape, CollectiveOp op, int tp, int chunks_per_rank);

struct Settings {
  int warmup = 5;
  int iterations = 20;
  size_t l2_bytes = 60u << 20;  // inputs rotate over enough copies to exceed twice this
  std::vector<int> tps{2, 4, 8};
  std::vector<int> chunks_per_rank{1, 4};
  int64_t max_copy_mib = 512;  // copy_bandwidth: 1, 2, 4, ... MiB up to this
};

/// torch.mm times of bench/peers/torch_chunking.py, by key(case, collective, tp, chunks).
struct TorchChunks {
  double whole_ms = 0, chunks_ms = 0;
};
using TorchChunkTable = std::map<std::string, TorchChunks>;
std::string torch_key(const std::string& shape, const std::string& collective, int tp, int chunks);
/// Reads the CSV (columns by header name: case, collective, tp, chunks, whole_ms, chunks_ms).
/// Throws cgemm::Error naming the file and the missing column.
TorchChunkTable read_torch_chunks(const std::string& path);

/// A ChunkedGemm's buffers on a backend, filled with normal values: enough lhs copies that
/// one pass over them exceeds twice the L2, so no run finds its inputs cached.
class Operands {
 public:
  Operands(Backend& be, const ChunkedGemm& g, size_t l2_bytes);
  ~Operands();
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;
  /// The next lhs copy, in turn.
  const char* next_lhs();
  /// `t` with its pointers set: lhs at lhs_offset elements into `lhs`, out at out_offset.
  GemmTask bind(const GemmTask& t, const char* lhs, int64_t lhs_offset, int64_t out_offset) const;
  size_t sets() const { return lhs_.size(); }

 private:
  void release_all() noexcept;
  Backend& be_;
  std::vector<void*> lhs_;
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

/// "chunking", "interference", "copy_bandwidth", "quantize": the names --parts takes, in run
/// order.
const std::vector<std::string>& study_names();

/// cgemm-bench --parts: checks the job (one rank) and the outputs, runs cfg.parts in order on
/// one rank's backend, writes cgemm_parts.md (headed by `when` and `command`) and
/// cgemm_parts_STUDY.csv to cfg.out. Returns the exit status (kExitUsage on bad input).
int run_parts(const BenchConfig& cfg, const std::string& command, const std::string& when);

}  // namespace cgemm::launcher::parts
