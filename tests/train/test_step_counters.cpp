// Issue 10: after warm-up, a training step allocates nothing and builds no
// GEMM plan, and its host syncs are the ones the trainer means to make. On
// the CPU (the tracking allocator's count, oneDNN primitive creations, the
// Device's synchronising calls) for the MLP and BERT cells of the
// experiments; tests/gpu/test_step_counters_cuda.cpp runs the same cells on
// a GPU.
#include <gtest/gtest.h>

#include <string>

#include "backends/cpu/cpu_device.h"
#include "config/schema.h"
#include "train/cell_factory.h"
#include "train/trainer.h"
#include "tests/models/model_test_helpers.h"
#include "tests/train/train_test_helpers.h"

namespace mpb {
namespace {

// An MLP cell with every path a step can take: probes on some steps, an
// evaluation between steps whose last batch is smaller than the others, and
// an injected non-finite step (the loss scaler's skip path).
CellConfig mlp_cell(const std::string& precision, bool fused, int accumulation) {
  CellConfig c = model_test::mlp_cell({/*hidden_layers=*/2, /*width=*/64, /*input_dim=*/32, /*classes=*/8,
                                       /*batch_size=*/64, /*steps=*/8, /*warmup_steps=*/2, /*eval_samples=*/100});
  train_test::take_every_step_path(c, precision, fused, accumulation);
  return c;
}

// quickstart.yaml's BERT-tiny cell, smaller.
CellConfig bert_cell(const std::string& precision, bool fused, CheckpointPolicy checkpointing) {
  CellConfig c = mlp_cell(precision, fused, 1);
  model_test::make_tiny_bert(c);
  c.data.eval_samples = 20;
  c.checkpointing = checkpointing;
  return c;
}

RunRecord run(const CellConfig& c) {
  auto dev = make_cpu_device();
  return train_test::train_cell(*dev, c);
}

std::string name(const CellConfig& c) {
  return std::string(c.model.kind == ModelKind::Bert ? "bert " : "mlp ") + c.policy.name +
         (c.fused ? " fused" : " unfused") + " accumulation " + std::to_string(c.accumulation);
}

void expect_quiet_steps(const CellConfig& c) {
  SCOPED_TRACE(name(c));
  const RunRecord r = run(c);
  ASSERT_EQ(r.allocs.size(), static_cast<size_t>(c.steps));
  // train() warms up first, so every step is quiet, not only the timed ones.
  for (int s = 0; s < c.steps; ++s) {
    EXPECT_EQ(r.allocs[s], 0) << "step " << s + 1;
    EXPECT_EQ(r.plans_created[s], 0) << "step " << s + 1;
    // The CPU's syncs: the timer, and the step's results (its loss and the
    // optimizer's decision) read once after it, whatever the number of
    // micro-batches (their losses add up on the device) and with none in
    // between: the gradients' statistics stay on the device. A probed step
    // adds one per histogram.
    if (!r.probed[s]) EXPECT_EQ(r.host_syncs[s], 2) << "step " << s + 1;
    else EXPECT_GT(r.host_syncs[s], 2) << "step " << s + 1;
  }
  EXPECT_TRUE(r.gemm_fallbacks.empty());
}

TEST(StepCounters, MlpStepsAllocateNothingAfterWarmUp) {
  // fp8: its delayed-scaling update reads the amaxes between steps, not inside one.
  for (const char* precision : {"fp32", "amp_bf16", "amp_fp16", "fp8"})
    for (bool fused : {false, true})
      for (int accumulation : {1, 2, 4}) expect_quiet_steps(mlp_cell(precision, fused, accumulation));
}

TEST(StepCounters, BertStepsAllocateNothingAfterWarmUp) {
  for (const char* precision : {"fp32", "amp_bf16", "amp_fp16"})
    for (bool fused : {false, true}) expect_quiet_steps(bert_cell(precision, fused, CheckpointPolicy::Off));
  expect_quiet_steps(bert_cell("amp_bf16", true, CheckpointPolicy::EveryLayer));
}

// LAMB's trust ratios are computed on the device (Device::lamb_step's
// scratch, allocated with the trainer): it adds no allocation and no sync.
TEST(StepCounters, LambStepsAllocateNothingAndAddNoSync) {
  for (const char* precision : {"fp32", "amp_bf16"})
    for (bool fused : {false, true}) {
      CellConfig c = bert_cell(precision, fused, CheckpointPolicy::Off);
      c.optimizer.kind = OptimizerKind::Lamb;
      expect_quiet_steps(c);
    }
}

// The counters see what warm-up prevents: without it, the first step builds
// the GEMM primitives and grows the emulated fp16 GEMM's scratch.
TEST(StepCounters, WithoutWarmUpTheFirstStepAllocatesAndBuildsPlans) {
  const CellConfig c = mlp_cell("amp_fp16", true, 1);
  auto dev = make_cpu_device();
  auto model = build_model(*dev, c, 7);
  auto data = build_dataset(c, 7);
  Trainer t(*dev, *model, *data, c);
  t.step(1);
  t.step(2);
  const RunRecord& r = t.record();
  EXPECT_GT(r.allocs[0], 0);
  EXPECT_GT(r.plans_created[0], 0);
  EXPECT_EQ(r.allocs[1], 0);
  EXPECT_EQ(r.plans_created[1], 0);
}

// The warm-up leaves no trace: steps after it have the bits of steps without
// one. fp8: its forward passes (a zero-scaled training batch and the
// evaluation's batches) record amaxes and saturation counts that must not
// reach step 1's delayed-scaling update (losses, scales, the probed amaxes
// and saturated fractions). Dropout: its micro-batches must not advance the
// model's dropout streams.
RunRecord three_steps(const CellConfig& c, bool warm_up) {
  auto dev = make_cpu_device();
  auto model = build_model(*dev, c, 7);
  auto data = build_dataset(c, 7);
  Trainer t(*dev, *model, *data, c);
  if (warm_up) t.warm_up();
  for (int s = 1; s <= 3; ++s) t.step(s);
  return t.record();
}

TEST(StepCounters, TheWarmUpLeavesNoTraceInFp8Scaling) {
  CellConfig c = mlp_cell("fp8", true, 2);
  c.numerics_every = 1;
  c.inject_nonfinite = {};
  const RunRecord cold = three_steps(c, false), warm = three_steps(c, true);
  ASSERT_EQ(warm.numerics.size(), 3u);
  for (size_t s = 0; s < 3; ++s) {
    SCOPED_TRACE("step " + std::to_string(s + 1));
    EXPECT_EQ(warm.loss[s], cold.loss[s]);
    const auto& w = warm.numerics[s].fp8;
    const auto& k = cold.numerics[s].fp8;
    ASSERT_EQ(w.size(), k.size());
    ASSERT_FALSE(w.empty());
    for (size_t i = 0; i < w.size(); ++i) {
      EXPECT_EQ(w[i].scale, k[i].scale) << w[i].name;
      EXPECT_EQ(w[i].amax, k[i].amax) << w[i].name;
      EXPECT_EQ(w[i].saturated_fraction, k[i].saturated_fraction) << w[i].name;
    }
  }
}

TEST(StepCounters, TheWarmUpLeavesNoTraceInDropoutStreams) {
  CellConfig c = bert_cell("fp32", true, CheckpointPolicy::Off);
  c.model.dropout = 0.1;
  c.accumulation = 2;
  c.batch_size = 8;
  c.inject_nonfinite = {};
  const std::vector<double> cold = three_steps(c, false).loss, warm = three_steps(c, true).loss;
  for (size_t s = 0; s < 3; ++s) EXPECT_EQ(warm[s], cold[s]) << "step " << s + 1;
}

}  // namespace
}  // namespace mpb
