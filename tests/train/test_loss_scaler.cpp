// The loss scaler as a state machine: a sequence of finite/non-finite flags
// must give the reference implementations' scale sequences.
#include <gtest/gtest.h>

#include <vector>

#include "train/loss_scaler.h"

namespace mpb {
namespace {

std::vector<double> run(LossScaleConfig cfg, const std::vector<bool>& finite, std::vector<bool>* skipped = nullptr) {
  LossScaler s(cfg);
  std::vector<double> scales;
  for (bool f : finite) {
    bool skip = s.update(f);
    if (skipped) skipped->push_back(skip);
    scales.push_back(s.scale());
  }
  return scales;
}

LossScaleConfig dynamic(double init, int interval) {
  LossScaleConfig c;
  c.mode = LossScaleMode::Dynamic;
  c.init = init;
  c.growth_interval = interval;
  return c;
}

TEST(LossScaler, DynamicFollowsPyTorchGradScaler) {
  // torch.cuda.amp.GradScaler (_amp_update_scale_): inf -> scale *= 0.5 and
  // the growth tracker resets; growth_interval consecutive finite steps ->
  // scale *= 2 and the tracker resets. Sequence worked by hand from that rule.
  std::vector<bool> skipped;
  auto s = run(dynamic(65536, 2), {true, true, false, true, false, false, true, true, true}, &skipped);
  EXPECT_EQ(s, (std::vector<double>{65536, 131072, 65536, 65536, 32768, 16384, 16384, 32768, 32768}));
  EXPECT_EQ(skipped, (std::vector<bool>{false, false, true, false, true, true, false, false, false}));
}

TEST(LossScaler, DefaultsAreGradScalers) {
  LossScaleConfig c;
  c.mode = LossScaleMode::Dynamic;
  LossScaler s(c);
  EXPECT_EQ(s.scale(), 65536.0);  // 2^16
  for (int i = 0; i < 1999; ++i) s.update(true);
  EXPECT_EQ(s.scale(), 65536.0);
  s.update(true);  // the 2000th consecutive finite step
  EXPECT_EQ(s.scale(), 131072.0);
  s.update(false);
  EXPECT_EQ(s.scale(), 65536.0);
}

TEST(LossScaler, MinFloorAndMaxCap) {
  LossScaleConfig c = dynamic(8, 1);
  c.min = 2;  // apex min_loss_scale / JMP: never back off below it
  c.max = 32;  // apex max_loss_scale: never grow beyond it
  auto s = run(c, {false, false, false, true, true, true, true});
  EXPECT_EQ(s, (std::vector<double>{4, 2, 2, 4, 8, 16, 32}));
  s = run(c, {true, true, true, true});
  EXPECT_EQ(s, (std::vector<double>{16, 32, 32, 32}));
}

TEST(LossScaler, HysteresisFollowsDeepSpeed) {
  // DeepSpeed DynamicLossScaler(delayed_shift=2, consecutive_hysteresis=False):
  // the first overflow only spends the budget; once it is spent every
  // overflow backs off, until the scale grows again (which restores it).
  LossScaleConfig c = dynamic(1024, 3);
  c.hysteresis = 2;
  std::vector<bool> skipped;
  auto s = run(c, {false, false, false, true, true, true, false, false}, &skipped);
  EXPECT_EQ(s, (std::vector<double>{1024, 512, 256, 256, 256, 512, 512, 256}));
  // Every overflow skips its step, whether or not the scale moved.
  EXPECT_EQ(skipped, (std::vector<bool>{true, true, true, false, false, false, true, true}));
}

TEST(LossScaler, StaticAndNoneNeverMoveButStillSkipNonFinite) {
  LossScaleConfig st;
  st.mode = LossScaleMode::Static;
  st.value = 128;
  std::vector<bool> skipped;
  EXPECT_EQ(run(st, {true, false, true}, &skipped), (std::vector<double>{128, 128, 128}));
  EXPECT_EQ(skipped, (std::vector<bool>{false, true, false}));
  LossScaleConfig none;
  skipped.clear();
  EXPECT_EQ(run(none, {false, true}, &skipped), (std::vector<double>{1, 1}));
  EXPECT_EQ(skipped, (std::vector<bool>{true, false}));
}

}  // namespace
}  // namespace mpb
