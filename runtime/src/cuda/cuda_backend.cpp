// The CUDA backend: one GPU per rank (Context's backend rule picks it; with gpu_sharing several
// ranks share one), cuBLASLt GEMMs on num_max_streams compute streams, and the ring's exchanges
// on one communication stream, moved by copy engines over CUDA IPC when the TP group shares a
// node (else by NCCL send/recv). The sequential path's collectives run on NCCL, or, when GPUs
// are shared (NCCL refuses two ranks of one communicator on one GPU), as copy-engine exchanges
// into a staging buffer followed by a local copy or an fp32 sum in rank order. Everything is
// asynchronous; ordering between streams is expressed with events only, never host waits,
// except where the interface asks for a synchronous call (copies to and from the host,
// synchronize, time_ms).
//
// This file composes the pieces in cuda/ and implements Backend by delegating to them:
//   devices          the GPUs this process sees, and opening the one this rank runs on
//   streams          compute and communication streams, and the events that order them
//   trace            span events around traced calls
//   event_timer      time_ms's events
//   compute          GEMMs, copies and the backend's kernels on the compute streams
//   grouped/         the grouped GEMM's runners (cuBLAS grouped, cuBLASLt tiles and device
//                    tiles), their staging and kernels; its loop is the shared grouped_loop.hpp
//   elementwise      the training step's elementwise kernels (Compute's too)
//   *_collectives    the collectives of each group (NCCL or copy engines); the world's max of
//                    the amaxes is the tp group's max, then the dp group's, on the device
//   exchange_fifo    the exchanges in flight, their completion events in start order
//   device_memory    buffers, the symmetric-buffer registry, host copies
// The backend holds one transport set per group (tp, dp), each with its collectives; the
// set is composed in cuda_transports.cpp from the transports the transport table makes.

#include <cuda_runtime_api.h>

#include <array>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cgemm/core/cuda_check.hpp"
#include "cgemm/core/env.hpp"
#include "cgemm/runtime/backends.hpp"
#include "compute.hpp"
#include "cuda/grouped/runners.hpp"
#include "cuda_transports.hpp"
#include "device_memory.hpp"
#include "devices.hpp"
#include "event_timer.hpp"
#include "exchange_fifo.hpp"
#include "graphs.hpp"
#include "grouped/grouped_loop.hpp"
#include "sequential_collectives.hpp"
#include "streams.hpp"
#include "trace.hpp"

namespace cgemm {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend(const MeshComms& comms, const OverlapOptions& opts, const CudaPlacement& placement,
              TransportKind transport);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  BackendKind kind() const override { return BackendKind::kCuda; }
  std::string name() const override { return "cuda"; }
  std::string transport() const override;
  std::string describe() const override;
  int group_rank(Group g) const override { return comms_.rank(g); }
  int group_size(Group g) const override { return comms_.size(g); }
  int num_streams() const override { return streams_->count(); }
  int compute_capability() const override { return props_.major * 10 + props_.minor; }
  std::string capture_refusal() const override;
  void* native_stream() const override { return streams_->main(); }

  void* allocate(size_t bytes) override { return memory_->allocate(bytes); }
  void release(void* p) noexcept override { memory_->release(p); }
  SymmetricBuffer allocate_symmetric(size_t bytes, Group group) override {
    drain();  // attaching is collective: no peer may wait on this host meanwhile
    return memory_->allocate_symmetric(bytes, group);
  }
  void release_symmetric(SymmetricBuffer& b) noexcept override { memory_->release_symmetric(b); }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override {
    memory_->copy_to_host(host_dst, src, bytes);
  }
  int64_t copies_to_host() const override { return memory_->copies_to_host(); }
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override {
    memory_->copy_from_host(dst, host_src, bytes);
  }
  void fill_normal(void* dst, DType dtype, const Shape& global, const Shape& local,
                   const Shape& offset, uint64_t seed, float std) override {
    compute_->fill_normal(dst, dtype, global, local, offset, seed, std);
  }
  void fill_nan(void* dst, DType dtype, int64_t count) override {
    compute_->fill_nan(dst, dtype, count);
  }

