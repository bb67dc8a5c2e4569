// The bucketed data-parallel gradient all-reduce (gradient_buckets.hpp).

#include "cgemm/runtime/gradient_buckets.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <set>
#include <utility>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/convert.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/watchdog.hpp"

namespace cgemm {

namespace {

constexpr size_t kFloatBytes = sizeof(float);

bool is_gradient_dtype(DType t) {
  return t == DType::kFloat32 || t == DType::kBFloat16 || t == DType::kFloat16;
}

// "world ranks 0, 2": the ranks of `comm` as world ranks, for the watchdog's line.
std::string describe_peers(MPI_Comm comm, int size) {
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  check_mpi(MPI_Comm_group(comm, &group), "MPI_Comm_group(dp)");
  check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group(world)");
  std::vector<int> ranks(static_cast<size_t>(size)), in_world(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) ranks[static_cast<size_t>(i)] = i;
  const int rc = MPI_Group_translate_ranks(group, size, ranks.data(), world, in_world.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  check_mpi(rc, "MPI_Group_translate_ranks(dp to world)");
  std::string out = size == 1 ? "world rank " : "world ranks ";
  for (int i = 0; i < size; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(in_world[static_cast<size_t>(i)]);
  }
  return out;
}

}  // namespace

GradientBuckets::GradientBuckets(Backend& be, MPI_Comm dp_comm, std::vector<GradientSlot> slots,
                                 size_t bucket_bytes)
    : be_(be), slots_(std::move(slots)), bucket_bytes_(bucket_bytes) {
  // Every check comes before the collective MPI_Comm_dup: the arguments are the same on every dp
  // rank (the ordering rule), so either every rank throws here or none does.
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
      throw Error(
          "GradientBuckets: " + slot_label(slot) + " has " + std::to_string(slots_[i].count) +
          " elements: more than one MPI_Iallreduce takes (" + std::to_string(INT_MAX) + ")");
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
    open_bytes += bytes;
    open_count += count;
  }
  for (Bucket& b : buckets_) {
    int64_t count = 0;
    for (int s : b.slots) count += slots_[static_cast<size_t>(s)].count;
    // NaN until written: a value ready() never wrote shows in every sum it reaches.
    b.values.assign(static_cast<size_t>(count), std::nanf(""));
    b.pending = static_cast<int>(b.slots.size());
  }
  ready_.assign(slots_.size(), false);

  check_mpi(MPI_Comm_size(dp_comm, &dp_size_), "MPI_Comm_size(dp)");
  if (dp_size_ > 1) {
    peers_ = describe_peers(dp_comm, dp_size_);
    // A communicator of their own: the buckets' non-blocking collectives then never pair with a
    // collective the caller makes on dp_comm while they are in flight.
    check_mpi(MPI_Comm_dup(dp_comm, &comm_), "MPI_Comm_dup(dp)");
  }
}

GradientBuckets::~GradientBuckets() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized != 0) return;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    MPI_Request& r = buckets_[b].request;
    if (r == MPI_REQUEST_NULL) continue;
    // MPI allows neither MPI_Cancel nor MPI_Request_free on a non-blocking collective: wait it,
    // under the watchdog, so its buffer is not freed while MPI may still write it.
    try {
      const watchdog::WaitScope scope([this, b] { return bucket_label(b) + " (at destruction)"; });
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    } catch (...) {
      if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::string GradientBuckets::slot_label(int slot) const {
  return "slot " + std::to_string(slot) + " (" + slots_[static_cast<size_t>(slot)].name + ")";
}

std::string GradientBuckets::bucket_label(size_t bucket) const {
  const Bucket& b = buckets_[bucket];
  std::string names;
  for (int s : b.slots) names += (names.empty() ? "" : ", ") + slots_[static_cast<size_t>(s)].name;
  return "the data-parallel gradient all-reduce of bucket " + std::to_string(bucket) + " of " +
         std::to_string(buckets_.size()) + " (" + names + "; " + std::to_string(b.values.size()) +
         " fp32 values) in round " + std::to_string(round_ + 1) + " over " + peers_;
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
  return static_cast<int64_t>(buckets_[bucket].values.size());
}

std::string GradientBuckets::describe() const {
  std::string out;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& k = buckets_[b];
    out += "bucket " + std::to_string(b) + ": " + std::to_string(k.values.size()) + " values (" +
           std::to_string(k.values.size() * kFloatBytes) + " bytes):";
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
  // No bucket is in flight while one of its slots can be written: a bucket starts only once all
  // its slots are ready, and they stay so until finish() has waited it.
  b.summed = false;
  float* dst = b.values.data() + at.offset;
  if (count > 0) {
    if (dtype == DType::kFloat32) {
      be_.copy_to_host(dst, grad, static_cast<size_t>(count) * kFloatBytes);
    } else {
      staging_.resize(static_cast<size_t>(count) * dtype_size(dtype));
      be_.copy_to_host(staging_.data(), grad, staging_.size());
      convert_to_float(staging_.data(), dtype, dst, count);
    }
  }
  ready_[s] = true;
  if (--b.pending == 0) start(at.bucket);
  test_in_flight();
}

void GradientBuckets::start(size_t bucket) {
  Bucket& b = buckets_[bucket];
  b.started = true;
  if (comm_ == MPI_COMM_NULL || b.values.empty()) return;  // dp 1, or nothing to sum
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, b.values.data(), static_cast<int>(b.values.size()),
                           MPI_FLOAT, MPI_SUM, comm_, &b.request),
            "MPI_Iallreduce(gradient bucket)");
}

void GradientBuckets::test_in_flight() {
  // MPI progresses a non-blocking collective only inside MPI calls; a test is a cheap one.
  for (Bucket& b : buckets_) {
    if (b.request == MPI_REQUEST_NULL) continue;
    int done = 0;
    check_mpi(MPI_Test(&b.request, &done, MPI_STATUS_IGNORE), "MPI_Test(gradient bucket)");
  }
}

void GradientBuckets::wait(size_t bucket) {
  Bucket& b = buckets_[bucket];
  if (b.request != MPI_REQUEST_NULL) {
    const watchdog::WaitScope scope([this, bucket] { return bucket_label(bucket); });
    check_mpi(MPI_Wait(&b.request, MPI_STATUS_IGNORE), "MPI_Wait(gradient bucket)");
  }
  b.started = false;
  b.summed = true;
}

void GradientBuckets::finish() {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (buckets_[b].started) wait(b);
  }
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

std::span<const float> GradientBuckets::summed(int slot) const {
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
  return {b.values.data() + at.offset, static_cast<size_t>(slots_[s].count)};
}

}  // namespace cgemm
