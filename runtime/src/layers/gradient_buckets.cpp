// The bucketed data-parallel gradient all-reduce (gradient_buckets.hpp): reduction programs on
// the dp group, run by the engine (runtime/src/program/engine.hpp) as every collective GEMM's are.

#include "cgemm/runtime/gradient_buckets.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <set>
#include <utility>

#include "cgemm/core/error.hpp"
#include "program/engine.hpp"
#include "program/program.hpp"

namespace cgemm {

namespace {

constexpr size_t kFloatBytes = sizeof(float);

// The gradient dtypes, and a program of each per slot (ready() picks by the call's dtype).
constexpr std::array<DType, 3> kGradientDtypes{DType::kFloat32, DType::kBFloat16, DType::kFloat16};

bool is_gradient_dtype(DType t) {
  return std::find(kGradientDtypes.begin(), kGradientDtypes.end(), t) != kGradientDtypes.end();
}

size_t dtype_slot(DType t) {
  return static_cast<size_t>(std::find(kGradientDtypes.begin(), kGradientDtypes.end(), t) -
                             kGradientDtypes.begin());
}

// Operands of every program: lhs is the gradient a ready() hands in, out the buckets' buffer.
Ref bucket_ref(size_t byte) { return {Operand::kOut, byte}; }

}  // namespace

// What the engine runs: per slot and gradient dtype, the conversion into the bucket; per
// bucket, its all-reduce; and the join of finish().
struct GradientBuckets::Programs {
  explicit Programs(Backend& be) : engine(be, -1) {}  // -1: no CGEMM_TEST_FAULT rank
  Engine engine;
  std::vector<std::array<Program, kGradientDtypes.size()>> to_bucket;  // by slot
  std::vector<Program> all_reduce;                                     // by bucket
  Program join;
};

GradientBuckets::GradientBuckets(Backend& be, std::vector<GradientSlot> slots, size_t bucket_bytes)
    : be_(be), slots_(std::move(slots)), bucket_bytes_(bucket_bytes) {
  // With an fsdp axis the ranks of the fsdp group hold other tokens too: a sum over dp alone
  // would be wrong. FSDP's gradients are reduce-scattered by their GEMM instead
  // (GemmDesc::fsdp_scatter_dim, docs/FSDP.md).
  if (be_.group_size(Group::kFsdp) > 1) {
    throw Error("GradientBuckets: the mesh has an fsdp axis (" +
                std::to_string(be_.group_size(Group::kFsdp)) +
                " ranks), whose ranks hold other tokens as well; GradientBuckets sums over the "
                "dp group only. Reduce-scatter FSDP's weight gradients in their GEMM "
                "(GemmDesc::fsdp_scatter_dim) instead");
  }
  if (bucket_bytes_ == 0) {
    throw Error("GradientBuckets: bucket_bytes 0: a bucket holds at least 1 byte");
  }
  if (slots_.size() > static_cast<size_t>(INT_MAX)) {
    throw Error("GradientBuckets: " + std::to_string(slots_.size()) + " slots: more than an int");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const int slot = static_cast<int>(i);
    if (slots_[i].count < 0) {
      throw Error("GradientBuckets: " + slot_label(slot) + " has count " +
                  std::to_string(slots_[i].count) + ": a count is >= 0 elements");
    }
    if (slots_[i].count > INT_MAX) {
      throw Error("GradientBuckets: " + slot_label(slot) + " has " +
                  std::to_string(slots_[i].count) + " elements: more than one all-reduce takes (" +
                  std::to_string(INT_MAX) + ")");
    }
    if (!names.insert(slots_[i].name).second) {
      throw Error("GradientBuckets: " + slot_label(slot) + ": the name is taken by another slot");
    }
  }

  // Buckets in slot order: close the open bucket when the next slot would pass bucket_bytes (or
  // INT_MAX values); a slot larger than a bucket thus stands alone.
  places_.resize(slots_.size());
  size_t open_bytes = 0;
  int64_t open_count = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const auto count = slots_[i].count;
    const size_t bytes = static_cast<size_t>(count) * kFloatBytes;
    // (No overflow: open_bytes + bytes is at most 4 x the values this rank holds.)
    if (buckets_.empty() || open_bytes + bytes > bucket_bytes_ || count > INT_MAX - open_count) {
      buckets_.emplace_back();
      open_bytes = 0;
      open_count = 0;
    }
    Bucket& b = buckets_.back();
    places_[i] = Place{buckets_.size() - 1, static_cast<size_t>(open_count)};
    b.slots.push_back(static_cast<int>(i));
    b.count += count;
    open_bytes += bytes;
    open_count += count;
  }
  int64_t total = 0;
  for (Bucket& b : buckets_) {
    b.offset = static_cast<size_t>(total) * kFloatBytes;
    b.pending = static_cast<int>(b.slots.size());
    total += b.count;
  }
  ready_.assign(slots_.size(), false);
  dp_size_ = be_.group_size(Group::kDp);

