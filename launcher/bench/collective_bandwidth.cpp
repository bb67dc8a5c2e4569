#include "collective_bandwidth.hpp"

#include <string>

#include "cgemm/core/error.hpp"

namespace cgemm::launcher {

namespace {
void check(CollectiveOp op, int tp) {
  if (op == CollectiveOp::kNone) throw Error("no collective: no bandwidth");
  if (tp < 1) throw Error("tp " + std::to_string(tp) + ": no bandwidth");
}
}  // namespace

int64_t collective_bytes(CollectiveOp op, int64_t shard_bytes, int tp) {
  check(op, tp);
  return shard_bytes * tp;
}

int64_t ring_bytes_per_rank(CollectiveOp op, int64_t bytes, int tp) {
  check(op, tp);
  return bytes / tp * (tp - 1);
}

double bus_factor(CollectiveOp op, int tp) {
  check(op, tp);
  return static_cast<double>(tp - 1) / tp;
}

double algbw_gb_s(int64_t bytes, double ms) {
  return ms > 0 ? static_cast<double>(bytes) / (ms * 1e-3) / 1e9 : 0.0;
}

double busbw_gb_s(CollectiveOp op, int tp, int64_t bytes, double ms) {
  return algbw_gb_s(bytes, ms) * bus_factor(op, tp);
}

}  // namespace cgemm::launcher
