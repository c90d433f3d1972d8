// The learning-rate schedule and its step convention (train/lr_schedule.h,
// docs/CONFIG.md "Learning-rate schedule"): update t reads PyTorch LambdaLR's
// lr_lambda(t - 1), as HuggingFace's get_linear_schedule_with_warmup and
// get_cosine_schedule_with_warmup define it. The expected values below are
// those functions' formulas written out, so a change of convention fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "train/lr_schedule.h"

namespace mpb {
namespace {

// HuggingFace transformers.optimization, lr_lambda(current_step) for the linear
// and cosine (num_cycles 0.5) schedules with warm-up.
double hf_linear(long long s, long long warmup, long long total) {
  if (s < warmup) return double(s) / double(std::max(1LL, warmup));
  return std::max(0.0, double(total - s) / double(std::max(1LL, total - warmup)));
}
double hf_cosine(long long s, long long warmup, long long total) {
  if (s < warmup) return double(s) / double(std::max(1LL, warmup));
  const double progress = double(s - warmup) / double(std::max(1LL, total - warmup));
  return std::max(0.0, 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress)));
}

TEST(LrSchedule, ConstantByDefault) {
  for (long long t : {1LL, 50LL, 100LL}) EXPECT_DOUBLE_EQ(scheduled_lr(1e-3, 0, LrDecay::None, t, 100), 1e-3);
}

// The table in docs/CONFIG.md: steps 10, warmup 3, linear decay.
TEST(LrSchedule, ConventionTableOfDocsConfig) {
  const double expected[10] = {0.0, 1.0 / 3, 2.0 / 3, 1.0, 6.0 / 7, 5.0 / 7, 4.0 / 7, 3.0 / 7, 2.0 / 7, 1.0 / 7};
  for (int t = 1; t <= 10; ++t)
    EXPECT_NEAR(scheduled_lr(1.0, 3, LrDecay::Linear, t, 10), expected[t - 1], 1e-15) << "update " << t;
}

TEST(LrSchedule, FirstUpdateOfAWarmupHasLrZeroAndTheLastNever) {
  EXPECT_EQ(scheduled_lr(1e-4, 20, LrDecay::Linear, 1, 200), 0.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(1e-4, 20, LrDecay::Linear, 21, 200), 1e-4);  // the peak: s == warmup
  // lr * (1 - 179/180): the subtraction leaves a few ulps of 1 on 1/180.
  EXPECT_NEAR(scheduled_lr(1e-4, 20, LrDecay::Linear, 200, 200), 1e-4 / 180, 1e-4 * 1e-15);
  EXPECT_GT(scheduled_lr(1.0, 0, LrDecay::Cosine, 100, 100), 0.0);
  EXPECT_EQ(scheduled_lr(1.0, 0, LrDecay::Linear, 1, 100), 1.0);  // no warm-up: the first update has the full lr
}

TEST(LrSchedule, MatchesHuggingFaceLinearAndCosineEverywhere) {
  for (long long total : {1LL, 2LL, 7LL, 200LL})
    for (long long warmup : {0LL, 1LL, 3LL}) {
      if (warmup >= total && warmup > 0) continue;  // rejected by the loader (optimizer.warmup < steps)
      for (long long t = 1; t <= total; ++t) {
        // Tolerance: the two evaluate the same expressions in double in a
        // different order; a few ulps of 1.
        EXPECT_NEAR(scheduled_lr(1.0, int(warmup), LrDecay::Linear, t, total), hf_linear(t - 1, warmup, total), 1e-15)
            << "linear t=" << t << " warmup=" << warmup << " steps=" << total;
        EXPECT_NEAR(scheduled_lr(1.0, int(warmup), LrDecay::Cosine, t, total), hf_cosine(t - 1, warmup, total), 1e-15)
            << "cosine t=" << t << " warmup=" << warmup << " steps=" << total;
      }
    }
}

TEST(LrSchedule, WarmupThenConstant) {
  EXPECT_DOUBLE_EQ(scheduled_lr(1.0, 10, LrDecay::None, 1, 100), 0.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(1.0, 10, LrDecay::None, 6, 100), 0.5);
  EXPECT_DOUBLE_EQ(scheduled_lr(1.0, 10, LrDecay::None, 11, 100), 1.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(1.0, 10, LrDecay::None, 100, 100), 1.0);
}

}  // namespace
}  // namespace mpb