  void copy(void* dst, const void* src, size_t bytes, int s, const char* label) override {
    compute_->copy(dst, src, bytes, s, label);
  }
  void gemm(const GemmTask& task, int s) override { compute_->gemm(task, s); }
  void reorder(ReorderKind kind, const Shape& shape, int dp_size, int tpsp_size, const void* src,
               void* dst, DType dtype, int s) override {
    compute_->reorder(kind, shape, dp_size, tpsp_size, src, dst, dtype, s);
  }
  void sum_partials(std::span<const void* const> parts, DType part_dtype, int64_t count,
                    const void* bias, int64_t bias_len, void* out, DType out_dtype,
                    int s) override {
    compute_->sum_partials(parts, part_dtype, count, bias, bias_len, out, out_dtype, s);
  }

  GroupedGemmHandle prepare_grouped_gemm(const GroupedGemmShape& shape,
                                         const std::string& name) override {
    return grouped_->prepare(shape, name);
  }
  void release_grouped_gemm(GroupedGemmHandle handle) noexcept override {
    grouped_->release(handle);
  }
  bool grouped_gemm(const GroupedGemmTask& t, int s) override {
    cudaStream_t st = streams_->at(s, "grouped_gemm");
    if (t.shape.path != GroupedPath::kLoop) {
      // One span for the runner's call, as a GEMM's (the loop traces each group's GEMM). A
      // runner decides before it issues anything whether the call suits it; one that sends the
      // call to the loop leaves an empty span of its path's name before the loop's.
      const GroupedGemmShape& g = t.shape;
      const auto in = static_cast<int64_t>(dtype_size(g.in_dtype));
      const auto out = static_cast<int64_t>(dtype_size(g.out_dtype));
      bool ran = false;
      trace_->span(
          "gemm",
          [&] {
            return std::string(t.label != nullptr ? t.label : "grouped GEMM") + " (" +
                   grouped_path_name(g.path) + ")";
          },
          s, st, [&] { ran = grouped_->run(t, st); },
          g.extent * g.k * in + g.groups * g.k * g.n * in + g.extent * g.n * out,
          2 * g.extent * g.n * g.k);
      if (ran) return true;
    }
    if (t.host_sizes == nullptr) {  // the device tiles runner never declines a call
      throw Error(where_ + ": grouped GEMM '" + std::string(t.label != nullptr ? t.label : "") +
                  "': the loop needs the group sizes on the host");
    }
    run_grouped_loop(*this, t, s);
    return t.shape.path == GroupedPath::kLoop;
  }
  void check_grouped_gemm(GroupedGemmHandle handle) override { grouped_->check(handle); }

  void amax(const void* src, DType dtype, int64_t count, float* amax, int s) override {
    compute_->amax(src, dtype, count, amax, s);
  }
  void all_reduce_max(float* buf, int count, int s, const char* label) override;
  void update_scale(const ScaleUpdate& u, int s) override { compute_->update_scale(u, s); }
  void quantize(const QuantizeTask& t, int s) override { compute_->quantize(t, s); }
  void elementwise(const ElementwiseTask& t, int s) override { compute_->elementwise(t, s); }

  ExchangeToken start_exchange(Group over, std::span<const Exchange> group,
                               int after_stream) override;
  void wait_exchange(ExchangeToken token, int s) override {
    // Traced between two events on the waiting stream: the second completes when both the
    // stream's earlier work and the exchange have, so the span is how long the stream stood still.
    cudaStream_t st = streams_->at(s, "wait_exchange");
    trace_->span(
        "wait", [&] { return "wait for " + exchanges_->name(token); }, s, st,
        [&] { exchanges_->wait(token, st); });
  }

  void all_gather(Group g, const void* src, void* dst, size_t bytes_per_rank, int s,
                  const char* label) override {
    set(g).collectives->all_gather(src, dst, bytes_per_rank, s, label);
  }
  void reduce_scatter(Group g, const void* src, void* dst, DType dtype, int64_t count_per_rank,
                      int s, const char* label) override {
    set(g).collectives->reduce_scatter(src, dst, dtype, count_per_rank, s, label);
  }
  void all_reduce(Group g, void* buf, DType dtype, int64_t count, int s,
                  const char* label) override {
    set(g).collectives->all_reduce(buf, dtype, count, s, label);
  }

