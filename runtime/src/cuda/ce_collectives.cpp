// The sequential path's collectives over the copy engines (see sequential_collectives.hpp):
// every rank pushes blocks into the peers' copies of a staging buffer at its own slot, waits
// for the peers' pushes on the calling stream, then copies or sums locally. Sums run in fp32 in
// rank order, so every run (and, for all_reduce, every rank) gets the same bits.

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "device_memory.hpp"
#include "sequential_collectives.hpp"

namespace cgemm::cuda {
namespace {

class CeCollectives final : public SequentialCollectives {
 public:
  CeCollectives(Backend& backend, Group group, Streams& streams, Compute& compute,
                std::string where)
      : backend_(backend),
        group_(group),
        streams_(streams),
        compute_(compute),
        where_(std::move(where)) {}

  void all_gather(const void* src, void* dst, size_t bytes_per_rank, int s,
                  const char* label) override {
    cudaStream_t st = streams_.at(s, "all_gather");
    // Push this rank's block to slot `me` of every peer's staging copy.
    const int tp = backend_.group_size(group_), me = backend_.group_rank(group_);
    char* out = static_cast<char*>(dst);
    if (tp > 1) {
      const SymmetricBuffer& buf = staging(bytes_per_rank * static_cast<size_t>(tp));
      exchange(
          buf, bytes_per_rank, [&](int) { return src; }, s,
          named(label, "all-gather") + " (copy engines)");
      // The peers' blocks only: this rank's slot of the staging buffer was never written, and
      // src may already be dst's own block (an in-place all-gather).
      for (int p = 0; p < tp; ++p) {
        if (p == me) continue;
        const size_t at = static_cast<size_t>(p) * bytes_per_rank;
        copy_async(out + at, static_cast<const char*>(buf.local) + at, bytes_per_rank, st,
                   "all-gather staging", where_);
      }
    }
    copy_async(out + static_cast<size_t>(me) * bytes_per_rank, src, bytes_per_rank, st,
               "all-gather own block", where_);
  }

  void reduce_scatter(const void* src, void* dst, DType dtype, int64_t count_per_rank, int s,
                      const char* label) override {
    static_cast<void>(streams_.at(s, "reduce_scatter"));  // a bad stream fails before any push
    // Block d of every rank goes to slot `me` of rank d's staging copy, then each rank sums its
    // tp blocks.
    const int tp = backend_.group_size(group_), me = backend_.group_rank(group_);
    const size_t block = static_cast<size_t>(count_per_rank) * dtype_size(dtype);
    const char* in = static_cast<const char*>(src);
    std::vector<const void*> parts(static_cast<size_t>(tp));
    parts[static_cast<size_t>(me)] = in + static_cast<size_t>(me) * block;
    if (tp > 1) {
      const SymmetricBuffer& buf = staging(block * static_cast<size_t>(tp));
      exchange(
          buf, block, [&](int to) { return in + static_cast<size_t>(to) * block; }, s,
          named(label, "reduce-scatter") + " (copy engines)");
      for (int p = 0; p < tp; ++p) {
        if (p != me) parts[static_cast<size_t>(p)] = static_cast<char*>(buf.local) + p * block;
      }
    }
    backend_.sum_partials(parts, dtype, count_per_rank, nullptr, 0, dst, dtype, s);
  }

  void all_reduce(void* buf, DType dtype, int64_t count, int s, const char* label) override {
    static_cast<void>(streams_.at(s, "all_reduce"));  // a bad stream fails before any push
    // Every rank's whole buffer to slot `me` of every peer, then the same sum on every rank.
    const int tp = backend_.group_size(group_), me = backend_.group_rank(group_);
    if (tp == 1) return;
    const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
    const SymmetricBuffer& stage = staging(bytes * static_cast<size_t>(tp));
    exchange(
        stage, bytes, [&](int) { return static_cast<const void*>(buf); }, s,
        named(label, "all-reduce") + " (copy engines)");
    std::vector<const void*> parts(static_cast<size_t>(tp));
    for (int p = 0; p < tp; ++p) {
      parts[static_cast<size_t>(p)] =
          p == me ? buf : static_cast<const char*>(stage.local) + static_cast<size_t>(p) * bytes;
    }
    backend_.sum_partials(parts, dtype, count, nullptr, 0, buf, dtype, s);
  }

