// The scaling-recipe table (core/include/cgemm/core/scaling_modes.hpp): one row per mode, the
// names that read it round-trip, and the messages built from it say what the hand-written ones
// said.
#include <gtest/gtest.h>

#include <string>

#include "cgemm/core/error.hpp"
#include "cgemm/core/scaling_modes.hpp"
#include "cgemm/runtime/quantization_names.hpp"
#include "cgemm/sharding/scaling_mode.hpp"

namespace cgemm {
namespace {

constexpr ScalingMode kAll[] = {ScalingMode::kNoScaling,
                                ScalingMode::kDelayedTensorScaling,
                                ScalingMode::kCurrentTensorScaling,
                                ScalingMode::kMxfp8_1d,
                                ScalingMode::kNvfp4_1d,
                                ScalingMode::kNvfp4_2d};

// The rows are found at compile time (CUDA sources and constexpr readers need it).
static_assert(scaling_mode_row(ScalingMode::kMxfp8_1d).block == 32);
static_assert(block_size(BlockScaling::kNvfp4) == 16);

std::string message_of(const std::string& word) {
  try {
    parse_scaling_option(word);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ScalingModes, EveryModeHasExactlyOneRow) {
  // The last enumerator is kNvfp4_2d: the table holds one row per enumerator, in their order.
  ASSERT_EQ(kScalingModeTable.size(), static_cast<size_t>(ScalingMode::kNvfp4_2d) + 1);
  ASSERT_EQ(std::size(kAll), kScalingModeTable.size());
  for (ScalingMode m : kAll) {
    int rows = 0;
    for (const ScalingModeRow& row : kScalingModeTable) rows += row.mode == m ? 1 : 0;
    EXPECT_EQ(rows, 1) << scaling_mode_name(m);
    EXPECT_EQ(scaling_mode_row(m).mode, m);
  }
}

TEST(ScalingModes, NamesRoundTrip) {
  for (ScalingMode m : kAll) {
    EXPECT_EQ(parse_scaling_mode(scaling_mode_name(m)), m);
    EXPECT_EQ(parse_scaling_option(scaling_option_name(m)), m);
  }
  // Distinct names in both columns.
  for (const ScalingModeRow& a : kScalingModeTable) {
    for (const ScalingModeRow& b : kScalingModeTable) {
      if (a.mode == b.mode) continue;
      EXPECT_NE(a.planner_name, b.planner_name);
      EXPECT_NE(a.option, b.option);
    }
  }
}

TEST(ScalingModes, TheNamesAreTheOldOnes) {
  EXPECT_EQ(scaling_mode_name(ScalingMode::kNoScaling), "no_scaling");
  EXPECT_EQ(scaling_mode_name(ScalingMode::kDelayedTensorScaling), "delayed_tensor_scaling");
  EXPECT_EQ(scaling_mode_name(ScalingMode::kCurrentTensorScaling), "current_tensor_scaling");
  EXPECT_EQ(scaling_mode_name(ScalingMode::kMxfp8_1d), "mxfp8_1d_scaling");
  EXPECT_EQ(scaling_mode_name(ScalingMode::kNvfp4_1d), "nvfp4_1d_scaling");
  EXPECT_EQ(scaling_mode_name(ScalingMode::kNvfp4_2d), "nvfp4_2d_scaling");
  EXPECT_EQ(scaling_option_name(ScalingMode::kNoScaling), "none");
  EXPECT_EQ(scaling_option_name(ScalingMode::kDelayedTensorScaling), "delayed");
  EXPECT_EQ(scaling_option_name(ScalingMode::kCurrentTensorScaling), "current");
  EXPECT_EQ(scaling_option_name(ScalingMode::kMxfp8_1d), "mxfp8");
  EXPECT_EQ(scaling_option_name(ScalingMode::kNvfp4_1d), "nvfp4");
  EXPECT_EQ(scaling_option_name(ScalingMode::kNvfp4_2d), "nvfp4_2d");
}

TEST(ScalingModes, ExpectedListsSayWhatTheHandWrittenOnesSaid) {
  EXPECT_EQ(scaling_option_choices(), "none, delayed, current, mxfp8, nvfp4 or nvfp4_2d");
  EXPECT_EQ(scaling_option_choices(false), "delayed, current, mxfp8, nvfp4 or nvfp4_2d");
  EXPECT_EQ(message_of("fp8"),
            "unknown scaling 'fp8' (expected none, delayed, current, mxfp8, nvfp4 or nvfp4_2d)");
  try {
    parse_scaling_mode("fp8");
    ADD_FAILURE() << "parse_scaling_mode accepted fp8";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "unknown scaling_mode 'fp8' (known: no_scaling, delayed_tensor_scaling, "
                 "current_tensor_scaling, mxfp8_1d_scaling, nvfp4_1d_scaling, nvfp4_2d_scaling)");
  }
}

TEST(ScalingModes, PredicatesAsGemmPyDefinesThem) {
  for (ScalingMode m : kAll) {
    const bool tensor =
        m == ScalingMode::kDelayedTensorScaling || m == ScalingMode::kCurrentTensorScaling;
    const bool nvfp4 = m == ScalingMode::kNvfp4_1d || m == ScalingMode::kNvfp4_2d;
    const bool mxfp8 = m == ScalingMode::kMxfp8_1d;
    EXPECT_EQ(is_tensor_scaling(m), tensor) << scaling_mode_name(m);
    EXPECT_EQ(is_nvfp4(m), nvfp4) << scaling_mode_name(m);
    EXPECT_EQ(is_mxfp8(m), mxfp8) << scaling_mode_name(m);
    EXPECT_EQ(is_1d_block_scaling(m), mxfp8 || nvfp4) << scaling_mode_name(m);
    EXPECT_EQ(is_quantized(m), m != ScalingMode::kNoScaling) << scaling_mode_name(m);
  }
}

TEST(ScalingModes, RowsAreConsistent) {
  EXPECT_EQ(block_size(BlockScaling::kTensor), 0);
  EXPECT_EQ(block_size(BlockScaling::kMxfp8), 32);
  EXPECT_EQ(block_size(BlockScaling::kNvfp4), 16);
  for (const ScalingModeRow& row : kScalingModeTable) {
    SCOPED_TRACE(std::string(row.planner_name));
    // A block size exactly where there are block scales, of a scale dtype.
    EXPECT_EQ(row.block > 0, row.layout != BlockScaling::kTensor);
    EXPECT_EQ(row.block_scale_dtype != ScaleDType::kNone, row.block > 0);
    // Quantized modes have a format: a choice of FP8s or a fixed one of 1 byte (as counted).
    if (is_quantized(row.mode) && !row.fp8_formats) {
      EXPECT_FALSE(is_fp8(row.fixed_format));
      EXPECT_EQ(dtype_size(row.fixed_format), 1u);
    }
    // The per-tensor scale follows the amax: only modes that measure it have one.
    EXPECT_EQ(row.tensor_scale_dtype != ScaleDType::kNone, row.amax);
    EXPECT_TRUE(row.cpu);  // the CPU backend emulates every mode
    EXPECT_EQ(row.cuda_kernels, row.cuda_min_compute_capability == 0);
    EXPECT_FALSE(row.label.empty());
  }
  EXPECT_EQ(block_scaling_row(BlockScaling::kMxfp8).label, "MXFP8");
  EXPECT_EQ(block_scaling_row(BlockScaling::kNvfp4).label, "NVFP4");
  EXPECT_TRUE(block_scaling_row(BlockScaling::kTensor).cuda_kernels);
}

}  // namespace
}  // namespace cgemm
