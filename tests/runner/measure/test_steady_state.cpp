// Where the measured window begins (runner/measure/steady_state.h): after the
// configured warm-up, and after start-up that outlasts it.
#include <gtest/gtest.h>

#include <vector>

#include "runner/measure/steady_state.h"

namespace mpb {
namespace {

std::vector<double> flat(int n, double ms) { return std::vector<double>(static_cast<size_t>(n), ms); }

TEST(SteadyState, AFlatRunIsMeasuredFromTheConfiguredWarmup) {
  const SteadyState s = find_steady_state(flat(40, 4.0), {}, 5);
  EXPECT_EQ(s.first_step, 5);
  EXPECT_EQ(s.configured_warmup, 5);
  EXPECT_FALSE(s.extended);
  EXPECT_DOUBLE_EQ(s.reference_ms, 4.0);
}

TEST(SteadyState, StartUpThatOutlastsTheWarmupIsLeftOut) {
  // Steps 0-11 at 2x-3x (say, autotuning), then 4 ms: measured from where a
  // window of five is within 10% of the reference.
  std::vector<double> ms = flat(60, 4.0);
  for (int i = 0; i < 12; ++i) ms[static_cast<size_t>(i)] = 12.0 - 0.5 * i;
  const SteadyState s = find_steady_state(ms, {}, 3);
  EXPECT_TRUE(s.extended);
  // The window starting at 10 holds 7, 6.5, 4, 4, 4: median 4 -> first_step 10.
  EXPECT_EQ(s.first_step, 10);
}

TEST(SteadyState, NoiseWithinTheToleranceDoesNotMoveTheStart) {
  std::vector<double> ms;
  for (int i = 0; i < 50; ++i) ms.push_back(i % 2 ? 4.3 : 3.8);  // +-6% around 4
  EXPECT_EQ(find_steady_state(ms, {}, 2).first_step, 2);
}

TEST(SteadyState, ProbedStepsAreNotCompared) {
  // Every 4th step samples numerics at 3x; the rest are flat from the warm-up.
  std::vector<double> ms = flat(40, 4.0);
  std::vector<int> probed(40, 0);
  for (int i = 0; i < 40; i += 4) {
    ms[static_cast<size_t>(i)] = 12.0;
    probed[static_cast<size_t>(i)] = 1;
  }
  const SteadyState s = find_steady_state(ms, probed, 2);
  EXPECT_EQ(s.first_step, 2);
  EXPECT_FALSE(s.extended);
}

TEST(SteadyState, AtLeastHalfOfThePostWarmupStepsStayMeasured) {
  // Falling all the way: never within 10% of the later half's median in time.
  std::vector<double> ms;
  for (int i = 0; i < 40; ++i) ms.push_back(100.0 / (1.0 + i));
  const SteadyState s = find_steady_state(ms, {}, 0);
  EXPECT_TRUE(s.extended);
  EXPECT_LE(s.first_step, 20);
}

TEST(SteadyState, TooFewStepsToTellKeepTheWarmup) {
  std::vector<double> ms = {9, 8, 7, 6, 5, 4, 4, 4};
  const SteadyState s = find_steady_state(ms, {}, 1);
  EXPECT_EQ(s.first_step, 1);
  EXPECT_FALSE(s.extended);
  // A warm-up beyond the recorded steps is clamped, not an out-of-range index.
  EXPECT_EQ(find_steady_state(ms, {}, 20).first_step, 8);
}

}  // namespace
}  // namespace mpb
