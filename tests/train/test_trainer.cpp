// The training loop's contracts: gradient accumulation equals the large batch,
// and a step is either applied or skipped as a whole.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "models/mlp.h"
#include "models/teacher_data.h"
#include "train/cell_factory.h"
#include "train/trainer.h"
#include "tests/models/model_test_helpers.h"

namespace mpb {
namespace {

CellConfig small_cell(int accumulation, int batch) {
  CellConfig c = model_test::mlp_cell({/*hidden_layers=*/2, /*width=*/64, /*input_dim=*/32,
                                       /*classes=*/8, /*batch_size=*/batch, /*steps=*/3,
                                       /*warmup_steps=*/0, /*eval_samples=*/64});
  c.accumulation = accumulation;
  return c;
}

std::vector<float> train_and_get_params(const CellConfig& c, RunRecord* rec = nullptr) {
  auto dev = make_cpu_device();
  auto model = build_model(*dev, c, 3);
  auto data = build_dataset(c, c.seed);
  RunRecord r = train(*dev, *model, *data, c);
  if (rec) *rec = r;
  std::vector<float> p(static_cast<size_t>(model->params().numel()));
  dev->download(p.data(), model->params());
  return p;
}

TEST(Trainer, AccumulationOf4x64EqualsBatchOf256InFp32) {
  RunRecord big_rec, acc_rec;
  std::vector<float> big = train_and_get_params(small_cell(1, 256), &big_rec);
  std::vector<float> acc = train_and_get_params(small_cell(4, 256), &acc_rec);
  ASSERT_EQ(big.size(), acc.size());
  // Same data (micro-batches are row slices of the step's batch), same loss
  // scaling (each micro loss / 256). Only the fp32 summation order of dW and
  // db differs (four partial GEMMs accumulated vs one), so gradients agree to
  // ~1e-6 relative; after 3 Adam steps (update size ~lr, normalised by
  // sqrt(v)) parameters agree to well under 1e-5 absolute.
  for (size_t i = 0; i < big.size(); ++i) ASSERT_NEAR(big[i], acc[i], 1e-5) << "parameter " << i;
  for (size_t s = 0; s < big_rec.loss.size(); ++s) EXPECT_NEAR(big_rec.loss[s], acc_rec.loss[s], 1e-5);
  // And the updates were real: parameters moved away from their initial values.
  CellConfig zero_steps = small_cell(1, 256);
  zero_steps.steps = 1;
  zero_steps.optimizer.lr = 1e-30;
  std::vector<float> init = train_and_get_params(zero_steps);
  double moved = 0;
  for (size_t i = 0; i < big.size(); ++i) moved = std::max(moved, double(std::abs(big[i] - init[i])));
  EXPECT_GT(moved, 1e-3);
}

TEST(Trainer, LossFallsOnTheTeacherTask) {
  CellConfig c = small_cell(1, 128);
  c.steps = 60;
  c.optimizer.lr = 3e-3;
  RunRecord rec;
  train_and_get_params(c, &rec);
  ASSERT_EQ(rec.loss.size(), 60u);
  // ln(8) = 2.08 at chance; a learnable task must fall well below it.
  EXPECT_LT(rec.loss.back(), 0.6 * rec.loss.front());
  EXPECT_GT(rec.evals.back().accuracy, 0.5);
}

}  // namespace
}  // namespace mpb

namespace mpb {
namespace {

// optimizer.decay_exclude: after one step, excluding the biases changes the
// biases alone (the weights see the same gradient and the same decay), and
// the fused optimizer (one pass with no_decay ranges) equals the unfused one
// (a call per tensor with its group's decay) bit for bit.
TEST(Trainer, DecayExcludeSparesTheBiasesAloneFusedAndUnfused) {
  std::vector<std::vector<float>> runs;  // [decay all, bias excluded] x [unfused, fused]
  for (bool exclude : {false, true})
    for (bool fused : {false, true}) {
      CellConfig c = small_cell(1, 64);
      c.steps = 1;
      c.fused = fused;
      c.optimizer.lr = 1e-2;
      c.optimizer.weight_decay = 10.0;  // decay factor 0.9: a bias treated wrongly is far off
      if (exclude) c.optimizer.decay_exclude = std::vector<ParamRole>{ParamRole::Bias};
      runs.push_back(train_and_get_params(c));
    }
  EXPECT_EQ(runs[0], runs[1]);  // fused == unfused, decaying every parameter
  EXPECT_EQ(runs[2], runs[3]);  // and with the biases excluded
  auto dev = make_cpu_device();
  const CellConfig c = small_cell(1, 64);
  const auto model = build_model(*dev, c, 3);
  int biases = 0;
  for (const ParamInfo& p : model->param_info())
    for (int64_t i = p.offset; i < p.offset + p.shape.numel(); ++i) {
      const auto k = static_cast<size_t>(i);
      if (p.role == ParamRole::Bias) {
        biases += runs[0][k] != runs[2][k];
      } else {
        ASSERT_EQ(runs[0][k], runs[2][k]) << p.name << " element " << i - p.offset;
      }
    }
  EXPECT_GT(biases, 8);  // every bias element moved differently (zero-initialised ones may tie)
}

TEST(Trainer, NoDecayRangesMergeAdjacentTensors) {
  const std::vector<ParamInfo> params = {{"w0", Shape{4, 2}, 0, ParamRole::Weight},
                                         {"b0", Shape{4}, 8, ParamRole::Bias},
                                         {"ln.weight", Shape{4}, 12, ParamRole::Norm},
                                         {"ln.bias", Shape{4}, 16, ParamRole::Bias},
                                         {"w1", Shape{2, 4}, 20, ParamRole::Weight},
                                         {"b1", Shape{2}, 28, ParamRole::Bias}};
  const auto ranges = no_decay_ranges(params, {ParamRole::Bias, ParamRole::Norm});
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].begin, 8);
  EXPECT_EQ(ranges[0].end, 20);
  EXPECT_EQ(ranges[1].begin, 28);
  EXPECT_EQ(ranges[1].end, 30);
  const auto biases = no_decay_ranges(params, {ParamRole::Bias});
  ASSERT_EQ(biases.size(), 3u);
  EXPECT_EQ(biases[1].begin, 16);
  EXPECT_TRUE(no_decay_ranges(params, {}).empty());
}

}  // namespace
}  // namespace mpb
