// Quantize bandwidth against the copy bandwidth of the same bytes: the per-tensor FP8 kernels a
// quantized GEMM runs before its GEMMs (Backend::amax, Backend::quantize, as runtime/src/
// quantization/quantization.cpp schedules them) on a bf16 tensor of 1 MiB up to max_copy_mib, each
// timed alone, beside a device-to-device copy of the same bf16 bytes in the same rounds. Bytes
// moved are what a kernel must read and write at least: amax reads the tensor (2 B an element),
// quantize reads it and writes e4m3 (3 B an element), current scaling as the runtime runs it
// (amax, scale update, quantize) reads it twice (5 B), a copy reads and writes it (4 B). A
// quantize kernel at HBM speed moves its bytes as fast as the copy: the "% of copy" column.
// Rows of 4096 elements (a hidden size of the sweep); quantize_t writes the transposed copy
// (the weight's [N, K], as a Hopper FP8 GEMM wants it). Sources rotate past twice the L2.
// Every figure is per call, from samples of 8 calls back to back (see kBatch).

#include <functional>
#include <vector>

#include "cgemm/gemm/quantize_task.hpp"
#include "common/job.hpp"
#include "parts.hpp"

namespace cgemm::launcher::parts {

namespace {

constexpr int64_t kCols = 4096;
constexpr int kBatch = 8;  // calls per timed sample

}  // namespace

Table quantize_bandwidth(Backend& be, const Settings& s) {
  const auto gb_s = [](std::string name, std::string title) {
    // Three significant digits: a CPU's 1.23 GB/s shows, a GPU's 3012 too.
    return Column{std::move(name), std::move(title), "GB/s", 1, 0, "", Column::kAll, 3};
  };
  const auto us = [](std::string name, std::string title) {
    return Column{std::move(name), std::move(title), "us", 1, 1, "", Column::kAll};
  };
  Table table({{"mib", "bf16 MiB", "MiB", 0, -1, "", Column::kAll},
               us("copy_us", "copy us"),
               us("amax_us", "amax us"),
               us("quantize_us", "quantize us"),
               us("quantize_t_us", "quantize_t us"),
               us("current_us", "current scaling us"),
               gb_s("copy_gb_s", "copy GB/s (read + write)"),
               gb_s("amax_gb_s", "amax GB/s"),
               gb_s("quantize_gb_s", "quantize GB/s"),
               gb_s("quantize_t_gb_s", "quantize_t GB/s"),
               gb_s("current_gb_s", "current scaling GB/s"),
               {"quantize_of_copy", "quantize % of copy", "%", 1, 0, "", Column::kAll},
               {"current_of_copy", "current scaling % of copy", "%", 1, 0, "", Column::kAll}});
  ScaleBuffers scale(be);
  for (int64_t mib = 1; mib <= s.max_copy_mib; mib *= 2) {
    const size_t bytes = static_cast<size_t>(mib) << 20;
    const int64_t elems = static_cast<int64_t>(bytes / 2);
    CopyBuffers buffers(be, bytes, s.l2_bytes);
    for (size_t i = 0; i < buffers.sets(); ++i) {
      const auto [dst, src] = buffers.next();
      static_cast<void>(dst);
      be.fill_normal(src, DType::kBFloat16, {elems}, {elems}, {0}, 11 + i, 1.0f);
    }
    QuantizeTask task;
    task.rows = elems / kCols;
    task.cols = kCols;
    task.src_dtype = DType::kBFloat16;
    task.format = DType::kFloat8E4M3;
    task.state = scale.state();
    task.label = "quantize";
    ScaleUpdate update;
    update.state = scale.state();
    update.amax = scale.amax();
    update.fp8_max = 448.0f;
    const auto quantize = [&](bool transpose) {
      return [&, transpose] {
        const auto [dst, src] = buffers.next();
        QuantizeTask t = task;
        t.src = src;
        t.dst = dst;
        t.transpose = transpose;
        be.quantize(t, 0);
      };
    };
    const auto copy = [&] {
      const auto [dst, src] = buffers.next();
      be.copy(dst, src, bytes, 0, "copy");
    };
    const auto amax = [&] {
      be.amax(buffers.next().second, DType::kBFloat16, elems, scale.amax(), 0);
    };
    const auto current = [&] {
      const auto [dst, src] = buffers.next();
      be.amax(src, DType::kBFloat16, elems, scale.amax(), 0);
      be.update_scale(update, 0);
      QuantizeTask t = task;
      t.src = src;
      t.dst = dst;
      be.quantize(t, 0);
    };
    // Each sample times kBatch calls back to back between two events, as the runtime enqueues
    // these ops ahead of the GPU: timed one at a time, the host's launch latency (about 10 us,
    // two launches for amax) counted against a 16 us kernel at 64 MiB.
    const auto batched = [](std::function<void()> f) {
      return [f = std::move(f)] {
        for (int i = 0; i < kBatch; ++i) f();
      };
    };
    std::vector<double> ms =
        interleaved_medians(be,
                            {batched(copy), batched(amax), batched(quantize(false)),
                             batched(quantize(true)), batched(current)},
                            s.warmup, s.iterations);
    for (double& m : ms) m /= kBatch;
    const double e = static_cast<double>(elems);
    const auto rate = [](double moved, double t_ms) { return moved / (t_ms * 1e-3) / 1e9; };
    const double copy_gb = rate(4 * e, ms[0]);
    const double quant_gb = rate(3 * e, ms[2]);
    const double current_gb = rate(5 * e, ms[4]);
    table.add({mib, ms[0] * 1e3, ms[1] * 1e3, ms[2] * 1e3, ms[3] * 1e3, ms[4] * 1e3, copy_gb,
               rate(2 * e, ms[1]), quant_gb, rate(3 * e, ms[3]), current_gb,
               100 * quant_gb / copy_gb, 100 * current_gb / copy_gb});
    say("quantize: " + std::to_string(mib) + " MiB of bf16: copy " + format_double(copy_gb, 1) +
        ", quantize " + format_double(quant_gb, 1) + ", current scaling " +
        format_double(current_gb, 1) + " GB/s");
  }
  return table;
}

}  // namespace cgemm::launcher::parts
