// The sequential path's collectives on NCCL (see sequential_collectives.hpp).

#include "cgemm/collective/nccl_transport.hpp"
#include "sequential_collectives.hpp"

namespace cgemm::cuda {
namespace {

class NcclCollectives final : public SequentialCollectives {
 public:
  NcclCollectives(NcclTransport& nccl, Streams& streams, Trace& trace, int tp)
      : nccl_(nccl), streams_(streams), trace_(trace), tp_(tp) {}

  void all_gather(const void* src, void* dst, size_t bytes_per_rank, int s,
                  const char* label) override {
    cudaStream_t st = streams_.at(s, "all_gather");
    trace_.span(
        "collective", [&] { return named(label, "all-gather") + " (NCCL)"; }, s, st,
        [&] { nccl_.all_gather(src, dst, bytes_per_rank, st); },
        static_cast<int64_t>(bytes_per_rank) * tp_);
  }

  void reduce_scatter(const void* src, void* dst, DType dtype, int64_t count_per_rank, int s,
                      const char* label) override {
    cudaStream_t st = streams_.at(s, "reduce_scatter");
    trace_.span(
        "collective", [&] { return named(label, "reduce-scatter") + " (NCCL)"; }, s, st,
        [&] { nccl_.reduce_scatter(src, dst, dtype, count_per_rank, st); },
        count_per_rank * tp_ * static_cast<int64_t>(dtype_size(dtype)));
  }

  void all_reduce(void* buf, DType dtype, int64_t count, int s, const char* label) override {
    cudaStream_t st = streams_.at(s, "all_reduce");
    trace_.span(
        "collective", [&] { return named(label, "all-reduce") + " (NCCL)"; }, s, st,
        [&] { nccl_.all_reduce(buf, dtype, count, st); },
        count * static_cast<int64_t>(dtype_size(dtype)));
  }

 private:
  void all_reduce_max(float* buf, int count, int s, const char* label) override {
    cudaStream_t st = streams_.at(s, "all_reduce_max");
    trace_.span(
        "collective", [&] { return named(label, "all-reduce max") + " (NCCL)"; }, s, st,
        [&] { nccl_.all_reduce_max(buf, count, st); }, int64_t{4} * count);
  }

  NcclTransport& nccl_;
  Streams& streams_;
  Trace& trace_;
  int64_t tp_;  // for the spans' bytes
};

}  // namespace

std::unique_ptr<SequentialCollectives> make_nccl_collectives(NcclTransport& nccl, Streams& streams,
                                                             Trace& trace, int size) {
  return std::make_unique<NcclCollectives>(nccl, streams, trace, size);
}

}  // namespace cgemm::cuda
