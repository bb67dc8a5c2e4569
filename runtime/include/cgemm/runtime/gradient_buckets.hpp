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
// Communication. Each bucket is one host buffer of fp32 values; ready() copies the gradient there
// (Backend::copy_to_host, which waits for the backend's issued work, then converts to fp32), and
// the slot that completes a bucket starts MPI_Iallreduce(MPI_IN_PLACE, SUM, MPI_FLOAT) on it over
// a duplicate of `dp_comm` (so the buckets never match a collective the caller makes on dp_comm).
// MPI moves a non-blocking collective only inside MPI calls: on the CPU backend the MPI calls of
// the following layers' backward GEMMs (their TP exchanges) drive it, and every ready() also
// calls MPI_Test on the buckets in flight. On the CUDA backend the copy to the host synchronizes
// the device at every ready() (a first version: the sums are host-side and fp32 either way). With a
// dp_comm of size 1 nothing is communicated: summed() is the input in fp32. Sums are fp32 in MPI's
// order of additions (not fixed across MPI libraries).
//
// Ordering rule. Starting a bucket is a collective call over dp, and MPI requires the collectives
// of a communicator to be called in the same order on all its ranks. So every dp rank must
// construct GradientBuckets with the same slots and bucket_bytes, and call ready() for the same
// slots in the same order each round (any order, as long as it is the same on every rank: then
// buckets complete, and start, in the same order). A rank that departs from it makes wrong sums
// or a wait that the watchdog ends, naming the bucket.
//
// Errors (cgemm::Error, with the slot's index and name; the object is unchanged by a refused
// call): bucket_bytes 0, a negative count, a slot of more than INT_MAX values or duplicate names
// (constructor); ready() of an unknown slot, of a slot already ready this round, with a dtype
// other than float32/bfloat16/float16, or with a null gradient of count > 0; summed() of a slot
// whose bucket has not been finished since it was last written; finish() when a slot was not
// ready() this round (after waiting the buckets that did start; the next round starts clean);
// a failed MPI call (check_mpi's message).
//
// Thread safety: none; one thread calls every member, the thread that makes the job's MPI calls.
// Lifetime: construction is collective over dp_comm (MPI_Comm_dup) and destruction frees the
// duplicate: both must happen between MPI_Init and MPI_Finalize.

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <span>
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
  /// Collective over `dp_comm` (duplicates it when its size is above 1). `be` holds the gradients
  /// given to ready() and must outlive this object. `bucket_bytes` >= 1: fp32 bytes per bucket.
  GradientBuckets(Backend& be, MPI_Comm dp_comm, std::vector<GradientSlot> slots,
                  size_t bucket_bytes);
  /// Waits for every bucket still in flight (each wait under a watchdog::WaitScope naming it, so
  /// the watchdog ends the job if a peer never joins), then frees the duplicate communicator.
  /// Waiting is the only way to release a bucket's buffer: MPI forbids MPI_Cancel and
  /// MPI_Request_free on a non-blocking collective's request. So an error thrown mid-round on
  /// this rank alone leaves the destructor waiting for its started buckets: the peers complete
  /// them when they reach finish(), or the watchdog ends the job. Never throws; MPI errors of the
  /// waits are dropped. Does nothing with MPI once MPI_Finalize has run.
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  /// Slot `slot`'s gradient is complete in backend memory `grad` (`dtype`, the slot's `count`
  /// elements): copies it, as fp32, into its bucket's buffer; when it is the bucket's last slot
  /// to be ready this round, starts the bucket's all-reduce. Then tests the buckets in flight
  /// (MPI_Test) to let MPI progress them. Each slot once per round.
  void ready(int slot, const void* grad, DType dtype);
  /// Waits every started bucket (each under a watchdog::WaitScope naming the bucket, its slots
  /// and the round), checks every slot was ready() this round (else cgemm::Error naming the
  /// missing ones), and starts the next round. After a finish() that threw, only the buckets
  /// that started that round hold sums (summed() of the others throws).
  void finish();
  /// After finish(): slot `slot`'s gradient summed over dp, fp32, its `count` values. The memory
  /// is this object's and stays valid until the next ready() of a slot of the same bucket.
  std::span<const float> summed(int slot) const;

  size_t num_slots() const { return slots_.size(); }
  const GradientSlot& slot(int slot) const;
  size_t num_buckets() const { return buckets_.size(); }
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
    std::vector<float> values;  // the slots' gradients, packed in slot order
    int pending = 0;            // slots not ready yet this round
    MPI_Request request = MPI_REQUEST_NULL;
    bool started = false;  // its all-reduce started this round (and not yet waited by finish)
    bool summed = false;   // values hold the last finished round's sums
  };
  struct Place {
    size_t bucket = 0;
    size_t offset = 0;  // in the bucket's values
  };

  void check_slot(int slot, const char* call) const;
  std::string slot_label(int slot) const;
  std::string bucket_label(size_t bucket) const;
  void start(size_t bucket);
  void wait(size_t bucket);
  void test_in_flight();

  Backend& be_;
  MPI_Comm comm_ = MPI_COMM_NULL;  // the duplicate of dp_comm; null when dp is 1
  int dp_size_ = 1;
  std::string peers_;  // "world ranks 0, 2": dp_comm's ranks, for the watchdog's line
  std::vector<GradientSlot> slots_;
  size_t bucket_bytes_ = 0;
  std::vector<Bucket> buckets_;
  std::vector<Place> places_;  // by slot
  std::vector<bool> ready_;    // by slot, this round
  std::vector<char> staging_;  // a gradient in its own dtype, before the conversion
  int64_t round_ = 0;
};

}  // namespace cgemm
