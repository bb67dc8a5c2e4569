#pragma once
// The backend interface: everything the engine (runtime/src/program/engine.cpp), which runs every
// collective GEMM's programs, needs from a machine. The CPU backend (BLAS + MPI) is its
// reference implementation; the CUDA backend (cuBLASLt + NCCL / copy engines) implements the
// same calls asynchronously.
//
// Streams. A backend has num_streams() compute streams, numbered from 0. Work issued on
// one stream runs in issue order. Stream 0 is the main stream: a collective GEMM starts
// and ends on it. The CPU backend runs everything synchronously, in issue order.
//
// Groups. Exchanges, symmetric buffers and collectives run over a group of the mesh
// (cgemm/collective/group.hpp: tp or dp); a backend holds one transport set per group, made
// with the backend (collectively over each group). Ranks named in a call are ranks of its group.
//
// Transport. start_exchange() moves bytes between ranks of a group. All exchanges of a backend
// run in the order they were started, each after the previous one finished (one FIFO, whatever
// their groups), so a ring step may forward what the previous step received.
// wait_exchange(t, s) makes later work on stream s wait until exchange t has delivered its
// data here AND the data this rank sent has left its source buffer.
//
// Memory. Buffers are host memory on the CPU backend and device memory on the CUDA backend.
// All sizes are bytes unless named count (elements). Every call throws cgemm::Error with the
// call, the rank and the shapes on failure.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "cgemm/collective/exchange.hpp"
#include "cgemm/collective/group.hpp"
#include "cgemm/core/dtype.hpp"
#include "cgemm/core/shape.hpp"
#include "cgemm/gemm/gemm_task.hpp"
#include "cgemm/gemm/quantize_task.hpp"
#include "cgemm/runtime/elementwise.hpp"
#include "cgemm/runtime/grouped_task.hpp"
#include "cgemm/runtime/options.hpp"
#include "cgemm/sharding/reorder.hpp"

namespace cgemm {

// SymmetricBuffer and Exchange: collective/include/cgemm/collective/exchange.hpp.

using ExchangeToken = int64_t;

/// Whether [a, a + bytes) and [b, b + bytes) share a byte (Backend::copy refuses that).
inline bool ranges_overlap(const void* a, const void* b, size_t bytes) {
  const auto* x = static_cast<const char*>(a);
  const auto* y = static_cast<const char*>(b);
  return bytes != 0 && x < y + bytes && y < x + bytes;
}

/// One traced interval of work. Lanes 0..num_streams()-1 are the compute streams; lane
/// num_streams() is the transport. Times are ms since set_tracing(true) on this rank.
///
/// Categories: "gemm", "reorder", "reduce" (partial sums), "collective" (the sequential
/// path's), "transfer" (an exchange group or a copy) and "wait" (a compute stream held until
/// an exchange completed, named "wait for <the exchange's name>", on the waiting stream's lane).
/// What a backend can measure of an exchange differs, so a transfer and its wait are recorded
/// apart: the CPU backend's transfer runs from posting the MPI requests to the wait that saw
/// them complete (MPI moves data only inside MPI calls), its wait is the time the rank spent
/// in that MPI_Waitall; the CUDA backend's transfer is the group's time on the communication
/// stream (which includes any wait for the peer inside the transport), its wait the time the
/// compute stream stood still on the exchange's event.
///
/// `bytes`: what the call moved. Transfers: the bytes this rank sent (it receives as many);
/// copies: the bytes copied; collectives: the collective's size as nccl-tests counts it
/// (all-gather: the gathered output, reduce-scatter: the input, all-reduce: the buffer);
/// GEMMs, reorders and sums: the memory they read and wrote. Waits move nothing: 0.
/// `flops`: GEMMs only, 2 * m * n * k * batch (trace_gemm_flops). Quantization spans
/// ("quantize": amax, scale updates and casts) count the bytes read and written.
struct TraceSpan {
  std::string name;
  std::string category;
  int lane = 0;
  double start_ms = 0.0;
  double end_ms = 0.0;
  int64_t bytes = 0;
  int64_t flops = 0;
  /// The traced call the span belongs to (the GEMM of a block); set by whoever lays calls on
  /// one timeline (the launcher), empty from a backend.
  std::string group = {};
};

/// `flops` of a GEMM span: 2 * m * n * k * batch (the bias and beta's reads are not counted).
inline int64_t trace_gemm_flops(const GemmTask& t) { return 2 * t.m * t.n * t.k * t.batch; }

/// `bytes` of a GEMM span: its operands once each (lhs and out per batch, rhs once, out twice
/// when beta reads it, the bias).
inline int64_t trace_gemm_bytes(const GemmTask& t) {
  const auto in = static_cast<int64_t>(dtype_size(t.in_dtype));
  const auto rhs = static_cast<int64_t>(dtype_size(t.rhs_type()));
  const auto out = static_cast<int64_t>(dtype_size(t.out_dtype));
  return t.batch * t.m * t.k * in + t.k * t.n * rhs +
         t.batch * t.m * t.n * out * (t.beta != 0.0f ? 2 : 1) + (t.bias != nullptr ? t.n * out : 0);
}

/// `bytes` of an exchange group's span: the bytes this rank sends.
inline int64_t trace_exchange_bytes(std::span<const Exchange> group) {
  int64_t bytes = 0;
  for (const Exchange& x : group) bytes += static_cast<int64_t>(x.bytes);
  return bytes;
}

class Backend {
 public:
  virtual ~Backend() = default;