  void fork_streams() override { streams_->fork_from_main(); }
  void join_streams(int s) override { streams_->join_into(s); }
  void after_external(void* external) override {
    streams_->main_after(static_cast<cudaStream_t>(external));
    // In a capture every stream of the plan joins it here: a stream a program never forks
    // (a plain GEMM, the sequential path) would otherwise record events outside the capture
    // that captured streams then wait for, which CUDA refuses (cudaErrorStreamCaptureIsolation),
    // and the end of the call waits for every stream.
    if (streams_->capturing()) streams_->fork_from_main();
  }
  void external_after(void* external) override {
    streams_->external_after_all(static_cast<cudaStream_t>(external));
  }
  void reserve_collectives(Group g, size_t staged_bytes) override {
    if (comms_.size(g) > 1) set(g).collectives->reserve(staged_bytes);
  }
  bool is_capturing(void* external) const override;
  void begin_capture() override {
    if (capture_depth_++ > 0) return;
    streams_->set_capturing(true);
    exchanges_->begin_capture();
  }
  void end_capture() noexcept override {
    if (capture_depth_ == 0 || --capture_depth_ > 0) return;
    exchanges_->end_capture();
    streams_->set_capturing(false);
  }
  bool capturing() const override { return capture_depth_ > 0; }
  int64_t capture_graph(void* stream, const std::function<void()>& issue) override;
  void replay_graph(int64_t id, void* stream) override;
  void release_graph(int64_t id) noexcept override { graphs_->release(id); }
  void synchronize() override;
  double time_ms(const std::function<void()>& body) override;
  void set_tracing(bool on) override;
  bool tracing() const override { return trace_->on(); }
  std::vector<TraceSpan> take_trace() override;

 private:
  [[noreturn]] void fail(const std::string& why) const { throw Error(where_ + ": " + why); }

  // A group's transports, the one chosen for each of its peers, and its collectives.
  struct GroupSet {
    CudaTransports transports;
    std::vector<Transport*> offered;  // transports.offered()
    std::vector<Transport*> peers;    // the one chosen for each rank of the group
    std::unique_ptr<cuda::SequentialCollectives> collectives;
  };
  GroupSet& set(Group g) { return groups_[group_index(g)]; }
  // A dp group of a job whose GPUs are shared (no NCCL) that spans nodes (no copy engines
  // between them) has no device transport: its collectives go through the host over MPI (the
  // one place the gradient sum and the world amax still copy to the host). The same answer on
  // every rank of the group. A tp group in that state refuses the job (make_cuda_transports).
  // (CGEMM_TEST_DP_THROUGH_HOST, read once by the constructor, makes it so on one node.)
  bool through_host(Group g) const {
    return g == Group::kDp && comms_.size(g) > 1 &&
           (test_dp_through_host_ || (placement_.gpu_sharing && !comms_.on_one_node(g)));
  }
  const GroupSet& set(Group g) const { return groups_[group_index(g)]; }
  // Transport::drain of every group's transports: before any host wait on the device.
  void drain() const {
    for (const GroupSet& g : groups_) g.transports.drain();
  }

  const MeshComms& comms_;
  OverlapOptions opts_;
  CudaPlacement placement_;
  std::string where_;
  cudaDeviceProp props_{};
  // Made in this order by the constructor and torn down explicitly by the destructor: a piece
  // is only handed pieces made before it.
  std::unique_ptr<cuda::Streams> streams_;
  std::unique_ptr<cuda::EventTimer> timer_;
  std::unique_ptr<cuda::Trace> trace_;
  std::unique_ptr<cuda::Compute> compute_;
  std::unique_ptr<cuda::GroupedRunners> grouped_;
  std::array<GroupSet, kGroups.size()> groups_;  // by group_index
  bool test_dp_through_host_ = false;
  std::unique_ptr<cuda::ExchangeFifo> exchanges_;
  std::unique_ptr<cuda::DeviceMemory> memory_;
  std::unique_ptr<cuda::Graphs> graphs_;  // they name the memory above: released first
  int capture_depth_ = 0;                 // begin_capture's nesting
};

