// Copy bandwidth against transfer size: one cudaMemcpyAsync device to device (the call the
// copy-engine transport makes for every chunk) per timed run, on stream 0, from 1 MiB up to
// max_copy_mib, so a schedule's chunk count can be chosen with its transfer size in mind.
// Sources and destinations rotate past twice the L2. On one GPU this is a copy within HBM
// (each byte read and written); between GPUs the same call runs over NVLink.

#include "common/job.hpp"
#include "parts.hpp"

namespace cgemm::launcher::parts {

Table copy_bandwidth(Backend& be, const Settings& s) {
  Table table({{"mib", "transfer MiB", "MiB", 0, -1, "", Column::kAll},
               {"copy_us", "copy us", "us", 1, 1, "", Column::kAll},
               {"gb_s", "GB/s (bytes moved)", "GB/s", 1, 0, "", Column::kAll},
               {"memory_gb_s", "memory GB/s (read + write)", "GB/s", 1, 0, "", Column::kAll}});
  for (int64_t mib = 1; mib <= s.max_copy_mib; mib *= 2) {
    const size_t bytes = static_cast<size_t>(mib) << 20;
    CopyBuffers copies(be, bytes, s.l2_bytes);
    const auto copy = [&] {
      const auto [dst, src] = copies.next();
      be.copy(dst, src, bytes, 0, "copy");
    };
    const double ms = interleaved_medians(be, {copy}, s.warmup, s.iterations).front();
    const double gb_s = static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
    table.add({mib, ms * 1e3, gb_s, 2 * gb_s});
    say("copy_bandwidth: " + std::to_string(mib) + " MiB in " + std::to_string(ms * 1e3) + " us, " +
        std::to_string(gb_s) + " GB/s");
  }
  return table;
}

}  // namespace cgemm::launcher::parts
