// What the studies share: interleaved timing, the study names, the torch.mm CSV.

#include <algorithm>

#include "cgemm/core/error.hpp"
#include "csv_file.hpp"
#include "job.hpp"
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

Operands::Operands(Backend& be, const ChunkedGemm& g, size_t l2_bytes) : be_(be) {
  constexpr size_t kBytes = 2;  // bf16
  const size_t lhs_bytes = static_cast<size_t>(g.lhs_elems) * kBytes;
  const size_t sets = std::max<size_t>(2, (2 * l2_bytes + lhs_bytes - 1) / lhs_bytes);
  try {
    for (size_t i = 0; i < sets; ++i) {
      lhs_.push_back(be.allocate(lhs_bytes));
      be.fill_normal(lhs_.back(), DType::kBFloat16, {g.lhs_elems}, {g.lhs_elems}, {0}, 11 + i,
                     1.0f);
    }
    rhs_ = be.allocate(static_cast<size_t>(g.rhs_elems) * kBytes);
    be.fill_normal(rhs_, DType::kBFloat16, {g.rhs_elems}, {g.rhs_elems}, {0}, 7, 0.02f);
    out_ = be.allocate(static_cast<size_t>(g.out_elems) * kBytes);
  } catch (...) {
    release_all();
    throw;
  }
}

Operands::~Operands() { release_all(); }

void Operands::release_all() noexcept {
  for (void* p : lhs_) be_.release(p);
  lhs_.clear();
  if (rhs_ != nullptr) be_.release(rhs_);
  if (out_ != nullptr) be_.release(out_);
  rhs_ = out_ = nullptr;
}

const char* Operands::next_lhs() { return static_cast<const char*>(lhs_[turn_++ % lhs_.size()]); }

GemmTask Operands::bind(const GemmTask& t, const char* lhs, int64_t lhs_offset,
                        int64_t out_offset) const {
  GemmTask b = t;
  b.lhs = lhs + static_cast<size_t>(lhs_offset) * 2;
  b.rhs = rhs_;
  b.out = static_cast<char*>(out_) + static_cast<size_t>(out_offset) * 2;
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
                                              "quantize"};
  return names;
}

std::string torch_key(const std::string& shape, const std::string& collective, int tp, int chunks) {
  return shape + "/" + collective + "/tp" + std::to_string(tp) + "/c" + std::to_string(chunks);
}

TorchChunkTable read_torch_chunks(const std::string& path) {
  const CsvFile csv = read_csv("--torch_chunks", path);
  const size_t c_case = csv.column("case"), c_coll = csv.column("collective"),
               c_tp = csv.column("tp"), c_chunks = csv.column("chunks"),
               c_whole = csv.column("whole_ms"), c_part = csv.column("chunks_ms");
  TorchChunkTable out;
  for (size_t i = 0; i < csv.rows.size(); ++i) {
    const std::vector<std::string>& v = csv.rows[i];
    try {
      if (v.size() < csv.header.size()) throw Error("too few fields");
      out[torch_key(v[c_case], v[c_coll], std::stoi(v[c_tp]), std::stoi(v[c_chunks]))] =
          TorchChunks{std::stod(v[c_whole]), std::stod(v[c_part])};
    } catch (const std::exception& e) {
      throw Error("--torch_chunks: '" + path + "' data row " + std::to_string(i + 1) + ": " +
                  e.what());
    }
  }
  return out;
}

}  // namespace cgemm::launcher::parts