CudaBackend::CudaBackend(const MeshComms& comms, const OverlapOptions& opts,
                         const CudaPlacement& placement, TransportKind transport)
    : comms_(comms), opts_(opts), placement_(placement) {
  where_ = "cuda backend, rank " + std::to_string(comms.world_rank()) + " (tp rank " +
           std::to_string(comms.tp_rank()) + ", local rank " + std::to_string(comms.local_rank()) +
           " on " + comms.host_name() + ")";
  if (opts.num_max_streams < 1) {
    fail("num_max_streams must be at least 1, got " + std::to_string(opts.num_max_streams));
  }
  props_ = cuda::open_device(placement.device, where_);
  streams_ = std::make_unique<cuda::Streams>(opts.num_max_streams, opts.compute_stream_priority,
                                             opts.communication_stream_priority, where_);
  timer_ = std::make_unique<cuda::EventTimer>(where_);
  trace_ = std::make_unique<cuda::Trace>(where_);
  compute_ = std::make_unique<cuda::Compute>(*streams_, *trace_, where_);
  grouped_ = std::make_unique<cuda::GroupedRunners>(where_);

  test_dp_through_host_ = env_flag(env::kTestDpThroughHost).value_or(false);
  // Collective from here on: every rank of each group reaches these in the same order. The tp
  // set always (the ring's, NCCL even at tp 1 for a borrowed communicator's checks); the dp
  // set only where dp has peers (a dp group of one moves nothing: its collectives are local).
  // The caller's NCCL communicator and transport = ucx are the tp group's.
  for (const Group g : kGroups) {
    GroupSet& gs = set(g);
    if (through_host(g)) continue;  // no device transport: see through_host
    if (g == Group::kTp || comms.size(g) > 1) {
      const bool tp = g == Group::kTp;
      gs.transports = make_cuda_transports(
          comms, g, opts.use_ce, placement.gpu_sharing,
          tp ? static_cast<ncclComm_t>(placement.nccl_comm) : nullptr,
          tp && transport == TransportKind::kUcx,
          tp ? where_ : where_ + ", " + group_name(g) + " group " + comms.describe_group(g));
    }
    gs.offered = gs.transports.offered();
    if (comms.size(g) > 1) {
      gs.peers = choose_transports(gs.offered, comms.rank(g), comms.size(g), where_);
    }
  }
  exchanges_ = std::make_unique<cuda::ExchangeFifo>(
      where_,
      [&comms](Group g, int rank) { return comms.describe_rank(comms.world_rank_of(g, rank)); },
      [this] { drain(); });
  memory_ = std::make_unique<cuda::DeviceMemory>(
      std::array<std::vector<Transport*>, kGroups.size()>{
          set(Group::kTp).offered, set(Group::kDp).offered, set(Group::kFsdp).offered},
      *exchanges_, where_);
  // Chosen once per group: NCCL's collectives wherever it has a communicator (GPUs not shared).
  for (const Group g : kGroups) {
    GroupSet& gs = set(g);
    if (through_host(g)) {
      gs.collectives = cuda::make_host_collectives(*memory_, *streams_, comms.comm(g),
                                                   "DP group " + comms.describe_group(g), where_);
    } else if (gs.transports.nccl != nullptr) {
      gs.collectives =
          cuda::make_nccl_collectives(*gs.transports.nccl, *streams_, *trace_, comms.size(g));
    } else {
      gs.collectives = cuda::make_ce_collectives(*this, g, *streams_, *compute_, where_);
    }
  }
  graphs_ = std::make_unique<cuda::Graphs>(where_);
}

CudaBackend::~CudaBackend() {
  // Let queued work finish before anything it uses goes away. Errors are ignored: a
  // destructor cannot report them, and the next CUDA call of the process would. A transport
  // that failed to drain has opened its stream waits (Transport::drain).
  try {
    drain();
  } catch (const std::exception&) {
  }
  cudaDeviceSynchronize();
  graphs_.reset();
  // Their staging buffers are freed with the other symmetric buffers.
  for (GroupSet& g : groups_) g.collectives.reset();
  // Every peer mapping is closed before the transport that opened it goes.
  memory_->release_all_symmetric();
  for (GroupSet& g : groups_) g.transports.ce.reset();
  grouped_.reset();  // any runner a plan still holds: its calls are done (synchronized above)
  compute_.reset();
  for (GroupSet& g : groups_) g.transports.nccl.reset();
  exchanges_.reset();
  trace_.reset();
  timer_.reset();
  streams_.reset();
  memory_.reset();  // the plain buffers
}

