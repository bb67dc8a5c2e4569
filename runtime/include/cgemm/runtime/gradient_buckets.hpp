#pragma once
// The data-parallel gradient all-reduce of a training step, bucketed and started as gradients
// become ready, so that it overlaps the rest of the backward pass (issue 24 item 2; PyTorch
// DistributedDataParallel's Reducer does the same: parameters are grouped into buckets in the
// reverse order of their registration, about the order in which the backward produces their
// gradients, and each bucket's all-reduce starts as soon as its last gradient is ready).
//
// A round (one training step):
//   for each gradient, as the backward produces it:  buckets.ready(slot, grad, dtype);
//   buckets.finish();                                  // waits every bucket
//   buckets.summed(slot)                               // the dp-summed gradient, fp32
//
// Slots and buckets. A slot is one parameter's local gradient on this rank (`count` elements;
// with tensor parallelism, its tp shard). Slots are packed into buckets in the order given
// (slot 0 first); a bucket closes when adding the next slot would make it pass `bucket_bytes`
// bytes of fp32 (4 bytes a value), so a slot larger than `bucket_bytes` is a bucket of its own.
// A bucket also closes before it would pass INT_MAX values (MPI's int count), so buckets hold at
// most INT_MAX values. Pass the slots in the order the backward makes them ready (the last
// layer's first, as DDP) so each bucket fills early and its all-reduce starts early.
// DDP's default bucket is 25 MiB (bucket_cap_mb).
//
// Communication. A planner of reduction programs on the dp group (Group::kDp), run by the engine
// like every collective GEMM's: all buckets lie in one fp32 buffer of backend memory. ready()
// runs a one-op program that converts the gradient into its place in the bucket (a partial
// sum of one part, on stream 0, after the work that made the gradient); the slot that completes
// a bucket also runs the bucket's program: later streams fork from stream 0, then one
// all-reduce (Backend::all_reduce over dp, fp32 sum) on the last compute stream, so it overlaps
// the rest of the backward on the others. finish() runs a join: stream 0 waits for every
// all-reduce. On the CUDA backend all of it is stream-ordered device work (NCCL, or the copy
// engines where ranks share a GPU): no copy to the host and no host wait, per gradient or per
// round. On the CPU backend every call runs when issued: the all-reduce is an MPI_Allreduce over
// the dp communicator when the bucket completes. With a dp group of one rank nothing is
// communicated: summed() is the input in fp32. Sums are fp32, in the transport's order of
// additions (NCCL's or MPI's; the copy engines' in rank order).
//
// Ordering rule. Starting a bucket is a collective call over dp, and MPI requires the collectives
// of a communicator to be called in the same order on all its ranks. So every dp rank must
// construct GradientBuckets with the same slots and bucket_bytes, and call ready() for the same
// slots in the same order each round (any order, as long as it is the same on every rank: then
// buckets complete, and start, in the same order). A rank that departs from it makes wrong sums
// or a wait that the watchdog ends, naming the bucket's all-reduce and the dp group.
//
// Errors (cgemm::Error, with the slot's index and name; the object is unchanged by a refused
// call): bucket_bytes 0, a negative count, a slot of more than INT_MAX values or duplicate names
// (constructor); ready() of an unknown slot, of a slot already ready this round, with a dtype
// other than float32/bfloat16/float16, or with a null gradient of count > 0; summed() of a slot
// whose bucket has not been finished since it was last written; finish() when a slot was not
// ready() this round (after joining the buckets that did start; the next round starts clean);
// a failed backend call (its message).
//
// Thread safety: none; one thread calls every member, the thread that makes the job's MPI calls.
// Lifetime: the backend outlives the object; destruction waits for the backend's work (its
// buffer may be read by an all-reduce in flight).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cgemm/core/dtype.hpp"
#include "cgemm/runtime/backend.hpp"

namespace cgemm {

/// A parameter's local gradient: a name for messages and reports, its elements on this rank.
struct GradientSlot {
  std::string name;
  int64_t count = 0;
};

class GradientBuckets {
 public:
  /// Over `be`'s dp group (no communication here: the backend made its transports). `be` holds
  /// the gradients given to ready() and the buckets, and must outlive this object.
  /// `bucket_bytes` >= 1: fp32 bytes per bucket. Allocates the buckets (NaN until written).
  GradientBuckets(Backend& be, std::vector<GradientSlot> slots, size_t bucket_bytes);
  /// Waits for the backend's work (Backend::synchronize: an all-reduce in flight may still
  /// write the buckets; the watchdog ends a wait for a peer that never joins), then frees them.
  /// Never throws.
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  /// Slot `slot`'s gradient is complete in backend memory `grad` (`dtype`, the slot's `count`
  /// elements) once the work issued so far on stream 0 has run: converts it, as fp32, into its
  /// bucket (on stream 0); when it is the bucket's last slot to be ready this round, starts the
  /// bucket's all-reduce over dp. Each slot once per round. No host wait.
  void ready(int slot, const void* grad, DType dtype);
  /// Orders later work on stream 0 after every started bucket's all-reduce (no host wait),
  /// checks every slot was ready() this round (else cgemm::Error naming the missing ones), and
  /// starts the next round. After a finish() that threw, only the buckets that started that
  /// round hold sums (summed() of the others throws).
  void finish();
  /// After finish(): slot `slot`'s gradient summed over dp, fp32, its `count` values in backend
  /// memory, for work issued on stream 0 after finish(). The memory is this object's and is
  /// rewritten by the next ready() of a slot of the same bucket.
  const float* summed(int slot) const;

  size_t num_slots() const { return slots_.size(); }
  const GradientSlot& slot(int slot) const;
  size_t num_buckets() const { return buckets_.size(); }
  /// The dp group's size (1: nothing is communicated).
  int dp_size() const { return dp_size_; }
  /// The slots of bucket `bucket`, in the order they were declared.
  const std::vector<int>& bucket_slots(size_t bucket) const;
  /// The bucket of slot `slot`.
  size_t bucket_of(int slot) const;
  /// fp32 values in bucket `bucket` (x 4 for its bytes).
  int64_t bucket_count(size_t bucket) const;
  /// One line per bucket, for a report: "bucket 0: 43 values (172 bytes): W2, b2".
  std::string describe() const;
  /// Rounds finished so far (a finish() that threw counts too).
  int64_t rounds() const { return round_; }

 private:
  struct Bucket {
    std::vector<int> slots;
    int64_t count = 0;     // fp32 values
    size_t offset = 0;     // its first value's byte in the buffer
    int pending = 0;       // slots not ready yet this round
    bool started = false;  // its all-reduce started this round (and not yet joined by finish)
    bool summed = false;   // it holds the last finished round's sums
  };
  struct Place {
    size_t bucket = 0;
    size_t offset = 0;  // in the bucket's values
  };
  struct Programs;  // the reduction programs (gradient_buckets.cpp)

  void check_slot(int slot, const char* call) const;
  std::string slot_label(int slot) const;
  std::string bucket_label(size_t bucket) const;

  Backend& be_;
  int dp_size_ = 1;
  std::vector<GradientSlot> slots_;
  size_t bucket_bytes_ = 0;
  std::vector<Bucket> buckets_;
  std::vector<Place> places_;  // by slot
  std::vector<bool> ready_;    // by slot, this round
  float* values_ = nullptr;    // every bucket's values, backend memory
  std::unique_ptr<Programs> programs_;
  int64_t round_ = 0;
};

}  // namespace cgemm
