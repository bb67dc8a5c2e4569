// The grouped GEMM's FP8 (issue 42 item 5): on each of the five MoE cases (moe_cases.hpp), e4m3
// lhs [tokens, K] and rhs [G, N, K] with a scale_inv per group and operand, bf16 out, on the
// two paths GroupedGemmPlan runs FP8 on, against the bf16 tiles of the same case:
//   bf16_tiles   GroupedPath::kCublasLtTiles on bf16 operands (grouped.cpp's tiles column)
//   fp8_loop     GroupedPath::kLoop: one cuBLASLt FP8 GEMM per non-empty group, its scale
//                pointers the group's scale_inv
//   fp8_tiles    GroupedPath::kCublasLtTiles: the pointer-array matmuls, each tile scaled by
//                its group's scale_inv through the alpha vector (cuda/grouped/tile_scales.hpp)
// The FP8 operands are the bf16 ones cast with scale 1 (values of a normal distribution, well
// inside e4m3's range); the scale_inv differ per group (0.5 to 2), so a tile given another
// group's alpha shows in fp8_rel_diff: max |tiles - loop| / max |loop| over the first and last
// row of every non-empty group. Times are medians of interleaved rounds; the lhs rotates over
// enough copies to exceed twice the L2. TFLOP/s count the real ragged work, 2 * tokens * K * N.

#include <cmath>

#include "cgemm/core/convert.hpp"
#include "cgemm/gemm/quantize_task.hpp"
#include "cgemm/runtime/grouped_plan.hpp"
#include "common/job.hpp"
#include "moe_cases.hpp"
#include "parts.hpp"

