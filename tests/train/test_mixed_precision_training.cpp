// Mixed-precision training end to end on the CPU device: every policy
// trains; a non-finite gradient skips the step and leaves the master weights
// and optimizer state untouched; reduced-precision tensors really take 2 bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "config/schema.h"
#include "core/precision.h"
#include "models/mlp.h"
#include "models/teacher_data.h"
#include "train/cell_factory.h"
#include "train/trainer.h"
#include "tests/models/model_test_helpers.h"

namespace mpb {
namespace {

CellConfig cell(const std::string& precision) {
  CellConfig c = model_test::mlp_cell({/*hidden_layers=*/2, /*width=*/64, /*input_dim=*/32,
                                       /*classes=*/8, /*batch_size=*/64, /*steps=*/40,
                                       /*warmup_steps=*/0, /*eval_samples=*/128});
  set_precision(c, precision);
  c.optimizer.lr = 3e-3;
  c.numerics_every = 10;
  return c;
}

struct TrainingSetup {
  std::unique_ptr<Device> dev = make_cpu_device();
  std::unique_ptr<Model> model;
  std::unique_ptr<Dataset> data;
  explicit TrainingSetup(const CellConfig& c) : model(build_model(*dev, c, 2)), data(build_dataset(c, c.seed)) {}
  std::vector<uint8_t> bytes(const Tensor& t) {
    std::vector<uint8_t> b(t.bytes());
    dev->download(b.data(), t);
    return b;
  }
};

class EveryPolicy : public ::testing::TestWithParam<const char*> {};

TEST_P(EveryPolicy, TrainsAndRecordsNumerics) {
  CellConfig c = cell(GetParam());
  c.loss_scale.mode = LossScaleMode::Dynamic;
  c.loss_scale.init = 1024;
  TrainingSetup s(c);
  RunRecord rec = train(*s.dev, *s.model, *s.data, c);
  ASSERT_EQ(rec.loss.size(), 40u);
  EXPECT_LT(rec.loss.back(), 0.8 * rec.loss.front()) << GetParam();
  EXPECT_GT(rec.evals.back().accuracy, 1.0 / 8) << GetParam();
  ASSERT_EQ(rec.numerics.size(), 4u);  // steps 10, 20, 30, 40
  const NumericsSample& n = rec.numerics.back();
  EXPECT_GT(n.grads.total, 0);
  EXPECT_GT(n.activations.total, 0);
  EXPECT_EQ(n.weight_grads.total, s.model->grads().numel());
  int64_t binned = 0;
  for (int64_t b : n.grads.hist) binned += b;
  EXPECT_EQ(binned + n.grads.zeros + n.grads.nonfinite, n.grads.total);
}

INSTANTIATE_TEST_SUITE_P(Policies, EveryPolicy,
                         ::testing::Values("fp32", "tf32", "amp_fp16", "amp_bf16", "O1", "O2", "O3",
                                           "params=float32,compute=bfloat16,output=float32"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(SkipStep, NonFiniteGradientLeavesWeightsAndStateUntouched) {
  CellConfig c = cell("amp_fp16");
  c.loss_scale.mode = LossScaleMode::Dynamic;
  c.loss_scale.init = 4096;
  c.inject_nonfinite = {3};
  TrainingSetup s(c);
  Trainer t(*s.dev, *s.model, *s.data, c);
  t.step(1);
  t.step(2);
  const auto params = s.bytes(s.model->params());
  const auto m = s.bytes(t.optimizer_state(0));
  const auto v = s.bytes(t.optimizer_state(1));
  const double scale = t.loss_scale();
  t.step(3);  // inf injected into a gradient
  EXPECT_EQ(t.record().skipped.back(), 1);
  EXPECT_TRUE(std::isnan(t.record().grad_norm.back()));
  EXPECT_EQ(s.bytes(s.model->params()), params) << "master weights changed on a skipped step";
  EXPECT_EQ(s.bytes(t.optimizer_state(0)), m) << "AdamW m changed on a skipped step";
  EXPECT_EQ(s.bytes(t.optimizer_state(1)), v) << "AdamW v changed on a skipped step";
  EXPECT_EQ(t.loss_scale(), scale / 2) << "the scale backs off";
  t.step(4);  // and training carries on
  EXPECT_EQ(t.record().skipped.back(), 0);
  EXPECT_NE(s.bytes(s.model->params()), params);
  EXPECT_TRUE(std::isfinite(t.record().loss.back()));
}

TEST(SkipStep, SkippedStepLeavesTheMomentsForTheNextAppliedStep) {
  // Without loss scaling too: any non-finite gradient skips the whole step.
  CellConfig c = cell("fp32");
  c.inject_nonfinite = {2};
  TrainingSetup s(c);
  Trainer t(*s.dev, *s.model, *s.data, c);
  t.step(1);
  const auto m1 = s.bytes(t.optimizer_state(0));
  t.step(2);
  EXPECT_EQ(s.bytes(t.optimizer_state(0)), m1);
  t.step(3);
  EXPECT_NE(s.bytes(t.optimizer_state(0)), m1);
  EXPECT_EQ(t.record().skipped, (std::vector<int>{0, 1, 0}));
}

TEST(Memory, HalfActivationsTakeHalfTheBytes) {
  auto activation_peak = [](const char* precision) {
    CellConfig c = cell(precision);
    c.steps = 2;
    TrainingSetup s(c);
    train(*s.dev, *s.model, *s.data, c);
    return s.dev->memory().snapshot().peak[static_cast<int>(MemCategory::Activations)];
  };
  const double fp32 = double(activation_peak("fp32"));
  const double bf16 = double(activation_peak("amp_bf16"));
  // Every stored activation is 2 bytes instead of 4; the fp32 probabilities
  // and int32 labels stay, so the ratio is a little above one half.
  EXPECT_LT(bf16 / fp32, 0.6);
  EXPECT_GT(bf16 / fp32, 0.45);
}

}  // namespace
}  // namespace mpb
