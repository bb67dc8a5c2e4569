#include "ring_bandwidth.hpp"

#include <string>
#include <vector>

#include "job.hpp"

namespace cgemm::launcher {

Table ring_bandwidth(Context& ctx, int warmup, int iterations) {
  Backend& be = ctx.backend();
  Table table({{"transport", "transport", "", 0, -1, "", Column::kAll},
               {"bytes", "message bytes", "B", 0, -1, "", Column::kAll},
               {"step_us", "one ring step us", "us", 1, 1, "", Column::kAll, 3},
               {"gb_s", "GB/s per rank", "GB/s", 3, 3, "", Column::kAll, 3}});
  const int tp = be.tp_size(), me = be.tp_rank();
  for (size_t bytes = 1024; bytes <= (size_t{16} << 20); bytes *= 4) {
    SymmetricBuffer dst = be.allocate_symmetric(bytes, Group::kTp);
    Buffer src(be, bytes);
    // Fresh bytes, not zeros: a transport may not special-case them.
    std::vector<unsigned char> host(bytes);
    for (size_t i = 0; i < bytes; ++i) host[i] = static_cast<unsigned char>(i * 131 + me);
    be.copy_from_host(src.p, host.data(), bytes);
    const Exchange x{.src = src.p,
                     .bytes = bytes,
                     .send_peer = (me + 1) % tp,
                     .send_offset = 0,
                     .recv_peer = (me + tp - 1) % tp,
                     .recv_offset = 0,
                     .dst = &dst,
                     .label = "ring bandwidth step"};
    const auto step = [&] { be.wait_exchange(be.start_exchange(Group::kTp, {&x, 1}, 0), 0); };
    for (int i = 0; i < warmup; ++i) step();
    const double ms = median(time_iterations(be, iterations, step));
    be.release_symmetric(dst);
    const double gb_s = static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
    table.add({be.transport(), static_cast<int64_t>(bytes), ms * 1e3, gb_s});
    say("ring_bandwidth (" + be.transport() + "): " + std::to_string(bytes) + " bytes, one step " +
        format_double(ms * 1e3, 1, 3) + " us, " + format_double(gb_s, 3, 3) + " GB/s per rank");
  }
  return table;
}

}  // namespace cgemm::launcher
