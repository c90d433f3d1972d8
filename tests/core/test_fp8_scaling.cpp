// Delayed scaling (core/fp8_scaling.h) against hand-computed values of the
// formula scale = 2^(floor(log2(fp8_max / amax)) - margin) and TE's rules for
// the history.
#include "core/fp8_scaling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace {

using mpb::AmaxAlgo;
using mpb::Fp8Recipe;
using mpb::Fp8TensorScale;
using mpb::fp8_scale_from_amax;

TEST(Fp8Scaling, FormulaOnPowersOfTwoAndBetween) {
  EXPECT_EQ(fp8_scale_from_amax(448.0f, 448.0f, 0, 1.0f), 1.0f);        // log2(1) = 0
  EXPECT_EQ(fp8_scale_from_amax(224.0f, 448.0f, 0, 1.0f), 2.0f);        // exactly 2x: no off-by-one
  EXPECT_EQ(fp8_scale_from_amax(225.0f, 448.0f, 0, 1.0f), 1.0f);        // 1.99x: floor
  EXPECT_EQ(fp8_scale_from_amax(1.0f, 448.0f, 0, 1.0f), 256.0f);        // log2(448) = 8.8
  EXPECT_EQ(fp8_scale_from_amax(1.0f, 448.0f, 2, 1.0f), 64.0f);         // margin divides by 2^2
  EXPECT_EQ(fp8_scale_from_amax(1000.0f, 448.0f, 0, 1.0f), 0.25f);      // log2(0.448) = -1.16 -> -2
  EXPECT_EQ(fp8_scale_from_amax(1.0f, 57344.0f, 0, 1.0f), 32768.0f);    // E5M2: log2(57344) = 15.8
  // The scaled amax always fits: amax * scale <= fp8_max, and > fp8_max / 2 without margin.
  for (float amax : {1e-3f, 0.37f, 3.0f, 447.0f, 449.0f, 1e5f}) {
    const float s = fp8_scale_from_amax(amax, 448.0f, 0, 1.0f);
    EXPECT_LE(amax * s, 448.0f) << amax;
    EXPECT_GT(amax * s, 224.0f) << amax;
  }
}

TEST(Fp8Scaling, ZeroOrNonFiniteAmaxKeepsThePreviousScale) {
  EXPECT_EQ(fp8_scale_from_amax(0.0f, 448.0f, 0, 8.0f), 8.0f);
  EXPECT_EQ(fp8_scale_from_amax(std::numeric_limits<float>::infinity(), 448.0f, 0, 8.0f), 8.0f);
  EXPECT_EQ(fp8_scale_from_amax(std::numeric_limits<float>::quiet_NaN(), 448.0f, 0, 8.0f), 8.0f);
  // A tiny amax gives the largest finite power of two, never inf.
  EXPECT_EQ(fp8_scale_from_amax(1e-45f, 448.0f, 0, 1.0f), std::ldexp(1.0f, 127));
}

TEST(Fp8Scaling, HistoryMaxVersusMostRecent) {
  Fp8Recipe max_r{0, 3, AmaxAlgo::Max}, recent_r{0, 3, AmaxAlgo::MostRecent};
  Fp8TensorScale a(max_r, 448.0f), b(recent_r, 448.0f);
  EXPECT_EQ(a.scale(), 1.0f);  // before any step
  const float amaxes[] = {100.0f, 1.0f, 1.0f, 1.0f};
  const float want_max[] = {4.0f, 4.0f, 4.0f, 256.0f};  // 100 leaves the 3-long history at the 4th step
  const float want_recent[] = {4.0f, 256.0f, 256.0f, 256.0f};
  for (int i = 0; i < 4; ++i) {
    a.update(amaxes[i]);
    b.update(amaxes[i]);
    EXPECT_EQ(a.scale(), want_max[i]) << "step " << i;
    EXPECT_EQ(b.scale(), want_recent[i]) << "step " << i;
  }
  Fp8TensorScale c(Fp8Recipe{1, 2, AmaxAlgo::Max}, 57344.0f);
  c.update(std::numeric_limits<float>::infinity());
  EXPECT_EQ(c.scale(), 1.0f);  // overflowing first step: the initial scale stays
  c.update(2.0f);              // history {inf, 2}: max is inf, scale kept
  EXPECT_EQ(c.scale(), 1.0f);
  c.update(2.0f);              // inf has left: 2^(floor(log2(28672)) - 1) = 2^13
  EXPECT_EQ(c.scale(), 8192.0f);
}

TEST(Fp8Scaling, RejectsBadRecipes) {
  EXPECT_THROW(Fp8TensorScale(Fp8Recipe{0, 0, AmaxAlgo::Max}, 448.0f), std::invalid_argument);
  EXPECT_THROW(Fp8TensorScale(Fp8Recipe{-1, 4, AmaxAlgo::Max}, 448.0f), std::invalid_argument);
}

}  // namespace