  // The programs, written once. The all-reduce runs on the last compute stream, so the backward
  // GEMMs on stream 0 go on meanwhile; a dp group of one rank moves nothing.
  programs_ = std::make_unique<Programs>(be_);
  const int reduce_stream = be_.num_streams() - 1;
  programs_->to_bucket.resize(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Bucket& b = buckets_[places_[i].bucket];
    const size_t at = b.offset + places_[i].offset * kFloatBytes;
    for (DType t : kGradientDtypes) {
      Program& p = programs_->to_bucket[i][dtype_slot(t)];
      if (slots_[i].count == 0) continue;
      // A sum of one part is the conversion to fp32 (Backend::sum_partials).
      p.ops.push_back(SumOp{.parts = {Ref{Operand::kLhs, 0}},
                            .part_dtype = t,
                            .count = slots_[i].count,
                            .bias = std::nullopt,
                            .bias_len = 0,
                            .out = bucket_ref(at),
                            .out_dtype = DType::kFloat32,
                            .stream = 0});
    }
  }
  for (size_t k = 0; k < buckets_.size(); ++k) {
    Program p;
    if (dp_size_ > 1 && buckets_[k].count > 0) {
      p.ops.push_back(ForkOp{});
      p.ops.push_back(AllReduceOp{.buf = bucket_ref(buckets_[k].offset),
                                  .dtype = DType::kFloat32,
                                  .count = buckets_[k].count,
                                  .stream = reduce_stream,
                                  .label = bucket_label(k),
                                  .group = Group::kDp});
    }
    programs_->all_reduce.push_back(std::move(p));
  }
  programs_->join.ops.push_back(JoinOp{.stream = 0});

  values_ = static_cast<float*>(
      be_.allocate(static_cast<size_t>(std::max<int64_t>(total, 1)) * kFloatBytes));
  // NaN until written: a value ready() never wrote shows in every sum it reaches.
  be_.fill_nan(values_, DType::kFloat32, total);
}

GradientBuckets::~GradientBuckets() {
  try {
    be_.synchronize();
  } catch (...) {
    // The backend reports its failure at its next call; the buffer is released either way.
  }
  be_.release(values_);
}

std::string GradientBuckets::slot_label(int slot) const {
  return "slot " + std::to_string(slot) + " (" + slots_[static_cast<size_t>(slot)].name + ")";
}

std::string GradientBuckets::bucket_label(size_t bucket) const {
  const Bucket& b = buckets_[bucket];
  std::string names;
  for (int s : b.slots) names += (names.empty() ? "" : ", ") + slots_[static_cast<size_t>(s)].name;
  return "the data-parallel gradient all-reduce of bucket " + std::to_string(bucket) + " of " +
         std::to_string(buckets_.size()) + " (" + names + "; " + std::to_string(b.count) +
         " fp32 values)";
}

void GradientBuckets::check_slot(int slot, const char* call) const {
  if (slot < 0 || static_cast<size_t>(slot) >= slots_.size()) {
    throw Error(std::string("GradientBuckets::") + call + ": no slot " + std::to_string(slot) +
                " (" + std::to_string(slots_.size()) + " slots, numbered from 0)");
  }
}

const GradientSlot& GradientBuckets::slot(int slot) const {
  check_slot(slot, "slot");
  return slots_[static_cast<size_t>(slot)];
}