  /// Which backend this is (BackendKind::kCpu or kCuda; never kAuto). Code that must differ
  /// by backend asks this, never name(), which is for people.
  virtual BackendKind kind() const = 0;
  virtual std::string name() const = 0;       // "cpu" or "cuda"
  virtual std::string transport() const = 0;  // e.g. "mpi", "nccl", "copy-engine (CUDA IPC)"
  /// One line per fact worth a report: device, library versions, settings.
  virtual std::string describe() const = 0;
  /// This rank's rank in its group `g`, and the group's size.
  virtual int group_rank(Group g) const = 0;
  virtual int group_size(Group g) const = 0;
  int tp_rank() const { return group_rank(Group::kTp); }
  int tp_size() const { return group_size(Group::kTp); }
  virtual int num_streams() const = 0;
  /// Compute capability of the device (e.g. 90), or 0 on the CPU backend.
  virtual int compute_capability() const = 0;
  /// "" when the work this backend's exchanges and collectives enqueue can be captured into a
  /// CUDA graph and replayed; else why not (the transport that cannot, a trace being taken).
  /// Per op kind: runtime/src/program/program.hpp's capture_trait. The CPU backend answers ""
  /// for its MPI and UCX transports: it emulates capture (capture_graph), so what it refuses is
  /// what every backend refuses, the ops that need the host mid-call.
  virtual std::string capture_refusal() const = 0;
  /// Stream 0 as the native handle (a cudaStream_t on the CUDA backend; nullptr on the CPU
  /// backend). A collective GEMM starts after the work queued on it and ends on it: make it
  /// wait for the producer of your inputs, and your consumers wait for it (CUDA events).
  virtual void* native_stream() const = 0;

  // --- memory ---
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
  /// Collective over `group`: every rank of it allocates the same sizes in the same order. The
  /// buffer is attached to that group's transports (an exchange into it is over `group`).
  virtual SymmetricBuffer allocate_symmetric(size_t bytes, Group group) = 0;
  virtual void release_symmetric(SymmetricBuffer& b) noexcept = 0;
  /// Synchronous: waits for all issued work first.
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* host_src, size_t bytes) = 0;
  /// copy_to_host calls so far (the backend's only way to the host): a test's proof that a path
  /// (the dp gradient sum, the world's amax) makes no copy to the host.
  virtual int64_t copies_to_host() const = 0;
  /// Fills a shard with normal(0, std) values: element at local multi-index i of `local`
  /// (row-major) is a function of (seed, flat index of offset + i in `global`) only, so the
  /// shards of all ranks tile one global tensor. The same values on every backend, up to
  /// the last fp32 bit (the device's logf/cosf differ from the host's). Fills are ordered
  /// after all work issued on every stream.
  virtual void fill_normal(void* dst, DType dtype, const Shape& global, const Shape& local,
                           const Shape& offset, uint64_t seed, float std) = 0;
  /// Fills `count` elements with NaN (poison before a run).
  virtual void fill_nan(void* dst, DType dtype, int64_t count) = 0;

  /// dst = src, `bytes` bytes between two buffers of this backend, on compute stream `stream`
  /// (CUDA: cudaMemcpyAsync device to device, the call the copy-engine transport makes, so
  /// benchmarks can time a transfer against a GEMM on another stream). The buffers must not
  /// overlap. `label` names it in traces; may be null.
  virtual void copy(void* dst, const void* src, size_t bytes, int stream, const char* label) = 0;

  // --- compute ---
  virtual void gemm(const GemmTask& task, int stream) = 0;
  /// dst = the reorder of src (planner's apply_reorder semantics), row-major `shape`, in
  /// `tpsp_size` rank-major blocks: the size of the group they were gathered over (tp for the
  /// collective GEMMs, fsdp for a weight's column shards).
  virtual void reorder(ReorderKind kind, const Shape& shape, int dp_size, int tpsp_size,
                       const void* src, void* dst, DType dtype, int stream) = 0;
  /// out[i] = cast_to_out(sum over p = 0..parts.size()-1, in that order, in fp32, of
  /// parts[p][i] (+ bias[i % bias_len] when bias)), for i in [0, count). The bias has
  /// out_dtype. `out` may be one of the parts (elementwise in place).
  virtual void sum_partials(std::span<const void* const> parts, DType part_dtype, int64_t count,
                            const void* bias, int64_t bias_len, void* out, DType out_dtype,
                            int stream) = 0;