  void reserve(size_t bytes) override { static_cast<void>(staging(bytes)); }

  void all_reduce_max(float* buf, int count, int s, const char* label) override {
    static_cast<void>(streams_.at(s, "all_reduce_max"));  // a bad stream fails before any push
    const int size = backend_.group_size(group_), me = backend_.group_rank(group_);
    if (size == 1 || count == 0) return;
    const size_t bytes = static_cast<size_t>(count) * sizeof(float);
    const SymmetricBuffer& stage = staging(bytes * static_cast<size_t>(size));
    exchange(
        stage, bytes, [&](int) { return static_cast<const void*>(buf); }, s,
        named(label, "all-reduce max") + " (copy engines)");
    std::vector<const float*> parts(static_cast<size_t>(size));
    for (int p = 0; p < size; ++p) {
      parts[static_cast<size_t>(p)] =
          p == me ? buf
                  : reinterpret_cast<const float*>(static_cast<const char*>(stage.local) +
                                                   static_cast<size_t>(p) * bytes);
    }
    compute_.max_partials(parts, count, buf, s);
  }

 private:
  const SymmetricBuffer& staging(size_t bytes) {
    // Every rank of the group calls the collectives with the same sizes in the same order, so every
    // rank grows its staging buffer at the same call: allocate_symmetric stays collective.
    if (staging_.local == nullptr || staging_.bytes < bytes) {
      if (streams_.capturing()) {
        // An allocation (cudaMalloc, IPC handles over MPI) is not stream work: a capture
        // cannot hold it. Every rank of the group reaches this at the same call.
        throw Error(where_ + ": the copy-engine collectives' staging buffer must grow to " +
                    std::to_string(bytes) +
                    " bytes, which cannot happen inside a CUDA-graph capture: run the call "
                    "once outside the capture first");
      }
      // The old buffer is kept, not released: a graph captured earlier may still name it. The
      // backend frees every symmetric buffer when it goes; growing at least twofold keeps what
      // is kept under the size of the last one.
      staging_ = backend_.allocate_symmetric(std::max(bytes, 2 * staging_.bytes), group_);
    }
    return staging_;
  }

  // One exchange per peer: block_for(to) to slot `me` of peer `to`'s copy of dst, and from
  // peer `from` into slot `from` of this rank's copy; stream s waits for it.
  void exchange(const SymmetricBuffer& dst, size_t bytes,
                const std::function<const void*(int)>& block_for, int s, const std::string& label) {
    const int tp = backend_.group_size(group_), me = backend_.group_rank(group_);
    std::vector<Exchange> group;
    for (int i = 1; i < tp; ++i) {
      const int to = (me + i) % tp, from = (me - i + tp) % tp;
      group.push_back({.src = block_for(to),
                       .bytes = bytes,
                       .send_peer = to,
                       .send_offset = static_cast<size_t>(me) * bytes,
                       .recv_peer = from,
                       .recv_offset = static_cast<size_t>(from) * bytes,
                       .dst = &dst,
                       .label = label.c_str()});
    }
    if (group.empty()) return;
    // The staging buffer is read on any stream by the previous collective: the peers may write
    // into it again only after all of that.
    streams_.communication_after_all();
    backend_.wait_exchange(backend_.start_exchange(group_, group, -1), s);
  }

  Backend& backend_;
  Group group_;
  Streams& streams_;
  Compute& compute_;
  std::string where_;
  // Freed with the backend's other symmetric buffers, not here (nor when it grows): the backend
  // synchronizes before it frees them.
  SymmetricBuffer staging_;
};

}  // namespace

std::unique_ptr<SequentialCollectives> make_ce_collectives(Backend& backend, Group group,
                                                           Streams& streams, Compute& compute,
                                                           std::string where) {
  return std::make_unique<CeCollectives>(backend, group, streams, compute, std::move(where));
}

}  // namespace cgemm::cuda
