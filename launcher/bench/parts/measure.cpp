// What the studies share: interleaved timing, the study names, the torch.mm CSV.

#include <algorithm>

#include "bench/csv_file.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/float8.hpp"
#include "common/job.hpp"
#include "parts.hpp"

namespace cgemm::launcher::parts {

std::vector<double> interleaved_medians(Backend& be, const std::vector<std::function<void()>>& fns,
                                        int warmup, int iterations) {
  for (int i = 0; i < warmup; ++i) {
    for (const auto& f : fns) f();
  }
  std::vector<std::vector<double>> t(fns.size());
  for (int i = 0; i < iterations; ++i) {
    for (size_t f = 0; f < fns.size(); ++f) t[f].push_back(be.time_ms(fns[f]));
  }
  std::vector<double> out;
  for (auto& v : t) out.push_back(median(v));
  return out;
}

ScaleBuffers::ScaleBuffers(Backend& be, int history) : be_(be) {
  const int64_t floats = ScaleStateLayout::floats(history);
  std::vector<float> init(static_cast<size_t>(floats + 1), 0.0f);
  init[ScaleStateLayout::kScale] = init[ScaleStateLayout::kScaleInv] = 1.0f;
  state_ = static_cast<float*>(be.allocate(init.size() * sizeof(float)));
  be.copy_from_host(state_, init.data(), init.size() * sizeof(float));
  amax_ = state_ + floats;  // the slot after the state
}

ScaleBuffers::~ScaleBuffers() { be_.release(state_); }

namespace {

// The bf16 copy a quantized operand is made from, released once the quantizations ran.
class Scratch {
 public:
  Scratch(Backend& be, size_t bytes) : be_(be), p_(bytes > 0 ? be.allocate(bytes) : nullptr) {}
  ~Scratch() {
    if (p_ == nullptr) return;
    try {
      be_.synchronize();  // the quantizations read it
    } catch (...) {
      // A failed device reports at the next call; the memory goes back all the same.
    }
    be_.release(p_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return p_; }

 private:
  Backend& be_;
  void* p_;
};

}  // namespace

Operands::Operands(Backend& be, const ChunkedGemm& g, size_t l2_bytes, const QuantizationDesc& q)
    : be_(be) {
  constexpr size_t kBf16 = 2;  // the operands before quantization
  const GemmTask& w = g.whole;
  const bool quantized = w.quantized();
  lhs_size_ = dtype_size(w.in_dtype);
  out_size_ = dtype_size(w.out_dtype);
  const size_t lhs_bytes = static_cast<size_t>(g.lhs_elems) * lhs_size_;
  const size_t sets = std::max<size_t>(2, (2 * l2_bytes + lhs_bytes - 1) / lhs_bytes);
  const int history = q.mode == ScalingMode::kDelayedTensorScaling ? q.recipe.amax_history_len : 0;
  try {
    Scratch src(be,
                quantized ? static_cast<size_t>(std::max(g.lhs_elems, g.rhs_elems)) * kBf16 : 0);
    for (size_t i = 0; i < sets; ++i) {
      lhs_.push_back(be.allocate(lhs_bytes));
      void* fill = quantized ? src.get() : lhs_.back();
      be.fill_normal(fill, DType::kBFloat16, {g.lhs_elems}, {g.lhs_elems}, {0}, 11 + i, 1.0f);
      if (quantized) {
        lhs_scales_.push_back(std::make_unique<ScaleBuffers>(be, history));
        quantize(q, w.in_dtype, fill, g.lhs_elems / w.k, w.k, false, lhs_.back(),
                 *lhs_scales_.back());
      }
    }
    rhs_ = be.allocate(static_cast<size_t>(g.rhs_elems) * dtype_size(w.rhs_type()));
    void* fill = quantized ? src.get() : rhs_;
    be.fill_normal(fill, DType::kBFloat16, {g.rhs_elems}, {g.rhs_elems}, {0}, 7, 0.02f);
    if (quantized) {
      // The bf16 rhs [k, n] into the [n, k] a Hopper FP8 GEMM contracts on its last dim.
      rhs_scale_ = std::make_unique<ScaleBuffers>(be, history);
      quantize(q, w.rhs_type(), fill, w.k, w.n, true, rhs_, *rhs_scale_);
    }
    out_ = be.allocate(static_cast<size_t>(g.out_elems) * out_size_);
  } catch (...) {
    release_all();
    throw;
  }
}

void Operands::quantize(const QuantizationDesc& q, DType format, const void* src, int64_t rows,
                        int64_t cols, bool transpose, void* dst, ScaleBuffers& scale) {
  // As runtime/src/quantization/quantization.cpp's current scaling runs it on one rank: amax,
  // scale, cast.
  be_.amax(src, DType::kBFloat16, rows * cols, scale.amax(), 0);
  ScaleUpdate u;
  u.state = scale.state();
  u.amax = scale.amax();
  u.rule = q.mode == ScalingMode::kDelayedTensorScaling ? ScaleRule::kDelayed : ScaleRule::kCurrent;
  u.recipe = q.recipe;
  u.fp8_max = numeric::fp8_max(format);
  be_.update_scale(u, 0);
  QuantizeTask t;
  t.rows = rows;
  t.cols = cols;
  t.src_dtype = DType::kBFloat16;
  t.src = src;
  t.format = format;
  t.dst = dst;
  t.transpose = transpose;
  t.state = scale.state();
  t.label = "quantize";
  be_.quantize(t, 0);
}

Operands::~Operands() { release_all(); }

void Operands::release_all() noexcept {
  for (void* p : lhs_) be_.release(p);
  lhs_.clear();
  lhs_scales_.clear();
  rhs_scale_.reset();
  if (rhs_ != nullptr) be_.release(rhs_);
  if (out_ != nullptr) be_.release(out_);
  rhs_ = out_ = nullptr;
}

Operands::Lhs Operands::next_lhs() {
  const size_t i = turn_++ % lhs_.size();
  return {static_cast<const char*>(lhs_[i]),
          lhs_scales_.empty() ? nullptr : lhs_scales_[i]->scale_inv()};
}

GemmTask Operands::bind(const GemmTask& t, const Lhs& lhs, int64_t lhs_offset,
                        int64_t out_offset) const {
  GemmTask b = t;
  b.lhs = lhs.data + static_cast<size_t>(lhs_offset) * lhs_size_;
  b.rhs = rhs_;
  b.out = static_cast<char*>(out_) + static_cast<size_t>(out_offset) * out_size_;
  if (b.quantized()) {
    b.lhs_scale_inv = lhs.scale_inv;
    b.rhs_scale_inv = rhs_scale_->scale_inv();
  }
  return b;
}

CopyBuffers::CopyBuffers(Backend& be, size_t bytes, size_t l2_bytes) : be_(be) {
  const size_t sets = std::max<size_t>(2, (2 * l2_bytes + bytes - 1) / std::max<size_t>(bytes, 1));
  try {
    for (size_t i = 0; i < sets; ++i) {
      src_.push_back(be.allocate(bytes));
      dst_.push_back(be.allocate(bytes));
    }
  } catch (...) {
    release_all();
    throw;
  }
}

CopyBuffers::~CopyBuffers() { release_all(); }

void CopyBuffers::release_all() noexcept {
  for (void* p : src_) be_.release(p);
  for (void* p : dst_) be_.release(p);
  src_.clear();
  dst_.clear();
}

std::pair<void*, void*> CopyBuffers::next() {
  const size_t i = turn_++ % src_.size();
  return {dst_[i], src_[i]};
}

std::string gemm_text(const GemmTask& t) {
  std::string s = std::to_string(t.m) + " x " + std::to_string(t.n) + " x " + std::to_string(t.k);
  return t.batch > 1 ? std::to_string(t.batch) + " x " + s : s;
}

const std::vector<std::string>& study_names() {
  static const std::vector<std::string> names{"chunking", "interference", "copy_bandwidth",
                                              "quantize", "grouped",      "grouped_fp8"};
  return names;
}

std::string torch_key(const std::string& shape, const std::string& collective, int tp, int chunks) {
  return shape + "/" + collective + "/tp" + std::to_string(tp) + "/c" + std::to_string(chunks);
}

TorchChunkTable read_torch_chunks(const std::string& path) {
  const CsvFile csv = read_csv("--torch_chunks", path);
  TorchChunkTable out;
  // torch_scaled_mm.py's file: its FP8 columns (its whole_ms twin is fp8_ms, use_fast_accum off
  // as its chunks); torch_chunking.py's otherwise.
  const bool fp8 = csv.has("fp8_chunks_ms");
  if (fp8) {
    out.dtype = "e4m3 x e4m3";
    out.peer = "torch._scaled_mm";
  }
  const size_t c_case = csv.column("case"), c_coll = csv.column("collective"),
               c_tp = csv.column("tp"), c_chunks = csv.column("chunks"),
               c_whole = csv.column(fp8 ? "fp8_ms" : "whole_ms"),
               c_part = csv.column(fp8 ? "fp8_chunks_ms" : "chunks_ms");
  for (size_t i = 0; i < csv.rows.size(); ++i) {
    const std::vector<std::string>& v = csv.rows[i];
    try {
      if (v.size() < csv.header.size()) throw Error("too few fields");
      out.rows[torch_key(v[c_case], v[c_coll], std::stoi(v[c_tp]), std::stoi(v[c_chunks]))] =
          TorchChunks{std::stod(v[c_whole]), std::stod(v[c_part])};
    } catch (const std::exception& e) {
      throw Error("--torch_chunks: '" + path + "' data row " + std::to_string(i + 1) + ": " +
                  e.what());
    }
  }
  return out;
}

}  // namespace cgemm::launcher::parts
