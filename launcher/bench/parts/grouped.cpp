// The grouped GEMM of a mixture-of-experts layer (issue 25 item 5): for each of the issue's
// five bf16 cases (tokens x G x K x N, uniform or skewed sizes, grouped_sizes.hpp), the two
// ways GroupedGemmPlan runs the ragged-rows form on the CUDA backend, against one dense
// cuBLASLt GEMM of every row as the floor:
//   loop            GroupedPath::kLoop: one cuBLASLt GEMM per non-empty group
//   cublas_grouped  GroupedPath::kCublasGrouped: one cublasGemmGroupedBatchedEx per call
//   cublaslt_tiles  GroupedPath::kCublasLtTiles: a pointer-array batched cuBLASLt matmul per
//                   tile size (runtime/src/cuda/grouped/cublaslt_tiles.cpp)
//   device_tiles    GroupedPath::kCublasLtDeviceTiles: one pointer-array matmul of fixed shape,
//                   its pointers computed on the device from sizes in device memory
//                   (cublaslt_device_tiles.cpp), called eagerly and replayed from a CUDA graph
//                   (device_graph: one captured call per lhs copy; the sizes stay on the device)
//   dense           [tokens, K] @ [K, N] in one cuBLASLt GEMM (group 0's weights)
// lhs [tokens, K], rhs [G, N, K] (gemm.py's default "T" layout; torch_grouped_mm.py hands
// torch the same weights, transposed views), out [tokens, N], no bias. TFLOP/s count the real
// ragged work, 2 * tokens * K * N (the dense GEMM does as much). The times are medians of
// interleaved rounds (interleaved_medians); the lhs rotates over enough copies to exceed
// twice the L2. One call of each path is compared first on the first and last row of every
// non-empty group: max_rel_diff = max |grouped - loop| / max |loop| over those rows
// (tiles_rel_diff the same for the tiles, device_rel_diff for the device tiles' eager call;
// its replays are checked against that call byte for byte: device_graph_same). The device
// tiles take K and N multiples of 8 only: a divided case that is not says "not run".
// The CPU backend ignores the path (both columns run the loop); it is allowed only with
// --parts_grouped_divide, which shrinks tokens, K and N for a quick check.

#include <algorithm>
#include <cmath>
#include <optional>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/runtime/grouped_plan.hpp"
#include "common/job.hpp"
#include "grouped_sizes.hpp"
#include "moe_cases.hpp"
#include "parts.hpp"

