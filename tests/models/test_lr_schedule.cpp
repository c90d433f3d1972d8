// The learning-rate schedule: warm-up, then constant, linear or cosine decay.
#include <gtest/gtest.h>

#include "train/lr_schedule.h"

namespace mpb {
namespace {

TEST(LrSchedule, ConstantByDefault) {
  for (long long t : {1LL, 50LL, 100LL}) EXPECT_DOUBLE_EQ(scheduled_lr(1e-3, 0, LrDecay::None, t, 100), 1e-3);
}

TEST(LrSchedule, LinearWarmupThenConstant) {
  EXPECT_DOUBLE_EQ(scheduled_lr(1.0, 10, LrDecay::None, 1, 100), 0.1);
  EXPECT_DOUBLE_EQ(scheduled_lr(1.0, 10, LrDecay::None, 5, 100), 0.5);
  EXPECT_DOUBLE_EQ(scheduled_lr(1.0, 10, LrDecay::None, 10, 100), 1.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(1.0, 10, LrDecay::None, 11, 100), 1.0);
}

TEST(LrSchedule, LinearAndCosineDecayReachZeroAtTheEnd) {
  EXPECT_DOUBLE_EQ(scheduled_lr(1.0, 10, LrDecay::Linear, 55, 100), 0.5);
  EXPECT_DOUBLE_EQ(scheduled_lr(1.0, 10, LrDecay::Linear, 100, 100), 0.0);
  EXPECT_NEAR(scheduled_lr(1.0, 0, LrDecay::Cosine, 50, 100), 0.5, 1e-12);
  EXPECT_NEAR(scheduled_lr(1.0, 0, LrDecay::Cosine, 100, 100), 0.0, 1e-12);
  EXPECT_NEAR(scheduled_lr(1.0, 0, LrDecay::Cosine, 0, 100), 1.0, 1e-12);
}

}  // namespace
}  // namespace mpb