std::string CudaBackend::transport() const {
  // The transports the peers got (choose_transports); one name when they agree.
  std::string names;
  for (const Transport* t : set(Group::kTp).peers) {
    if (t != nullptr && names.find(t->name()) == std::string::npos) {
      names += (names.empty() ? "" : " + ") + t->name();
    }
  }
  return names.empty() ? "none (tp = 1)" : names;
}

std::string CudaBackend::capture_refusal() const {
  // The ring's exchanges go to the peers' transports, and so do the copy-engine collectives of
  // shared GPUs; NCCL's collectives are capturable.
  for (const GroupSet& g : groups_) {
    for (const Transport* t : g.peers) {
      if (t != nullptr && !t->capture_refusal().empty()) return t->capture_refusal();
    }
  }
  if (through_host(Group::kDp)) {
    return "the dp group's collectives go through the host over MPI (GPUs shared, and the dp "
           "group spans nodes)";
  }
  if (trace_->on()) return "a trace is being taken (its spans are timed with host queries)";
  return "";
}

int64_t CudaBackend::capture_graph(void* stream, const std::function<void()>& issue) {
  auto st = static_cast<cudaStream_t>(stream);
  return graphs_->capture(st, [&] {
    begin_capture();
    const CaptureScope scope(*this);  // end_capture on every way out
    after_external(stream);           // stream 0 and then every stream join the capture
    try {
      issue();
    } catch (...) {
      try {
        external_after(stream);
      } catch (...) {
      }
      throw;
    }
    external_after(stream);
  });
}

void CudaBackend::replay_graph(int64_t id, void* stream) {
  // A replay takes its place in the backend's order as an eager call does: it starts after
  // everything issued on the backend's streams so far, and what is issued on them next starts
  // after it. Without that a replay launched on another stream would overlap an eager call of
  // the same context (their exchanges would share the copy-engine flags; ce_transport.hpp).
  auto st = static_cast<cudaStream_t>(stream != nullptr ? stream : native_stream());
  if (!capturing() && is_capturing(st)) {
    // The bracket below would make the capturing stream wait for events recorded outside the
    // capture (cudaErrorStreamCaptureIsolation). The call itself belongs inside that capture.
    fail(
        "replay of a captured cgemm call on a stream that is being captured: issue the call "
        "itself inside that capture (execute on the stream) instead of replaying its graph");
  }
  streams_->external_after_all(st);
  graphs_->replay(id, st);
  streams_->main_after(st);
  streams_->fork_from_main();
}

bool CudaBackend::is_capturing(void* external) const {
  if (external == nullptr) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(static_cast<cudaStream_t>(external), &status),
             "cudaStreamIsCapturing(the caller's stream)", where_);
  return status != cudaStreamCaptureStatusNone;
}

std::string CudaBackend::describe() const {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  const auto ver = [](int v) {
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  };
  std::ostringstream s;
  s << "backend: cuda (cuBLASLt GEMMs, fp32 accumulation)\n"
    << "device: GPU " << placement_.device << " " << props_.name << ", compute capability "
    << props_.major << "." << props_.minor << ", " << props_.multiProcessorCount << " SMs, "
    << props_.totalGlobalMem / (size_t{1} << 20) << " MiB\n"
    << "libraries: CUDA runtime " << ver(runtime) << " (driver supports " << ver(driver) << "), "
    << CublasLtGemm::version() << ", " << NcclTransport::version() << "\n";
  s << set(Group::kTp).transports.describe();
  if (comms_.dp() > 1) {
    s << "dp group " << comms_.describe_group(Group::kDp) << ": "
      << (through_host(Group::kDp) ? std::string("collectives through the host over MPI (GPUs "
                                                 "shared, the group spans nodes)\n")
                                   : set(Group::kDp).transports.describe());
  }
  if (comms_.fsdp() > 1) {
    s << "fsdp group " << comms_.describe_group(Group::kFsdp) << ": "
      << set(Group::kFsdp).transports.describe();
  }
  if (placement_.gpu_sharing) {
    s << "GPU shared by " << placement_.ranks_per_gpu
      << " ranks: no NCCL communicator; the sequential path's collectives run as copy-engine "
         "exchanges; times are not a speed measurement\n";
  }
  s << streams_->describe() << "num_sm_for_communication=" << opts_.num_sm_for_communication
    << ": copy engines take no SMs; NCCL is not capped by it ("
    << (set(Group::kTp).transports.nccl ? set(Group::kTp).transports.nccl->settings()
                                        : std::string("no NCCL communicator"))
    << ")\n"
    << compute_->describe() << "use_ce=" << (opts_.use_ce ? "true" : "false")
    << ", aggregate_all_gather=" << (opts_.aggregate_all_gather ? "true" : "false")
    << ", chunks_per_rank=" << opts_.chunks_per_rank;
  return s.str();
}

