// The CPU backend: the reference implementation of the Backend interface. Host memory,
// OpenBLAS GEMMs, MPI point-to-point (or UCX puts, transport = ucx) for the ring and MPI
// collectives for the reference. Its transport set per group: the tp group's ring runs on MPI
// or UCX (the transport option), the dp group's exchanges on MPI.
// Work runs synchronously in issue order, so stream arguments only matter to the schedule.

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#ifdef CGEMM_HAVE_UCX
#include "cgemm/collective/ucx_transport.hpp"
#endif
#include "cgemm/core/convert.hpp"
#include "cgemm/core/watchdog.hpp"
#include "cgemm/gemm/cpu_gemm.hpp"
#include "cgemm/gemm/quantize.hpp"
#include "cgemm/runtime/backends.hpp"
#include "cgemm/runtime/context.hpp"
#include "cpu_elementwise.hpp"
#include "grouped/grouped_loop.hpp"
#include "transport_table.hpp"

namespace cgemm {

namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const MeshComms& comms, const OverlapOptions& opts, TransportKind kind)
      : comms_(comms), opts_(opts) {
    // One BLAS thread per rank: CPU jobs run one rank per core.
    set_blas_threads(1);
    kind_ = kind;
    for (const Group g : kGroups) {
      std::string unused;  // mpi always serves
      mpi_[group_index(g)] = make_transport(TransportKind::kMpi, site(g, "cpu backend"), unused);
      ring_[group_index(g)] = mpi_[group_index(g)].get();
    }
    // Decided alike on every rank of the world (the option is the job's; UCX's answer is
    // agreed below), so every rank throws or none does.
    if (const std::string why = transport_backend_refusal(kind, BackendKind::kCpu); !why.empty()) {
      throw BackendRuleError(why);
    }
    if (kind == TransportKind::kUcx) make_ucx();
    for (const Group g : kGroups) {
      Transport* const offered[] = {ring_of(g)};
      peers_[group_index(g)] =
          choose_transports(offered, comms.rank(g), comms.size(g),
                            std::string("cpu backend, ") + group_name(g) + " group");
    }
  }
  ~CpuBackend() override {
#ifdef CGEMM_HAVE_UCX
    ucx_.reset();  // unmaps the symmetric buffers before they are freed
#endif
    for (auto& [p, bytes] : allocations_) std::free(p);
  }

  BackendKind kind() const override { return BackendKind::kCpu; }
  std::string name() const override { return "cpu"; }
  std::string transport() const override { return ring_of(Group::kTp)->name(); }
  std::string describe() const override {
    int version = 0, subversion = 0;
    MPI_Get_version(&version, &subversion);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(lib, &len);
    std::string libs(lib, static_cast<size_t>(len));
    libs = libs.substr(0, libs.find_first_of("\n,"));
    std::ostringstream s;
    s << "backend: cpu (OpenBLAS dgemm on fp64 copies, one BLAS thread per rank)\n"
      << "mpi: " << libs << " (MPI " << version << "." << subversion << ")\n"
      << "transport: "
      << (ring_of(Group::kTp) == mpi_[group_index(Group::kTp)].get()
              ? "MPI non-blocking send/recv on the TP communicator (transport = " +
                    transport_kind_name(kind_) +
                    (kind_ == TransportKind::kAuto
                         ? ": UCX puts are there with transport = ucx but have not measured faster"
                         : "") +
                    ")"
              : ring_of(Group::kTp)->describe() + " (transport = ucx)")
      << "\n"
      << "ignored on cpu: compute_stream_priority, communication_stream_priority, "
         "num_sm_for_communication, use_ce";
    return s.str();
  }
  int group_rank(Group g) const override { return comms_.rank(g); }
  int group_size(Group g) const override { return comms_.size(g); }
  int num_streams() const override { return opts_.num_max_streams; }
  int compute_capability() const override { return 0; }
  // Capture is emulated (capture_graph): the MPI and UCX transports stand for the CUDA
  // backend's capturable ones, so only what every backend refuses is refused.
  std::string capture_refusal() const override {
    return tracing_ ? "a trace is being taken (a replay would record no spans)" : "";
  }
  void* native_stream() const override { return nullptr; }

  void* allocate(size_t bytes) override {
    // 64-byte aligned, never zero-sized, so every buffer has a distinct address.
    const size_t size = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, size);
    if (p == nullptr) {
      throw Error("cpu backend: out of host memory allocating " + std::to_string(bytes) +
                  " bytes on rank " + std::to_string(comms_.world_rank()));
    }
    allocations_[p] = bytes;
    return p;
  }
  void release(void* p) noexcept override {
    if (allocations_.erase(p) != 0) std::free(p);
  }
  SymmetricBuffer allocate_symmetric(size_t bytes, Group group) override {
    Transport* const t = ring_of(group);
    SymmetricBuffer b{nullptr, bytes, next_id_++};
    std::string error;
    try {
      b.local = allocate(bytes);
    } catch (const Error& e) {
      if (t == mpi_[group_index(group)].get()) throw;
      error = e.what();
    }
    // A one-sided transport registers the buffer on every rank of the group; a rank whose
    // allocation failed attaches a null buffer, so every rank throws and none waits.
    try {
      t->attach(b);
    } catch (const Error&) {
      if (!error.empty()) throw Error(error);
      release(b.local);
      throw;
    }
    symmetric_group_[b.id] = group;
    return b;
  }
  void release_symmetric(SymmetricBuffer& b) noexcept override {
    const auto it = symmetric_group_.find(b.id);
    if (it != symmetric_group_.end()) {
      ring_of(it->second)->detach(b);
      symmetric_group_.erase(it);
    }
    release(b.local);
    b = SymmetricBuffer{};
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    ++copies_to_host_;
    std::memcpy(dst, src, bytes);
  }
  int64_t copies_to_host() const override { return copies_to_host_; }
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }

  void fill_normal(void* dst, DType dtype, const Shape& global, const Shape& local,
                   const Shape& offset, uint64_t seed, float std) override {
    const int64_t count = num_elements(local);
    if (count == 0) return;
    const size_t nd = local.size();
    std::vector<float> row(static_cast<size_t>(local.back()));
    std::vector<int64_t> idx(nd, 0);
    const int64_t rows = count / local.back();
    const size_t esize = dtype_size(dtype);
    for (int64_t r = 0; r < rows; ++r) {
      // Global flat index of the row's first element.
      int64_t flat = 0;
      for (size_t d = 0; d < nd; ++d) flat = flat * global[d] + offset[d] + idx[d];
      for (int64_t j = 0; j < local.back(); ++j) {
        row[static_cast<size_t>(j)] =
            numeric::normal_value(seed, static_cast<uint64_t>(flat + j), std);
      }
      convert_from_float(row.data(),
                         static_cast<char*>(dst) + static_cast<size_t>(r) * row.size() * esize,
                         dtype, local.back());
      for (size_t d = nd - 1; d-- > 0;) {  // next row: odometer over dims 0..nd-2
        if (++idx[d] < local[d]) break;
        idx[d] = 0;
      }
    }
  }
  void fill_nan(void* dst, DType dtype, int64_t count) override {
    std::vector<float> nan(static_cast<size_t>(count), std::numeric_limits<float>::quiet_NaN());
    convert_from_float(nan.data(), dst, dtype, count);
  }

  void copy(void* dst, const void* src, size_t bytes, int stream, const char* label) override {
    if (ranges_overlap(dst, src, bytes)) {
      throw Error(named(label, "copy") + ": source and destination overlap");
    }
    traced("transfer", named(label, "copy"), stream, static_cast<int64_t>(bytes), 0, [&] {
      if (bytes != 0) std::memcpy(dst, src, bytes);
    });
  }
  void gemm(const GemmTask& task, int stream) override {
    traced("gemm", task.label ? task.label : "gemm", stream, trace_gemm_bytes(task),
           trace_gemm_flops(task), [&] { cpu_gemm(task); });
    // Let in-flight transfers move between chunks.
    for (Transport* t : ring_) t->progress();
  }
  void reorder(ReorderKind kind, const Shape& shape, int dp_size, int tpsp_size, const void* src,
               void* dst, DType dtype, int stream) override {
    // Read once, written once.
    const int64_t bytes = 2 * num_elements(shape) * static_cast<int64_t>(dtype_size(dtype));
    traced("reorder",
           kind == ReorderKind::kTpspLeading ? "reorder tpsp-leading" : "reorder dp-leading",
           stream, bytes, 0,
           [&] { apply_reorder(kind, shape, dp_size, tpsp_size, src, dst, dtype_size(dtype)); });
  }
  void sum_partials(std::span<const void* const> parts, DType part_dtype, int64_t count,
                    const void* bias, int64_t bias_len, void* out, DType out_dtype,
                    int stream) override {
    // Every part read, the output written, the bias read.
    const int64_t bytes =
        count *
            (static_cast<int64_t>(parts.size() * dtype_size(part_dtype) + dtype_size(out_dtype))) +
        (bias != nullptr ? bias_len * static_cast<int64_t>(dtype_size(out_dtype)) : 0);
    traced("reduce", "sum " + std::to_string(parts.size()) + " partial(s)", stream, bytes, 0,
           [&] { sum(parts, part_dtype, count, bias, bias_len, out, out_dtype); });
  }
  void sum(std::span<const void* const> parts, DType part_dtype, int64_t count, const void* bias,
           int64_t bias_len, void* out, DType out_dtype) {
    std::vector<float> acc(static_cast<size_t>(count), 0.0f), tmp(static_cast<size_t>(count));
    for (const void* p : parts) {
      convert_to_float(p, part_dtype, tmp.data(), count);
      for (int64_t i = 0; i < count; ++i)
        acc[static_cast<size_t>(i)] += tmp[static_cast<size_t>(i)];
    }
    if (bias != nullptr) {
      // The sum is rounded to the output dtype before the bias is added (gemm.py reduces in
      // the output dtype, then output += bias).
      convert_from_float(acc.data(), out, out_dtype, count);
      convert_to_float(out, out_dtype, acc.data(), count);
      std::vector<float> b(static_cast<size_t>(bias_len));
      convert_to_float(bias, out_dtype, b.data(), bias_len);
      for (int64_t i = 0; i < count; ++i) {
        acc[static_cast<size_t>(i)] += b[static_cast<size_t>(i % bias_len)];
      }
    }
    convert_from_float(acc.data(), out, out_dtype, count);
  }

  void amax(const void* src, DType dtype, int64_t count, float* amax, int stream) override {
    traced("quantize", "amax", stream, count * static_cast<int64_t>(dtype_size(dtype)), 0, [&] {
      std::vector<float> x(static_cast<size_t>(count));
      convert_to_float(src, dtype, x.data(), count);
      *amax = quant::amax(x.data(), count);
    });
  }
  void all_reduce_max(float* buf, int count, int stream, const char* label) override {
    const watchdog::WaitScope wait(where(named(label, "amax all-reduce over the job")));
    traced("collective", named(label, "amax all-reduce"), stream,
           static_cast<int64_t>(count) * static_cast<int64_t>(sizeof(float)), 0, [&] {
             check_mpi(MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_MAX, comms_.world()),
                       "MPI_Allreduce(amax)");
           });
  }
  // The CPU backend runs every grouped GEMM as the loop: nothing to prepare.
  GroupedGemmHandle prepare_grouped_gemm(const GroupedGemmShape& shape,
                                         const std::string& name) override {
    if (shape.path != GroupedPath::kLoop) {
      throw Error("cpu backend: grouped GEMM '" + name + "' asks for path " +
                  grouped_path_name(shape.path) + "; the CPU backend runs the loop only");
    }
    return 0;
  }
  void release_grouped_gemm(GroupedGemmHandle) noexcept override {}
  bool grouped_gemm(const GroupedGemmTask& t, int stream) override {
    if (t.host_sizes != nullptr) {
      run_grouped_loop(*this, t, stream);
      return true;
    }
    // Sizes read where they are (shape.device_sizes): this backend's memory is the host's.
    GroupedGemmTask on_host = t;
    on_host.host_sizes = t.sizes;
    const int64_t sum = check_group_sizes(t.shape, t.label != nullptr ? t.label : "",
                                          {t.sizes, static_cast<size_t>(t.shape.groups)});
    run_grouped_loop(*this, on_host, stream);
    zero_padding_rows(*this, t, sum, stream);
    return true;
  }
  void update_scale(const ScaleUpdate& u, int stream) override {
    traced("quantize", "scale update", stream, 0, 0,
           [&] { numeric::apply_scale_update(u.state, *u.amax, u.rule, u.recipe, u.fp8_max); });
  }
  void elementwise(const ElementwiseTask& t, int /*stream*/) override { cpu::run_elementwise(t); }
  void quantize(const QuantizeTask& t, int stream) override {
    const int64_t count = t.rows * t.cols;
    traced("quantize", named(t.label, "quantize"), stream,
           count * static_cast<int64_t>(dtype_size(t.src_dtype) + 1), 0, [&] {
             if (is_fp8(t.src_dtype)) {  // FP8 codes transposed as they are
               if (t.format != t.src_dtype || !t.transpose || t.scaling != BlockScaling::kTensor) {
                 throw Error("quantize: an FP8 source is only transposed into its own format");
               }
               if (t.amax != nullptr) {
                 throw Error("quantize: FP8 codes moved as they are have no amax");
               }
               const auto* src = static_cast<const uint8_t*>(t.src);
               auto* dst = static_cast<uint8_t*>(t.dst);
               for (int64_t r = 0; r < t.rows; ++r) {
                 for (int64_t c = 0; c < t.cols; ++c) dst[c * t.rows + r] = src[r * t.cols + c];
               }
               return;
             }
             std::vector<float> x(static_cast<size_t>(count));
             convert_to_float(t.src, t.src_dtype, x.data(), count);
             if (t.amax != nullptr) {  // the delayed scaling's amax, measured by the cast
               if (t.scaling != BlockScaling::kTensor) {
                 throw Error("quantize: only a per-tensor cast measures the amax");
               }
               *t.amax = quant::amax(x.data(), count);
             }
             quantize_now(t, x);
           });
  }
  static void quantize_now(const QuantizeTask& t, std::vector<float>& x) {
    auto* dst = static_cast<uint8_t*>(t.dst);
    const float scale = t.state[ScaleStateLayout::kScale];
    if (t.scaling == BlockScaling::kTensor) {
      if (t.transpose) {
        quant::quantize_transpose(x.data(), t.rows, t.cols, scale, t.format, dst);
      } else {
        quant::quantize_tensor(x.data(), t.rows * t.cols, scale, t.format, dst);
      }
      return;
    }
    // Block scaling runs along the last dim of dst: transpose the source first.
    int64_t rows = t.rows, cols = t.cols;
    if (t.transpose) {
      std::vector<float> xt(x.size());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          xt[static_cast<size_t>(c * rows + r)] = x[static_cast<size_t>(r * cols + c)];
        }
      }
      x.swap(xt);
      std::swap(rows, cols);
    }
    if (t.scaling == BlockScaling::kMxfp8) {
      quant::quantize_mxfp8(x.data(), rows, cols, t.format, quant::BlockDir::kRowwise, dst,
                            t.block_scale);
    } else {
      quant::quantize_nvfp4(x.data(), rows, cols, t.state[ScaleStateLayout::kAmax], t.two_d, dst,
                            t.block_scale);
    }
  }

  ExchangeToken start_exchange(Group over, std::span<const Exchange> group,
                               int after_stream) override {
    // The interface's transport is a FIFO: a group starts after the previous ones finished. The
    // rank waits here, so the wait is traced on the stream the group was to follow.
    while (!groups_.empty()) wait_exchange(groups_.begin()->first, std::max(after_stream, 0));
    validate_exchange_group(group, comms_.rank(over), comms_.size(over), "cpu backend");
    std::string what = "exchange '";
    for (size_t i = 0; i < group.size(); ++i) {
      what += (i ? " + " : "") + std::string(group[i].label ? group[i].label : "unnamed");
    }
    what += "'";
    for (const Exchange& x : group) {
      what += " (to " + comms_.describe_rank(comms_.world_rank_of(over, x.send_peer)) + ", from " +
              comms_.describe_rank(comms_.world_rank_of(over, x.recv_peer)) + ")";
    }
    groups_[next_token_] = {start_group(peers_[group_index(over)], group, nullptr, "cpu backend"),
                            group.empty() || !group[0].label ? "exchange" : group[0].label,
                            std::move(what), now_ms(), trace_exchange_bytes(group)};
    return next_token_++;
  }
  void wait_exchange(ExchangeToken token, int stream) override {
    auto it = groups_.find(token);
    if (it == groups_.end()) {
      if (token >= 0 && token < next_token_) return;  // already waited: complete
      throw Error("cpu backend: unknown exchange " + std::to_string(token));
    }
    const double wait_start = tracing_ ? now_ms() : 0.0;
    {
      const watchdog::WaitScope wait(where(it->second.what));
      for (auto& [transport, handle] : it->second.started.parts) transport->wait(handle);
    }
    // On the CPU a transfer is known to be done only when waited: the span ends there. The
    // wait, which moves the data or waits for the peer inside MPI, is the stream's own span.
    if (tracing_) {
      const PendingExchange& x = it->second;
      const double end = now_ms();
      spans_.push_back({x.name, "transfer", num_streams(), x.start_ms, end, x.bytes, 0});
      spans_.push_back({"wait for " + x.name, "wait", stream, wait_start, end, 0, 0});
    }
    groups_.erase(it);
  }

  void all_gather(Group group, const void* src, void* dst, size_t bytes_per_rank, int stream,
                  const char* label) override {
    const watchdog::WaitScope wait(where(group_wait(group, label, "all-gather")));
    traced("collective", named(label, "all-gather"), stream,
           static_cast<int64_t>(bytes_per_rank) * comms_.size(group), 0,
           [&] { all_gather_now(group, src, dst, bytes_per_rank); });
  }
  void all_gather_now(Group group, const void* src, void* dst, size_t bytes_per_rank) {
    if (bytes_per_rank > static_cast<size_t>(std::numeric_limits<int>::max())) {
      throw Error("cpu backend: all-gather of " + std::to_string(bytes_per_rank) +
                  " bytes per rank exceeds MPI's int count");
    }
    check_mpi(MPI_Allgather(src, static_cast<int>(bytes_per_rank), MPI_BYTE, dst,
                            static_cast<int>(bytes_per_rank), MPI_BYTE, comms_.comm(group)),
              "MPI_Allgather");
  }
  void reduce_scatter(Group group, const void* src, void* dst, DType dtype, int64_t count_per_rank,
                      int stream, const char* label) override {
    const int64_t bytes =
        count_per_rank * comms_.size(group) * static_cast<int64_t>(dtype_size(dtype));
    traced("collective", named(label, "reduce-scatter"), stream, bytes, 0, [&] {
      const watchdog::WaitScope wait(where(group_wait(group, label, "reduce-scatter")));
      reduce_scatter_now(group, src, dst, dtype, count_per_rank);
    });
  }
  void reduce_scatter_now(Group group, const void* src, void* dst, DType dtype,
                          int64_t count_per_rank) {
    // MPI has no bf16/fp16 sum, and MPI_Reduce_scatter's order of additions is the library's:
    // exchange the blocks (all-to-all), then sum them in fp32 in rank order and round once, so
    // the reference adds in the same order as the overlapped path.
    const int tp = comms_.size(group);
    const size_t block = static_cast<size_t>(count_per_rank) * dtype_size(dtype);
    if (block > static_cast<size_t>(std::numeric_limits<int>::max())) {
      throw Error("cpu backend: reduce-scatter block of " + std::to_string(block) +
                  " bytes exceeds MPI's int count");
    }
    std::vector<char> blocks(block * static_cast<size_t>(tp));
    check_mpi(MPI_Alltoall(src, static_cast<int>(block), MPI_BYTE, blocks.data(),
                           static_cast<int>(block), MPI_BYTE, comms_.comm(group)),
              "MPI_Alltoall");
    std::vector<const void*> parts;
    for (int p = 0; p < tp; ++p) parts.push_back(blocks.data() + static_cast<size_t>(p) * block);
    sum(parts, dtype, count_per_rank, nullptr, 0, dst, dtype);
  }
  void all_reduce(Group group, void* buf, DType dtype, int64_t count, int stream,
                  const char* label) override {
    const watchdog::WaitScope wait(where(group_wait(group, label, "all-reduce")));
    traced("collective", named(label, "all-reduce"), stream,
           count * static_cast<int64_t>(dtype_size(dtype)), 0,
           [&] { all_reduce_now(group, buf, dtype, count); });
  }
  void all_reduce_now(Group group, void* buf, DType dtype, int64_t count) {
    if (count > std::numeric_limits<int>::max()) {
      throw Error("cpu backend: all-reduce of " + std::to_string(count) +
                  " elements exceeds MPI's int count");
    }
    std::vector<float> v(static_cast<size_t>(count));
    convert_to_float(buf, dtype, v.data(), count);
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                            comms_.comm(group)),
              "MPI_Allreduce");
    convert_from_float(v.data(), buf, dtype, count);
  }

  void fork_streams() override {}
  void join_streams(int) override {}
  // Synchronous: every call has finished when it returns, so a caller's stream needs no event.
  void after_external(void*) override {}
  void external_after(void*) override {}
  void synchronize() override {}
  void reserve_collectives(Group, size_t) override {}  // MPI collectives stage nothing
  bool is_capturing(void*) const override { return false; }
  void begin_capture() override {}
  void end_capture() noexcept override {}
  bool capturing() const override { return false; }
  int64_t capture_graph(void*, const std::function<void()>& issue) override {
    // A capture runs nothing; each replay runs the call (its operands as captured).
    graphs_.emplace(next_graph_, issue);
    return next_graph_++;
  }
  void replay_graph(int64_t id, void*) override {
    auto it = graphs_.find(id);
    if (it == graphs_.end()) {
      throw Error("replay of graph " + std::to_string(id) + ", which this backend never captured");
    }
    it->second();
  }
  void release_graph(int64_t id) noexcept override { graphs_.erase(id); }
  double time_ms(const std::function<void()>& body) override {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
  }

  void set_tracing(bool on) override {
    tracing_ = on;
    if (on) {
      origin_ = std::chrono::steady_clock::now();
      spans_.clear();
    }
  }
  bool tracing() const override { return tracing_; }
  std::vector<TraceSpan> take_trace() override { return std::exchange(spans_, {}); }

 private:
  double now_ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - origin_)
        .count();
  }
  template <class F>
  void traced(const char* category, std::string name, int lane, int64_t bytes, int64_t flops,
              F&& work) {
    if (!tracing_) {
      work();
      return;
    }
    const double start = now_ms();
    work();
    spans_.push_back({std::move(name), category, lane, start, now_ms(), bytes, flops});
  }

  static std::string named(const char* label, const char* what) {
    return label != nullptr ? std::string(label) : std::string(what);
  }
  // A collective of MPI cannot tell which ranks have not arrived: name the collective and the
  // whole group.
  std::string group_wait(Group group, const char* label, const char* collective) const {
    return std::string(collective) + (label != nullptr ? " '" + std::string(label) + "'" : "") +
           (group == Group::kTp   ? " over the TP group, "
            : group == Group::kDp ? " over the DP group, "
                                  : " over the FSDP group, ") +
           comms_.describe_group(group) + ", some of which have not arrived";
  }
  // Where the transport table's rows make this backend's transports of `group`.
  TransportSite site(Group g, std::string where) const {
    return {.backend = BackendKind::kCpu,
            .comm = comms_.comm(g),
            .where = std::move(where),
            .describe_peer = [this, g](int m) {
              return comms_.describe_rank(comms_.world_rank_of(g, m));
            }};
  }
  // The transport that symmetric buffers of `group` attach to.
  Transport* ring_of(Group group) const { return ring_[group_index(group)]; }
  // "<what> (cpu backend, tp rank r)" for timeout messages.
  std::string where(const std::string& what) const {
    return what + " (cpu backend, tp rank " + std::to_string(comms_.tp_rank()) + ")";
  }

  struct PendingExchange {
    StartedGroup started;
    std::string name;
    std::string what;
    double start_ms = 0.0;
    int64_t bytes = 0;  // sent by this rank
  };

  // transport = ucx: the UCX transport for every peer, or BackendRuleError on every rank of the
  // world with the lowest failing rank's reason (a failed UCX setup names every TP rank's).
  void make_ucx() {
    kind_ = TransportKind::kUcx;
    std::string why;
#ifdef CGEMM_HAVE_UCX
    if (comms_.tp() > 1) {
      const watchdog::WaitScope wait(
          where("the TP group's UCX setup (contexts, workers, addresses)"));
      ucx_ =
          make_transport(TransportKind::kUcx,
                         site(Group::kTp, "cpu backend, tp rank " +
                                              std::to_string(comms_.tp_rank()) + ", ucx transport"),
                         why);
      if (!ucx_) {
        why = "no UCX context on every rank of the TP group " + comms_.describe_tp_group() + ": " +
              why;
      } else {
        // why: create()'s word on the first peer it cannot reach
        why = ucx_reach_problem(*ucx_, comms_, why);
        if (!why.empty()) ucx_.reset();
      }
    }
#else
    // make_transport refuses it, saying why.
    static_cast<void>(make_transport(TransportKind::kUcx, site(Group::kTp, "cpu backend"), why));
#endif
    // Every rank of the world learns whether any rank failed, and the lowest failing rank's
    // reason, so all throw the same message.
    const std::string message = agree_world(why);
    if (!message.empty()) {
      throw BackendRuleError("transport = ucx: " + message +
                             " (transport = auto or mpi moves the ring over MPI)");
    }
#ifdef CGEMM_HAVE_UCX
    if (ucx_) ring_[group_index(Group::kTp)] = ucx_.get();
#endif
  }
  // The reason of the lowest world rank with a non-empty `mine`, on every rank; empty if none.
  std::string agree_world(const std::string& mine) const {
    const int me = mine.empty() ? comms_.world_size() : comms_.world_rank();
    int first = me;
    check_mpi(MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, comms_.world()),
              "MPI_Allreduce(transport checks)");
    if (first == comms_.world_size()) return "";
    int len = first == comms_.world_rank() ? static_cast<int>(mine.size()) : 0;
    check_mpi(MPI_Bcast(&len, 1, MPI_INT, first, comms_.world()), "MPI_Bcast(transport check)");
    std::string text(static_cast<size_t>(len), '\0');
    if (first == comms_.world_rank()) text = mine;
    check_mpi(MPI_Bcast(text.data(), len, MPI_CHAR, first, comms_.world()),
              "MPI_Bcast(transport check)");
    return text;
  }

  const MeshComms& comms_;
  OverlapOptions opts_;
  TransportKind kind_ = TransportKind::kAuto;
  // Per group (by group_index): its MPI transport, the transport its symmetric buffers and
  // exchanges use (the MPI one; for tp with transport = ucx, UCX's), and the one of each peer.
  std::array<std::unique_ptr<Transport>, kGroups.size()> mpi_;
#ifdef CGEMM_HAVE_UCX
  std::unique_ptr<Transport> ucx_;
#endif
  std::array<Transport*, kGroups.size()> ring_{};
  std::array<std::vector<Transport*>, kGroups.size()> peers_;
  std::map<int, Group> symmetric_group_;  // each live symmetric buffer's group, by id
  std::map<void*, size_t> allocations_;
  std::map<ExchangeToken, PendingExchange> groups_;
  bool tracing_ = false;
  std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
  std::vector<TraceSpan> spans_;
  ExchangeToken next_token_ = 0;
  int next_id_ = 0;
  int64_t copies_to_host_ = 0;
  std::map<int64_t, std::function<void()>> graphs_;  // capture_graph's emulated graphs
  int64_t next_graph_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const MeshComms& comms, const OverlapOptions& opts,
                                          TransportKind transport) {
  return std::make_unique<CpuBackend>(comms, opts, transport);
}

}  // namespace cgemm