  // --- grouped GEMMs (cgemm/runtime/grouped_task.hpp) ---
  /// Makes what calls of `shape` need (the CUDA runners' handles, staging and workspace) and
  /// returns its handle (0 where nothing is needed: the loop, the CPU backend). Called when a
  /// plan is prepared, never during a call; `name` names the plan in errors. Throws
  /// cgemm::Error where the backend does not run shape.path for it.
  virtual GroupedGemmHandle prepare_grouped_gemm(const GroupedGemmShape& shape,
                                                 const std::string& name) = 0;
  /// Gives back what prepare_grouped_gemm made (after the work that uses it). 0: nothing.
  virtual void release_grouped_gemm(GroupedGemmHandle handle) noexcept = 0;
  /// Runs `task` on `stream`: out = the G GEMMs (+ bias per group; FP8: times each group's
  /// scale_invs). Group sizes in host memory are checked by the caller; task.host_sizes null
  /// (shape.device_sizes): the backend reads and checks them in its memory. Returns false when the
  /// call ran the loop instead of task.shape.path (its pointers did not suit the path, or cuBLASLt
  /// had no algorithm for a tile size); true otherwise (the loop itself included).
  virtual bool grouped_gemm(const GroupedGemmTask& task, int stream) = 0;
  /// Throws, once, the error an earlier call of `handle` found where only the device could
  /// see it (sizes in device memory that were bad: the call filled out with NaN). Called
  /// before a replay of a captured grouped call; an eager call checks by itself. Without such
  /// errors (the CPU backend checks sizes before it runs), nothing.
  virtual void check_grouped_gemm(GroupedGemmHandle handle) { static_cast<void>(handle); }

  // --- quantization (gemm/include/cgemm/gemm/quantize_task.hpp), on `stream` ---
  /// *amax = max |src[i]| over `count` elements of `dtype` (float32, bfloat16, float16), in
  /// fp32; NaNs are skipped (as fmaxf), 0 when count is 0. `amax` is backend memory.
  virtual void amax(const void* src, DType dtype, int64_t count, float* amax, int stream) = 0;
  /// In place: buf[i] = the max over every rank of the job of buf[i], for i < count (the
  /// amax of a global tensor from the amaxes of its pieces; ranks holding replicas agree).
  /// Collective over the world: every rank calls it in the same order. On the CUDA backend it
  /// stays on the device (the max over tp, then over dp, on `stream`: no host copy, no wait).
  virtual void all_reduce_max(float* buf, int count, int stream, const char* label) = 0;
  /// Sets the operand's scale and scale_inv from its amax (current scaling), or records the
  /// amax and sets the next step's scale (delayed scaling), with the numeric:: functions of
  /// quantize_task.hpp, so both backends give the same bits.
  virtual void update_scale(const ScaleUpdate& u, int stream) = 0;
  /// Quantizes as QuantizeTask says (saturating, round to nearest even, NaN stays NaN).
  virtual void quantize(const QuantizeTask& t, int stream) = 0;

  // --- the training step's elementwise work (cgemm/runtime/elementwise.hpp), on `stream` ---
  /// Runs `task` (checked with check_elementwise first: the same refusal on every backend).
  virtual void elementwise(const ElementwiseTask& task, int stream) = 0;

  // --- transport ---
  /// Starts the exchanges of `exchanges` together (e.g. both directions of a ring) over
  /// `group` (its peers are ranks of that group, its destinations symmetric buffers allocated
  /// over it), after all work issued so far on stream `after_stream` (-1: no such dependency).
  virtual ExchangeToken start_exchange(Group group, std::span<const Exchange> exchanges,
                                       int after_stream) = 0;
  /// A token may be waited on more than once.
  virtual void wait_exchange(ExchangeToken token, int stream) = 0;

  // --- collectives over `group` (the sequential path's over tp, the gradient sum over dp), on
  // `stream`; `label` names the call (e.g. "up_proj sequential all-gather") in traces and
  // timeout messages, may be null ---
  /// dst [size, bytes_per_rank] rank-major = every rank's src.
  virtual void all_gather(Group group, const void* src, void* dst, size_t bytes_per_rank,
                          int stream, const char* label) = 0;
  /// dst [count_per_rank] = sum over ranks of src[rank * count_per_rank + i].
  virtual void reduce_scatter(Group group, const void* src, void* dst, DType dtype,
                              int64_t count_per_rank, int stream, const char* label) = 0;
  /// In-place sum over `group`.
  virtual void all_reduce(Group group, void* buf, DType dtype, int64_t count, int stream,
                          const char* label) = 0;

