#pragma once
// A Backend that runs nothing and records every call as one line of text, with each buffer
// named by the region it points into ("ring+4096", "lhs+0"). The golden-program tests run the
// engine on it to see exactly which calls a plan issues, without MPI or a GPU.

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cgemm/runtime/backend.hpp"
#include "grouped/grouped_loop.hpp"  // runtime/src: the loop both backends run

namespace cgemm::testing {

class RecordingBackend final : public Backend {
 public:
  RecordingBackend(int tp, int tp_rank, int streams, int fsdp = 1, int fsdp_rank = 0)
      : tp_(tp), rank_(tp_rank), streams_(streams), fsdp_(fsdp), fsdp_rank_(fsdp_rank) {}

  /// A named region of `bytes` the test hands to the engine as an operand.
  void* region(const std::string& name, size_t bytes) {
    regions_.push_back({name, std::make_unique<char[]>(bytes + 1), bytes});
    return regions_.back().data.get();
  }
  const std::vector<std::string>& calls() const { return calls_; }

  /// One half of a pairwise transfer as this rank posted it (for cross-rank matching).
  struct Posted {
    int send_peer = -1, recv_peer = -1;
    size_t send_offset = 0, recv_offset = 0, bytes = 0;
    const void* src = nullptr;  // in one of this backend's regions
    int exchange = 0;           // the start_exchange call it belongs to, from 0
    Group group = Group::kTp;   // the group it was exchanged over
  };
  const std::vector<Posted>& posted() const { return posted_; }

  BackendKind kind() const override { return BackendKind::kCpu; }
  std::string name() const override { return "recording"; }
  std::string transport() const override { return "recording"; }
  std::string describe() const override { return "recording backend"; }
  // A tp group of tp_ ranks, an fsdp group of fsdp_; a dp group of this rank alone.
  int group_rank(Group g) const override {
    return g == Group::kTp ? rank_ : g == Group::kFsdp ? fsdp_rank_ : 0;
  }
  int group_size(Group g) const override {
    return g == Group::kTp ? tp_ : g == Group::kFsdp ? fsdp_ : 1;
  }
  int num_streams() const override { return streams_; }
  int compute_capability() const override { return 0; }
  std::string capture_refusal() const override { return ""; }
  void* native_stream() const override { return nullptr; }