namespace cgemm::launcher::parts {

namespace {

Table grouped_fp8_table() {
  return Table(
      {{"case", "tokens x G x K x N", "", 0, -1, "", Column::kAll},
       {"sizes", "", "", 0, -1, "", Column::kAll},
       {"bf16_tiles_ms", "bf16 tiles ms", "ms", 4, 3, "", Column::kAll},
       {"bf16_tiles_tflops", "bf16 tiles TFLOP/s", "TFLOP/s", 1, 0, "", Column::kAll, 2},
       {"fp8_loop_path", "FP8 loop path", "", 0, -1, "", Column::kAll},
       {"fp8_loop_ms", "FP8 loop ms", "ms", 4, 3, "", Column::kAll},
       {"fp8_loop_tflops", "FP8 loop TFLOP/s", "TFLOP/s", 1, 0, "", Column::kAll, 2},
       {"fp8_tiles_path", "FP8 tiles path", "", 0, -1, "", Column::kAll},
       {"fp8_tiles_ms", "FP8 tiles ms", "ms", 4, 3, "", Column::kAll},
       {"fp8_tiles_tflops", "FP8 tiles TFLOP/s", "TFLOP/s", 1, 0, "", Column::kAll, 2},
       {"bf16_over_fp8_tiles", "bf16 tiles / FP8 tiles", "", 3, 2, "x", Column::kAll},
       {"fp8_loop_over_tiles", "FP8 loop / FP8 tiles", "", 3, 2, "x", Column::kAll},
       {"fp8_rel_diff", "max rel diff (FP8 tiles vs loop)", "", 6, -1, "", Column::kAll, 2}});
}

// dst = src cast to e4m3 with scale 1 (`state`: a fresh scale state, scale 1).
void cast_e4m3(Backend& be, const void* src, int64_t count, void* dst, const float* state) {
  QuantizeTask t;
  t.rows = 1;
  t.cols = count;
  t.src_dtype = DType::kBFloat16;
  t.src = src;
  t.format = DType::kFloat8E4M3;
  t.dst = dst;
  t.state = state;
  t.label = "cast to e4m3";
  be.quantize(t, 0);
}

}  // namespace

Table grouped_fp8(Backend& be, const Settings& s) {
  Table table = grouped_fp8_table();
  const int64_t div = s.grouped_divide;
  for (const MoeCase& full : moe_cases()) {
    // K and N stay multiples of 16 (cuBLASLt's FP8 GEMMs refuse others).
    const MoeCase c = divided(full, div, 16);
    const std::string name = moe_name(c);
    const std::string skew = group_skew_text(c.skew, kMoeEmptyGroups);
    const std::vector<int32_t> sizes = moe_group_sizes(c.tokens, c.groups, c.skew, kMoeEmptyGroups);

    GroupedGemmDesc d = moe_desc(c);
    d.path = GroupedPath::kCublasLtTiles;
    GroupedGemmPlan bf16_tiles(be, d);
    d.dtype = DType::kFloat8E4M3;
    d.scaling = ScalingMode::kDelayedTensorScaling;
    d.preferred_element_type = DType::kBFloat16;
    d.path = GroupedPath::kLoop;
    GroupedGemmPlan fp8_loop(be, d);
    d.path = GroupedPath::kCublasLtTiles;
    GroupedGemmPlan fp8_tiles(be, d);

    BackendBuffers mem(be);
    const ScaleBuffers unit(be);  // scale 1
    const size_t lhs_elems = static_cast<size_t>(c.tokens * c.k);
    const size_t out_bytes = static_cast<size_t>(c.tokens * c.n) * 2;
    // Enough copies that one pass over the FP8 copies exceeds twice the L2 (the bf16 ones then
    // do, too).
    const size_t sets = std::max<size_t>(2, (2 * s.l2_bytes + lhs_elems - 1) / lhs_elems);
    std::vector<const void*> lhs, lhs8;
    for (size_t i = 0; i < sets; ++i) {
      lhs.push_back(mem.get(lhs_elems * 2));
      lhs8.push_back(mem.get(lhs_elems));
      be.fill_normal(const_cast<void*>(lhs.back()), DType::kBFloat16, {c.tokens * c.k},
                     {c.tokens * c.k}, {0}, 11 + i, 1.0f);
      cast_e4m3(be, lhs.back(), c.tokens * c.k, const_cast<void*>(lhs8.back()), unit.state());
    }
    const int64_t rhs_elems = c.groups * c.n * c.k;
    void* rhs = mem.get(static_cast<size_t>(rhs_elems) * 2);
    void* rhs8 = mem.get(static_cast<size_t>(rhs_elems));
    be.fill_normal(rhs, DType::kBFloat16, {rhs_elems}, {rhs_elems}, {0}, 7, 1.0f);
    cast_e4m3(be, rhs, rhs_elems, rhs8, unit.state());
    // Every group's pair of scale_inv differs from every other's (lhs 0.5 .. 1, rhs 1 .. 2).
    std::vector<float> lhs_si(static_cast<size_t>(c.groups)), rhs_si(lhs_si.size());
    for (size_t g = 0; g < lhs_si.size(); ++g) {
      const float t = static_cast<float>(g) / static_cast<float>(lhs_si.size());
      lhs_si[g] = 0.5f + 0.5f * t;
      rhs_si[g] = 2.0f - t;
    }
    auto* sl = static_cast<float*>(mem.get(lhs_si.size() * sizeof(float)));
    auto* sr = static_cast<float*>(mem.get(rhs_si.size() * sizeof(float)));
    be.copy_from_host(sl, lhs_si.data(), lhs_si.size() * sizeof(float));
    be.copy_from_host(sr, rhs_si.data(), rhs_si.size() * sizeof(float));
    void* out_bf16 = mem.get(out_bytes);
    void* out_loop = mem.get(out_bytes);
    void* out_tiles = mem.get(out_bytes);

    be.fill_nan(out_loop, DType::kBFloat16, c.tokens * c.n);
    be.fill_nan(out_tiles, DType::kBFloat16, c.tokens * c.n);
    fp8_loop.execute_scaled(sizes, lhs8[0], sl, rhs8, sr, nullptr, out_loop);
    fp8_tiles.execute_scaled(sizes, lhs8[0], sl, rhs8, sr, nullptr, out_tiles);
    const double rel = rel_diff(be, out_loop, out_tiles, sizes, c.n);

    size_t turn = 0, turn8 = 0;
    const std::vector<double> ms = interleaved_medians(
        be,
        {[&] { bf16_tiles.execute(sizes, lhs[turn++ % sets], rhs, nullptr, out_bf16); },
         [&] {
           fp8_loop.execute_scaled(sizes, lhs8[turn8++ % sets], sl, rhs8, sr, nullptr, out_loop);
         },
         [&] {
           fp8_tiles.execute_scaled(sizes, lhs8[turn8++ % sets], sl, rhs8, sr, nullptr, out_tiles);
         }},
        s.warmup, s.iterations);
    const double flops = bf16_tiles.flops(sizes);
    const auto tflops = [&](double t) { return flops / (t * 1e-3) / 1e12; };
    table.add({name, skew, ms[0], tflops(ms[0]), path_text(fp8_loop), ms[1], tflops(ms[1]),
               path_text(fp8_tiles), ms[2], tflops(ms[2]), ms[0] / ms[2], ms[1] / ms[2], rel});
    say("grouped_fp8: " + name + " " + skew + ": bf16 tiles " + std::to_string(ms[0]) +
        " ms, FP8 " + path_text(fp8_loop) + " " + std::to_string(ms[1]) + " ms, FP8 " +
        path_text(fp8_tiles) + " " + std::to_string(ms[2]) + " ms, max rel diff " +
        std::to_string(rel));
  }
  return table;
}

}  // namespace cgemm::launcher::parts