  // --- ordering and timing ---
  /// Later work on every compute stream and on the transport waits for all work issued so
  /// far on stream 0. A collective GEMM starts with this, so its chunks never overtake the
  /// caller's work on stream 0 nor the previous call's use of the same buffers.
  virtual void fork_streams() = 0;
  /// Later work on `stream` waits for all work issued so far on every compute stream.
  virtual void join_streams(int stream) = 0;
  /// A caller's stream (GemmPlan::execute's `stream`; a cudaStream_t on the CUDA backend, of
  /// this backend's device): later work on stream 0 waits for the work queued on `external` so
  /// far. With external_after it brackets one call, so the plan's streams fork from the
  /// caller's stream and join back to it. Events only, no host wait. The CPU backend ignores
  /// both: it runs every call synchronously, so its work is ordered with the caller's anyway.
  virtual void after_external(void* external) = 0;
  /// Later work on `external` waits for all work issued so far on every compute stream and on
  /// the transport (events recorded on each; no host wait, stream 0's own order unchanged).
  virtual void external_after(void* external) = 0;
  /// Collective over `g`: makes now the buffers a collective of `g` staging `staged_bytes`
  /// (its whole group's blocks) would make on its first call (the CUDA backend's copy-engine
  /// collectives: their staging buffer), so that no call allocates them later, inside a CUDA-
  /// graph capture say. Engine::prepare calls it for its programs' collectives. Others: no-op.
  virtual void reserve_collectives(Group g, size_t staged_bytes) = 0;

  // --- CUDA graphs (docs/CUDA_GRAPHS.md) ---
  /// Whether the caller's stream `external` is being captured into a CUDA graph now
  /// (cudaStreamIsCapturing). Always false on the CPU backend, which has no stream.
  virtual bool is_capturing(void* external) const = 0;
  /// Brackets the issue of one call into a capture (Engine::run_on): the events the CUDA
  /// backend records in between are graph nodes, so nothing queries them, and end_capture
  /// forgets them; its copy-engine collectives do not grow their staging buffer meanwhile.
  /// They nest (a plan's call inside a captured training step): the outermost pair counts.
  /// CaptureScope (below) calls end_capture on every way out.
  virtual void begin_capture() = 0;
  virtual void end_capture() noexcept = 0;
  /// Whether the work issued now goes into a capture (between begin_capture and end_capture,
  /// or inside capture_graph's `issue` on the CUDA backend). The CPU backend: never.
  virtual bool capturing() const = 0;
  /// Captures what `issue` enqueues, starting on the caller's stream `stream` (which must not be
  /// capturing yet), into a CUDA graph, instantiates it and returns its id; on failure ends the
  /// capture and throws cgemm::Error. Every stream of the backend joins the capture from
  /// `stream` first and `stream` waits for all of them at the end, so `issue` may issue any of
  /// the backend's work (plans' calls without a stream, collectives, elementwise tasks) as it
  /// would eagerly: a training step as well as one call. The CPU backend keeps `issue` and a replay
  /// calls it again: the same work a replay of the graph would do, so capture's rules are tested
  /// without a GPU.
  virtual int64_t capture_graph(void* stream, const std::function<void()>& issue) = 0;
  /// Launches graph `id` on `stream` (the CPU backend: runs it). Throws for an unknown id.
  virtual void replay_graph(int64_t id, void* stream) = 0;
  virtual void release_graph(int64_t id) noexcept = 0;

  /// Host waits for all issued work.
  virtual void synchronize() = 0;
  /// Runs `body` (which issues work) and returns its duration in ms: wall clock on the CPU
  /// backend; on the CUDA backend CUDA events on stream 0 (after joining all streams), with a
  /// 1 ms spin queued ahead so the body is enqueued before the timed region starts.
  virtual double time_ms(const std::function<void()>& body) = 0;

  // --- tracing (off by default; off costs one branch per call) ---
  /// On: synchronizes, sets this rank's trace origin to now and starts recording a span for
  /// every GEMM, exchange, reorder, partial sum and collective. Off: stops recording.
  virtual void set_tracing(bool on) = 0;
  virtual bool tracing() const = 0;
  /// Synchronizes and returns the spans recorded since tracing was turned on or last taken.
  virtual std::vector<TraceSpan> take_trace() = 0;
};

/// Calls be.end_capture() when it goes: made right after a begin_capture(), so that an exception
/// anywhere after it never leaves the backend capturing.
class CaptureScope {
 public:
  explicit CaptureScope(Backend& be) : be_(be) {}
  ~CaptureScope() { be_.end_capture(); }
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  Backend& be_;
};

}  // namespace cgemm