namespace cgemm::launcher::parts {

namespace {

Table grouped_table() {
  return Table(
      {{"case", "tokens x G x K x N", "", 0, -1, "", Column::kAll},
       {"sizes", "", "", 0, -1, "", Column::kAll},
       {"tokens", "", "", 0, -1, "", Column::kCsv | Column::kJson},
       {"groups", "G", "", 0, -1, "", Column::kCsv | Column::kJson},
       {"k", "", "", 0, -1, "", Column::kCsv | Column::kJson},
       {"n", "", "", 0, -1, "", Column::kCsv | Column::kJson},
       {"min_rows", "min rows (non-empty)", "", 0, -1, "", Column::kAll},
       {"max_rows", "max rows", "", 0, -1, "", Column::kAll},
       {"empty", "empty groups", "", 0, -1, "", Column::kAll},
       {"loop_ms", "loop ms", "ms", 4, 3, "", Column::kAll},
       {"loop_tflops", "loop TFLOP/s", "TFLOP/s", 1, 0, "", Column::kAll, 2},
       {"grouped_path", "grouped path", "", 0, -1, "", Column::kAll},
       {"grouped_ms", "cuBLAS grouped ms", "ms", 4, 3, "", Column::kAll},
       {"grouped_tflops", "cuBLAS grouped TFLOP/s", "TFLOP/s", 1, 0, "", Column::kAll, 2},
       {"dense_ms", "dense GEMM ms", "ms", 4, 3, "", Column::kAll},
       {"dense_tflops", "dense TFLOP/s", "TFLOP/s", 1, 0, "", Column::kAll, 2},
       {"loop_over_grouped", "loop / grouped", "", 3, 2, "x", Column::kAll},
       {"grouped_over_dense", "grouped / dense", "", 3, 2, "x", Column::kAll},
       {"max_rel_diff", "max rel diff (grouped vs loop)", "", 6, -1, "", Column::kAll, 2},
       {"tiles_path", "tiles path", "", 0, -1, "", Column::kAll},
       {"tiles_ms", "cuBLASLt tiles ms", "ms", 4, 3, "", Column::kAll},
       {"tiles_tflops", "cuBLASLt tiles TFLOP/s", "TFLOP/s", 1, 0, "", Column::kAll, 2},
       {"tiles_over_dense", "tiles / dense", "", 3, 2, "x", Column::kAll},
       {"tiles_rel_diff", "max rel diff (tiles vs loop)", "", 6, -1, "", Column::kAll, 2},
       {"device_path", "device tiles path", "", 0, -1, "", Column::kAll},
       {"device_ms", "device tiles ms", "ms", 4, 3, "", Column::kAll},
       {"device_tflops", "device tiles TFLOP/s", "TFLOP/s", 1, 0, "", Column::kAll, 2},
       {"device_graph_ms", "device tiles graph ms", "ms", 4, 3, "", Column::kAll},
       {"device_over_tiles", "device tiles / tiles", "", 3, 2, "x", Column::kAll},
       {"device_rel_diff", "max rel diff (device tiles vs loop)", "", 6, -1, "", Column::kAll, 2},
       {"device_graph_same", "graph = eager", "", 0, -1, "", Column::kAll}});
}

}  // namespace

Table grouped(Backend& be, const Settings& s) {
  Table table = grouped_table();
  const int64_t div = s.grouped_divide;
  for (const MoeCase& full : moe_cases()) {
    const MoeCase c = divided(full, div);
    const std::string name = moe_name(c);
    const std::string skew = group_skew_text(c.skew, kMoeEmptyGroups);
    const std::vector<int32_t> sizes = moe_group_sizes(c.tokens, c.groups, c.skew, kMoeEmptyGroups);
    std::string list;
    for (int32_t v : sizes) list += (list.empty() ? "" : ",") + std::to_string(v);
    say("grouped: " + name + " " + skew + ": sizes " + list);

    GroupedGemmDesc d = moe_desc(c);
    d.path = GroupedPath::kLoop;
    GroupedGemmPlan loop(be, d);
    d.path = GroupedPath::kCublasGrouped;
    GroupedGemmPlan grouped(be, d);
    d.path = GroupedPath::kCublasLtTiles;
    GroupedGemmPlan tiles(be, d);
    d.path = GroupedPath::kCublasLtDeviceTiles;
    std::optional<GroupedGemmPlan> device;
    try {
      device.emplace(be, d);
    } catch (const Error& e) {
      say(std::string("grouped: ") + e.what());
    }

    BackendBuffers mem(be);
    const size_t lhs_bytes = static_cast<size_t>(c.tokens * c.k) * 2;
    const size_t out_bytes = static_cast<size_t>(c.tokens * c.n) * 2;
    const size_t sets = std::max<size_t>(2, (2 * s.l2_bytes + lhs_bytes - 1) / lhs_bytes);
    std::vector<const void*> lhs;
    for (size_t i = 0; i < sets; ++i) {
      lhs.push_back(mem.get(lhs_bytes));
      be.fill_normal(const_cast<void*>(lhs.back()), DType::kBFloat16, {c.tokens * c.k},
                     {c.tokens * c.k}, {0}, 11 + i, 1.0f);
    }
    const int64_t rhs_elems = c.groups * c.n * c.k;
    void* rhs = mem.get(static_cast<size_t>(rhs_elems) * 2);
    be.fill_normal(rhs, DType::kBFloat16, {rhs_elems}, {rhs_elems}, {0}, 7, 0.02f);
    void* out_loop = mem.get(out_bytes);
    void* out_grouped = mem.get(out_bytes);
    void* out_tiles = mem.get(out_bytes);
    void* out_dense = mem.get(out_bytes);
    void* out_device = mem.get(out_bytes);
    void* out_graph = mem.get(out_bytes);
    auto* device_sizes = static_cast<int32_t*>(mem.get(sizes.size() * sizeof(int32_t)));
    be.copy_from_host(device_sizes, sizes.data(), sizes.size() * sizeof(int32_t));

    // One call of each into poisoned outputs, compared on the first and last row of every
    // non-empty group.
    be.fill_nan(out_loop, DType::kBFloat16, c.tokens * c.n);
    be.fill_nan(out_grouped, DType::kBFloat16, c.tokens * c.n);
    be.fill_nan(out_tiles, DType::kBFloat16, c.tokens * c.n);
    loop.execute(sizes, lhs[0], rhs, nullptr, out_loop);
    grouped.execute(sizes, lhs[0], rhs, nullptr, out_grouped);
    tiles.execute(sizes, lhs[0], rhs, nullptr, out_tiles);
    const double rel = rel_diff(be, out_loop, out_grouped, sizes, c.n);
    const double tiles_rel = rel_diff(be, out_loop, out_tiles, sizes, c.n);
    // The device tiles: one eager call, then one replay of a graph per lhs copy (the first
    // on lhs[0], compared with the eager call byte for byte).
    double device_rel = std::nan("");
    std::string graph_same = "-";
    std::vector<CapturedCall> graphs;
    const auto device_x = [&](const void* a, void* o) {
      return cgemm::Operands(a, rhs, nullptr, o).set_input(Operand::kGroupSizes, device_sizes);
    };
    if (device) {
      be.fill_nan(out_device, DType::kBFloat16, c.tokens * c.n);
      be.fill_nan(out_graph, DType::kBFloat16, c.tokens * c.n);
      device->execute(device_x(lhs[0], out_device));
      device_rel = rel_diff(be, out_loop, out_device, sizes, c.n);
      for (const void* a : lhs) graphs.push_back(device->capture(device_x(a, out_graph), nullptr));
      graphs.front().replay();
      be.synchronize();
      std::vector<uint16_t> eager(static_cast<size_t>(c.tokens * c.n));
      std::vector<uint16_t> replayed(eager.size());
      be.copy_to_host(eager.data(), out_device, out_bytes);
      be.copy_to_host(replayed.data(), out_graph, out_bytes);
      graph_same = eager == replayed ? "yes" : "NO";
    }

    GemmTask dense;
    dense.m = c.tokens;
    dense.n = c.n;
    dense.k = c.k;
    dense.lda = c.k;
    dense.rhs = rhs;  // group 0's [N, K]
    dense.ldb = c.k;
    dense.rhs_transposed = true;
    dense.out = out_dense;
    dense.ldc = c.n;
    dense.label = "dense";
    size_t turn = 0;
    const auto next_lhs = [&] { return lhs[turn++ % lhs.size()]; };
    size_t graph_turn = 0;
    const std::vector<double> ms =
        interleaved_medians(be,
                            {[&] { loop.execute(sizes, next_lhs(), rhs, nullptr, out_loop); },
                             [&] { grouped.execute(sizes, next_lhs(), rhs, nullptr, out_grouped); },
                             [&] { tiles.execute(sizes, next_lhs(), rhs, nullptr, out_tiles); },
                             [&] {
                               GemmTask t = dense;
                               t.lhs = next_lhs();
                               be.gemm(t, 0);
                             },
                             [&] {
                               if (device) device->execute(device_x(next_lhs(), out_device));
                             },
                             [&] {
                               if (!graphs.empty()) graphs[graph_turn++ % graphs.size()].replay();
                             }},
                            s.warmup, s.iterations);
    const double flops = loop.flops(sizes);
    const auto tflops = [&](double t) { return flops / (t * 1e-3) / 1e12; };
    int64_t min_rows = 0, max_rows = 0, empty = 0;
    for (int32_t v : sizes) {
      if (v == 0) {
        ++empty;
        continue;
      }
      min_rows = min_rows == 0 ? v : std::min<int64_t>(min_rows, v);
      max_rows = std::max<int64_t>(max_rows, v);
    }
    // A call the grouped path hands to the loop (unaligned group pointers) is timed as the
    // loop: say so in the path's name.
    const std::string path = path_text(grouped);
    const std::string tiles_path = path_text(tiles);
    const std::string device_path = device ? path_text(*device) : "not run";
    const double nan = std::nan("");
    const double device_ms = device ? ms[4] : nan, graph_ms = device ? ms[5] : nan;
    table.add({name,
               skew,
               c.tokens,
               c.groups,
               c.k,
               c.n,
               min_rows,
               max_rows,
               empty,
               ms[0],
               tflops(ms[0]),
               path,
               ms[1],
               tflops(ms[1]),
               ms[3],
               tflops(ms[3]),
               ms[0] / ms[1],
               ms[1] / ms[3],
               rel,
               tiles_path,
               ms[2],
               tflops(ms[2]),
               ms[2] / ms[3],
               tiles_rel,
               device_path,
               device_ms,
               tflops(device_ms),
               graph_ms,
               device_ms / ms[2],
               device_rel,
               graph_same});
    say("grouped: " + name + " " + skew + ": loop " + std::to_string(ms[0]) + " ms (" +
        std::to_string(tflops(ms[0])) + " TFLOP/s), " + path + " " + std::to_string(ms[1]) +
        " ms (" + std::to_string(tflops(ms[1])) + "), " + tiles_path + " " + std::to_string(ms[2]) +
        " ms (" + std::to_string(tflops(ms[2])) + "), dense " + std::to_string(ms[3]) + " ms (" +
        std::to_string(tflops(ms[3])) + "), max rel diff " + std::to_string(rel) + " (tiles " +
        std::to_string(tiles_rel) + "), " + device_path + " " + std::to_string(device_ms) +
        " ms eager, " + std::to_string(graph_ms) + " ms replayed (rel diff " +
        std::to_string(device_rel) + ", graph = eager: " + graph_same + ")");
  }
  return table;
}

}  // namespace cgemm::launcher::parts