  void* allocate(size_t bytes) override {
    void* p = region("ws" + std::to_string(workspaces_++), bytes);
    log("allocate " + std::to_string(bytes) + " -> " + where(p));
    return p;
  }
  void release(void* p) noexcept override { static_cast<void>(p); }
  SymmetricBuffer allocate_symmetric(size_t bytes, Group group) override {
    SymmetricBuffer b{region(group == Group::kFsdp ? "fsdp_ring" : "ring", bytes), bytes, 0};
    log("allocate_symmetric " + std::to_string(bytes) + over(group));
    return b;
  }
  void release_symmetric(SymmetricBuffer& b) noexcept override { b.local = nullptr; }
  // The regions are host memory: copies move the bytes, so a program that reads back what it
  // copied (a grouped GEMM's sizes) sees the caller's values.
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    ++copies_to_host_;
    log("copy_to_host " + where(src) + " " + std::to_string(bytes) + " -> host");
  }
  int64_t copies_to_host() const override { return copies_to_host_; }
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    log("copy_from_host");
  }
  void fill_normal(void*, DType, const Shape&, const Shape&, const Shape&, uint64_t,
                   float) override {
    log("fill_normal");
  }
  void fill_nan(void*, DType, int64_t) override { log("fill_nan"); }
  void copy(void* dst, const void* src, size_t bytes, int stream, const char*) override {
    log("copy s" + std::to_string(stream) + " " + where(src) + " -> " + where(dst) + " " +
        std::to_string(bytes));
  }

  void gemm(const GemmTask& t, int stream) override {
    char shape[256];
    std::snprintf(shape, sizeof(shape),
                  "m=%lld n=%lld k=%lld batch=%lld lda=%lld ldb=%lld ldc=%lld strides=%lld/%lld "
                  "%s%s%s alpha=%g beta=%g",
                  static_cast<long long>(t.m), static_cast<long long>(t.n),
                  static_cast<long long>(t.k), static_cast<long long>(t.batch),
                  static_cast<long long>(t.lda), static_cast<long long>(t.ldb),
                  static_cast<long long>(t.ldc), static_cast<long long>(t.lhs_batch_stride),
                  static_cast<long long>(t.out_batch_stride), dt(t.in_dtype).c_str(),
                  t.lhs_transposed ? " lhs^T" : "", t.rhs_transposed ? " rhs^T" : "",
                  static_cast<double>(t.alpha), static_cast<double>(t.beta));
    log("gemm s" + std::to_string(stream) + " " + shape + " lhs=" + where(t.lhs) +
        " rhs=" + where(t.rhs) + " out=" + where(t.out) + " bias=" + where(t.bias) + " '" +
        (t.label != nullptr ? t.label : "") + "'");
  }
  void reorder(ReorderKind kind, const Shape& shape, int dp_size, int /*tpsp_size*/,
               const void* src, void* dst, DType dtype, int stream) override {
    log("reorder s" + std::to_string(stream) + " " +
        (kind == ReorderKind::kTpspLeading ? "tpsp-leading " : "dp-leading ") + shape_str(shape) +
        " dp=" + std::to_string(dp_size) + " " + where(src) + " -> " + where(dst) + " " +
        dt(dtype));
  }
  void sum_partials(std::span<const void* const> parts, DType part_dtype, int64_t count,
                    const void* bias, int64_t bias_len, void* out, DType out_dtype,
                    int stream) override {
    std::string s = "sum s" + std::to_string(stream) + " [";
    for (const void* p : parts) s += " " + where(p);
    log(s + " ] " + dt(part_dtype) + " count=" + std::to_string(count) + " bias=" + where(bias) +
        "/" + std::to_string(bias_len) + " -> " + where(out) + " " + dt(out_dtype));
  }

  GroupedGemmHandle prepare_grouped_gemm(const GroupedGemmShape& s,
                                         const std::string& name) override {
    log("prepare_grouped_gemm '" + name + "' " + grouped_form_name(s.form) + " " +
        grouped_path_name(s.path) + " groups=" + std::to_string(s.groups) +
        " extent=" + std::to_string(s.extent) + " m=" + std::to_string(s.m) +
        " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) + (s.lhs_trans ? " lhs^T" : "") +
        (s.rhs_trans ? " rhs^T" : "") + " " + dt(s.in_dtype) + "/" + dt(s.rhs_dtype) + " -> " +
        dt(s.out_dtype) + (s.bias ? " bias" : "") + (s.scaled ? " scaled" : ""));
    return ++grouped_handles_;
  }
  void release_grouped_gemm(GroupedGemmHandle) noexcept override {}
  /// One line for the call (its sizes as the host reads them), then the loop's calls. Sizes
  /// only in backend memory (shape.device_sizes) are not readable here: the line says so and
  /// no loop runs.
  bool grouped_gemm(const GroupedGemmTask& t, int stream) override {
    std::string sizes = t.host_sizes == nullptr ? "?" : "";
    for (int64_t g = 0; t.host_sizes != nullptr && g < t.shape.groups; ++g) {
      sizes += (g ? "," : "") + std::to_string(t.host_sizes[g]);
    }
    log("grouped_gemm s" + std::to_string(stream) + " #" + std::to_string(t.handle) + " sizes=[" +
        sizes + "] host_sizes=" + where(t.host_sizes) + " sizes=" + where(t.sizes) +
        " lhs=" + where(t.lhs) + " rhs=" + where(t.rhs) + " out=" + where(t.out) +
        " bias=" + where(t.bias) + " scale_inv=" + where(t.lhs_scale_inv) + "/" +
        where(t.rhs_scale_inv) + " stride=" + std::to_string(t.scale_stride) + " '" +
        (t.label != nullptr ? t.label : "") + "'");
    if (t.host_sizes != nullptr) run_grouped_loop(*this, t, stream);
    return true;
  }

  void amax(const void* src, DType dtype, int64_t count, float* amax, int stream) override {
    log("amax s" + std::to_string(stream) + " " + where(src) + " " + dt(dtype) +
        " count=" + std::to_string(count) + " -> " + where(amax));
  }
  void all_reduce_max(float* buf, int count, int stream, const char* label) override {
    log("all_reduce_max s" + std::to_string(stream) + " " + where(buf) +
        " count=" + std::to_string(count) + " '" + (label != nullptr ? label : "") + "'");
  }
  void update_scale(const ScaleUpdate& u, int stream) override {
    log("update_scale s" + std::to_string(stream) + " " +
        (u.rule == ScaleRule::kDelayed ? "delayed"
         : u.rule == ScaleRule::kNvfp4 ? "nvfp4"
                                       : "current") +
        " state=" + where(u.state) + " amax=" + where(u.amax) + " history=" +
        std::to_string(u.recipe.amax_history_len) + " margin=" + std::to_string(u.recipe.margin));
  }
  void elementwise(const ElementwiseTask& t, int stream) override {
    log("elementwise s" + std::to_string(stream) + " task " + std::to_string(t.index()));
  }
  void quantize(const QuantizeTask& t, int stream) override {
    log("quantize s" + std::to_string(stream) + " " + std::to_string(t.rows) + "x" +
        std::to_string(t.cols) + " " + dt(t.src_dtype) + " -> " + dt(t.format) +
        (t.transpose ? " transposed" : "") + " " + where(t.src) + " -> " + where(t.dst) +
        " state=" + where(t.state) + " blocks=" + where(t.block_scale) +
        (t.amax != nullptr ? " amax=" + where(t.amax) : "") + " '" +
        (t.label != nullptr ? t.label : "") + "'");
  }

  ExchangeToken start_exchange(Group over_group, std::span<const Exchange> group,
                               int after_stream) override {
    validate_exchange_group(group, group_rank(over_group), group_size(over_group),
                            "recording backend");
    std::string s =
        "exchange #" + std::to_string(tokens_) + " after s" + std::to_string(after_stream) + ":";
    for (const Exchange& x : group) {
      posted_.push_back({x.send_peer, x.recv_peer, x.send_offset, x.recv_offset, x.bytes, x.src,
                         static_cast<int>(tokens_), over_group});
      s += " {" + where(x.src) + " " + std::to_string(x.bytes) + " -> rank " +
           std::to_string(x.send_peer) + "@" + std::to_string(x.send_offset) + ", rank " +
           std::to_string(x.recv_peer) + " -> @" + std::to_string(x.recv_offset) + " '" +
           (x.label != nullptr ? x.label : "") + "'}";
    }
    log(s + over(over_group));
    return tokens_++;
  }
  void wait_exchange(ExchangeToken token, int stream) override {
    log("wait #" + std::to_string(token) + " s" + std::to_string(stream));
  }

  void all_gather(Group group, const void* src, void* dst, size_t bytes_per_rank, int stream,
                  const char* label) override {
    log("all_gather s" + std::to_string(stream) + " " + where(src) + " -> " + where(dst) + " " +
        std::to_string(bytes_per_rank) + " '" + (label != nullptr ? label : "") + "'" +
        over(group));
  }
  void reduce_scatter(Group group, const void* src, void* dst, DType dtype, int64_t count_per_rank,
                      int stream, const char* label) override {
    log("reduce_scatter s" + std::to_string(stream) + " " + where(src) + " -> " + where(dst) + " " +
        dt(dtype) + " count=" + std::to_string(count_per_rank) + " '" +
        (label != nullptr ? label : "") + "'" + over(group));
  }
  void all_reduce(Group group, void* buf, DType dtype, int64_t count, int stream,
                  const char* label) override {
    log("all_reduce s" + std::to_string(stream) + " " + where(buf) + " " + dt(dtype) + " count=" +
        std::to_string(count) + " '" + (label != nullptr ? label : "") + "'" + over(group));
  }
  // The golden programs were recorded before groups: tp, every collective GEMM's group, is
  // left unsaid so they stay byte-identical; any other group is named.
  static std::string over(Group g) {
    return g == Group::kTp ? std::string() : std::string(" over ") + group_name(g);
  }

  void fork_streams() override { log("fork"); }
  void join_streams(int stream) override { log("join s" + std::to_string(stream)); }
  void after_external(void*) override { log("after external"); }
  void external_after(void*) override { log("external after"); }
  void synchronize() override { log("synchronize"); }
  void reserve_collectives(Group, size_t) override {}
  bool is_capturing(void*) const override { return false; }
  void begin_capture() override { log("begin capture"); }
  void end_capture() noexcept override { log("end capture"); }
  bool capturing() const override { return false; }
  int64_t capture_graph(void*, const std::function<void()>& issue) override {
    log("capture graph");
    issue();
    return 0;
  }
  void replay_graph(int64_t, void*) override { log("replay graph"); }
  void release_graph(int64_t) noexcept override {}
  double time_ms(const std::function<void()>& body) override {
    body();
    return 0.0;
  }
  void set_tracing(bool) override {}
  bool tracing() const override { return false; }
  std::vector<TraceSpan> take_trace() override { return {}; }

  /// The symmetric ring's memory (null before the engine allocates it).
  char* ring() const {
    for (const Region& r : regions_) {
      if (r.name == "ring") return r.data.get();
    }
    return nullptr;
  }

  /// "NAME+OFFSET" of the region `p` points into; "-" for null; "?" outside every region (the
  /// engine's host workspace, for one).
  std::string where(const void* p) const {
    if (p == nullptr) return "-";
    const auto* c = static_cast<const char*>(p);
    for (const Region& r : regions_) {
      if (c >= r.data.get() && c <= r.data.get() + r.bytes) {
        return r.name + "+" + std::to_string(c - r.data.get());
      }
    }
    return "?";
  }

 private:
  struct Region {
    std::string name;
    std::unique_ptr<char[]> data;
    size_t bytes = 0;
  };
  static std::string dt(DType t) { return std::string(dtype_name(t)); }
  void log(std::string s) { calls_.push_back(std::move(s)); }

  int tp_, rank_, streams_, fsdp_, fsdp_rank_;
  int workspaces_ = 0;
  GroupedGemmHandle grouped_handles_ = 0;
  int64_t copies_to_host_ = 0;
  ExchangeToken tokens_ = 0;
  std::vector<Region> regions_;
  std::vector<std::string> calls_;
  std::vector<Posted> posted_;
};

}  // namespace cgemm::testing