const std::vector<int>& GradientBuckets::bucket_slots(size_t bucket) const {
  if (bucket >= buckets_.size()) {
    throw Error("GradientBuckets::bucket_slots: no bucket " + std::to_string(bucket) + " (" +
                std::to_string(buckets_.size()) + " buckets)");
  }
  return buckets_[bucket].slots;
}

size_t GradientBuckets::bucket_of(int slot) const {
  check_slot(slot, "bucket_of");
  return places_[static_cast<size_t>(slot)].bucket;
}

int64_t GradientBuckets::bucket_count(size_t bucket) const {
  bucket_slots(bucket);  // checks the index
  return buckets_[bucket].count;
}

std::string GradientBuckets::describe() const {
  std::string out;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& k = buckets_[b];
    out += "bucket " + std::to_string(b) + ": " + std::to_string(k.count) + " values (" +
           std::to_string(static_cast<size_t>(k.count) * kFloatBytes) + " bytes):";
    for (size_t i = 0; i < k.slots.size(); ++i) {
      out += (i == 0 ? " " : ", ") + slots_[static_cast<size_t>(k.slots[i])].name;
    }
    out += "\n";
  }
  return out;
}

void GradientBuckets::ready(int slot, const void* grad, DType dtype) {
  check_slot(slot, "ready");
  const auto s = static_cast<size_t>(slot);
  if (ready_[s]) {
    throw Error("GradientBuckets::ready: " + slot_label(slot) + " is ready twice in round " +
                std::to_string(round_ + 1) + " (each slot once per round, then finish())");
  }
  if (!is_gradient_dtype(dtype)) {
    throw Error("GradientBuckets::ready: " + slot_label(slot) + ": dtype " +
                std::string(dtype_name(dtype)) + ": gradients are float32, bfloat16 or float16");
  }
  const int64_t count = slots_[s].count;
  if (grad == nullptr && count > 0) {
    throw Error("GradientBuckets::ready: " + slot_label(slot) + ": null gradient of " +
                std::to_string(count) + " elements");
  }
  const Place& at = places_[s];
  Bucket& b = buckets_[at.bucket];
  // A bucket's all-reduce starts only once all its slots are ready, and finish() joins it before
  // the next round's ready() writes the bucket (stream 0 waits for it).
  b.summed = false;
  if (count > 0) {
    Operands x;
    x.set_input(Operand::kLhs, grad);
    x.set_output(Operand::kOut, values_);
    programs_->engine.run(programs_->to_bucket[s][dtype_slot(dtype)], x, "the dp gradient buckets");
  }
  ready_[s] = true;
  if (--b.pending == 0) {
    b.started = true;
    Operands x;
    x.set_output(Operand::kOut, values_);
    programs_->engine.run(programs_->all_reduce[at.bucket], x, "the dp gradient buckets");
  }
}

void GradientBuckets::finish() {
  bool any = false;
  for (Bucket& b : buckets_) {
    any = any || b.started;
    if (b.started) b.summed = true;
    b.started = false;
  }
  if (any) programs_->engine.run(programs_->join, Operands{}, "the dp gradient buckets");
  std::string missing;
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (!ready_[s]) missing += (missing.empty() ? "" : ", ") + slot_label(static_cast<int>(s));
  }
  const int64_t round = ++round_;
  // The next round starts clean either way; a bucket that did not start holds a partial round.
  std::fill(ready_.begin(), ready_.end(), false);
  for (Bucket& b : buckets_) {
    if (b.pending != 0) b.summed = false;
    b.pending = static_cast<int>(b.slots.size());
  }
  if (!missing.empty()) {
    throw Error("GradientBuckets::finish: round " + std::to_string(round) + ": not ready: " +
                missing + " (every slot must be ready() once per round, on every dp rank)");
  }
}

const float* GradientBuckets::summed(int slot) const {
  check_slot(slot, "summed");
  const auto s = static_cast<size_t>(slot);
  const Place& at = places_[s];
  const Bucket& b = buckets_[at.bucket];
  if (!b.summed) {
    throw Error("GradientBuckets::summed: " + slot_label(slot) + ": its bucket " +
                std::to_string(at.bucket) +
                " holds no finished sum (finish() after every slot's ready(); a ready() of the "
                "bucket's slots starts the next round's)");
  }
  return values_ + b.offset / kFloatBytes + at.offset;
}

}  // namespace cgemm