ExchangeToken CudaBackend::start_exchange(Group over, std::span<const Exchange> group,
                                          int after_stream) {
  validate_exchange_group(group, comms_.rank(over), comms_.size(over), where_);
  for (const Exchange& x : group) {
    if (!memory_->is_live(*x.dst)) {
      fail("start_exchange '" + std::string(x.label != nullptr ? x.label : "unnamed") +
           "': the destination is not a live symmetric buffer of this backend");
    }
  }
  if (after_stream >= 0) streams_->communication_after(after_stream);
  cudaStream_t comm = streams_->communication();
  trace_->span(
      "transfer", [&] { return cuda::group_name(group); }, streams_->count(), comm,
      [&] { start_group(set(over).peers, group, comm, where_); }, trace_exchange_bytes(group));
  return exchanges_->push(over, group, comm);
}

void CudaBackend::all_reduce_max(float* buf, int count, int s, const char* label) {
  const std::string what = std::string(label != nullptr ? label : "all_reduce_max") + " (" +
                           std::to_string(count) + " floats, max over " +
                           std::to_string(comms_.world_size()) + " ranks)";
  if (count < 0) fail(what + ": negative count");
  if (buf == nullptr && count > 0) fail(what + ": null buffer");
  // The world is the dp x fsdp x tp mesh: the max over this rank's tp group, then over its
  // fsdp group, then over its dp group (each step's ranks then hold the previous groups' maxes)
  // leaves the world's max on every rank. Every step stays on the device, on stream s: no copy to
  // the host, no host wait. Traced as one quantization span (the buffer's bytes, as the collectives
  // count an all-reduce), with the groups' collectives inside it.
  cudaStream_t st = streams_->at(s, "all_reduce_max");
  trace_->span(
      "quantize", [&] { return what; }, s, st,
      [&] {
        if (count == 0) return;
        for (const Group g : {Group::kTp, Group::kFsdp, Group::kDp}) {
          if (g != Group::kTp && comms_.size(g) == 1) continue;
          const std::string over = what + ", over " + group_name(g);
          set(g).collectives->all_reduce_max(buf, count, s, over.c_str());
        }
      },
      int64_t{4} * count);
}

void CudaBackend::synchronize() {
  {
    const auto wait = exchanges_->host_wait("synchronize");
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize", where_);
  }
  for (const GroupSet& g : groups_) g.transports.check_async_error();
  exchanges_->recycle(true);
}

double CudaBackend::time_ms(const std::function<void()>& body) {
  timer_->start(streams_->main());
  // Work the body issues on other streams must not start before the start event.
  streams_->fork_from_main();
  body();
  streams_->gather_into_main();
  timer_->stop(streams_->main());
  {
    const auto wait = exchanges_->host_wait("a timed run");
    timer_->wait();
  }
  const double ms = timer_->elapsed_ms();
  for (const GroupSet& g : groups_) g.transports.check_async_error();
  exchanges_->recycle(true);  // everything issued so far is behind the stop event
  return ms;
}

void CudaBackend::set_tracing(bool on) {
  if (on) synchronize();  // the origin is taken on an idle GPU
  trace_->set(on, streams_->main());
}

std::vector<TraceSpan> CudaBackend::take_trace() {
  synchronize();
  return trace_->take();
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const MeshComms& comms, const OverlapOptions& opts,
                                           const CudaPlacement& placement,
                                           TransportKind transport) {
  return std::make_unique<CudaBackend>(comms, opts, placement, transport);
}

}  // namespace cgemm
