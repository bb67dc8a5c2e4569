// The MXFP8 scale layouts cuBLAS reads (gemm/include/cgemm/gemm/quantize.hpp), against the
// seed's own operations on known inputs (issue 43 item 5): apply_padding_to_scale_inv pads to
// TE's (128, 4) block alignment with E8M0 0x00, and swizzled_scale is gemm.py's
//   reshape(rows // 128, 4, 32, cols // 4, 4); transpose(0, 3, 2, 1, 4)
// (after a transpose for colwise scales). The reference below runs that reshape and transpose
// as data (a generic row-major permutation of a 5-D array), not the closed-form index the
// library uses.

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "cgemm/core/error.hpp"
#include "cgemm/gemm/quantize.hpp"

namespace cgemm::quant {
namespace {

// jnp.transpose(x.reshape(dims), perm).reshape(-1) for a row-major x.
std::vector<uint8_t> reshape_transpose(const std::vector<uint8_t>& x, std::array<int64_t, 5> dims,
                                       std::array<int, 5> perm) {
  std::array<int64_t, 5> in_stride{}, out_dims{}, out_stride{};
  in_stride[4] = 1;
  for (int d = 3; d >= 0; --d) in_stride[d] = in_stride[d + 1] * dims[d + 1];
  for (int d = 0; d < 5; ++d) out_dims[d] = dims[perm[d]];
  out_stride[4] = 1;
  for (int d = 3; d >= 0; --d) out_stride[d] = out_stride[d + 1] * out_dims[d + 1];
  std::vector<uint8_t> out(x.size());
  for (int64_t o = 0; o < static_cast<int64_t>(x.size()); ++o) {
    int64_t src = 0;
    for (int d = 0; d < 5; ++d) src += (o / out_stride[d] % out_dims[d]) * in_stride[perm[d]];
    out[static_cast<size_t>(o)] = x[static_cast<size_t>(src)];
  }
  return out;
}

// Known bytes: distinct along both dims, never the pad byte.
std::vector<uint8_t> known(int64_t rows, int64_t cols) {
  std::vector<uint8_t> v(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      v[static_cast<size_t>(r * cols + c)] = static_cast<uint8_t>(1 + (r * 7 + c * 31) % 254);
    }
  }
  return v;
}

TEST(ScaleLayouts, SwizzleIsTheSeedsReshapeAndTranspose) {
  for (const auto& [rows, cols] :
       std::initializer_list<std::pair<int64_t, int64_t>>{{128, 4}, {256, 8}, {384, 12}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
    const std::vector<uint8_t> s = known(rows, cols);
    std::vector<uint8_t> got(s.size(), 0xee);
    swizzled_scale(s.data(), {rows, cols}, BlockDir::kRowwise, got.data());
    EXPECT_EQ(got, reshape_transpose(s, {rows / 128, 4, 32, cols / 4, 4}, {0, 3, 2, 1, 4}));
    // Colwise: the scale [cols, rows] is transposed to [rows, cols] first.
    std::vector<uint8_t> t(s.size());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        t[static_cast<size_t>(c * rows + r)] = s[static_cast<size_t>(r * cols + c)];
      }
    }
    std::vector<uint8_t> got_t(s.size(), 0xee);
    swizzled_scale(t.data(), {cols, rows}, BlockDir::kColwise, got_t.data());
    EXPECT_EQ(got_t, got) << "a colwise scale swizzles as its transpose";
  }
  std::vector<uint8_t> out(128 * 6);
  const std::vector<uint8_t> odd = known(128, 6);
  EXPECT_THROW(swizzled_scale(odd.data(), {128, 6}, BlockDir::kRowwise, out.data()), Error);
}

TEST(ScaleLayouts, PaddingIsTeBlockAlignmentWithTheSmallestE8m0) {
  // Rowwise [130, 5] -> [256, 8]; colwise [5, 130] -> [8, 256] (the alignment swapped).
  for (const BlockDir dir : {BlockDir::kRowwise, BlockDir::kColwise}) {
    const bool row = dir == BlockDir::kRowwise;
    const ScaleShape unpadded = row ? ScaleShape{130, 5} : ScaleShape{5, 130};
    const ScaleShape padded = padded_scale_shape(unpadded, dir);
    EXPECT_EQ(padded, (row ? ScaleShape{256, 8} : ScaleShape{8, 256}));
    const std::vector<uint8_t> s = known(unpadded.rows, unpadded.cols);
    std::vector<uint8_t> got(static_cast<size_t>(padded.size()), 0xee);
    apply_padding_to_scale_inv(s.data(), unpadded, dir, got.data());
    for (int64_t r = 0; r < padded.rows; ++r) {
      for (int64_t c = 0; c < padded.cols; ++c) {
        const bool inside = r < unpadded.rows && c < unpadded.cols;
        ASSERT_EQ(got[static_cast<size_t>(r * padded.cols + c)],
                  inside ? s[static_cast<size_t>(r * unpadded.cols + c)] : kE8M0PadByte)
            << r << ", " << c;
      }
    }
  }
  EXPECT_EQ(kE8M0PadByte, 0x00) << "TE pads with 2^-127, E8M0's 0x00";
  EXPECT_EQ(padded_scale_shape({128, 4}, BlockDir::kRowwise), (ScaleShape{128, 4}));
}

}  // namespace
}  // namespace cgemm::quant
