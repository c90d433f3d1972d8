// The profiler ranges a training step pushes (Device::range_push, NVTX on
// CUDA): balanced on every path, and named after the model's layers, so an
// nsys timeline reads like the model. Recorded on a CPU device that logs them.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "config/schema.h"
#include "core/forwarding_device.h"
#include "train/cell_factory.h"
#include "train/trainer.h"
#include "tests/models/model_test_helpers.h"

namespace mpb {
namespace {

// The CPU device with its range calls logged (core/forwarding_device.h).
class RangeLog : public ForwardingDevice {
 public:
  RangeLog() : ForwardingDevice(make_cpu_device()) {}
  void range_push(const char* name) override {
    pushed.emplace_back(name);
    ++depth;
    max_depth = std::max(max_depth, depth);
  }
  void range_pop() override {
    --depth;
    min_depth = std::min(min_depth, depth);
  }
  std::vector<std::string> pushed;
  int depth = 0, max_depth = 0, min_depth = 0;
  bool has(const std::string& name) const { return std::count(pushed.begin(), pushed.end(), name) > 0; }
};

void two_steps(RangeLog& dev, const CellConfig& c) {
  std::unique_ptr<Model> model = build_model(dev, c, 1);
  std::unique_ptr<Dataset> data = build_dataset(c, c.seed);
  Trainer t(dev, *model, *data, c);
  t.step(1);
  t.step(2);
}

TEST(ProfilerRanges, MlpStepIsBalancedAndNamedByLayer) {
  CellConfig c = model_test::mlp_cell({2, 32, 16, 4, 16, 2, 0, 16});
  RangeLog dev;
  two_steps(dev, c);
  EXPECT_EQ(dev.depth, 0);
  EXPECT_EQ(dev.min_depth, 0) << "a pop without its push";
  for (const char* name : {"micro-batch forward+backward", "layers.0 forward", "layers.2 forward", "layers.2 backward",
                           "layers.0 backward", "gradient statistics + optimizer step", "train step 1",
                           "train step 2"})
    EXPECT_TRUE(dev.has(name)) << name;
  EXPECT_EQ(dev.max_depth, 3);  // a layer inside the micro-batch inside the step
}

TEST(ProfilerRanges, BertStepWithCheckpointingNamesRecomputes) {
  CellConfig c = model_test::mlp_cell({2, 32, 16, 4, 4, 2, 0, 8});
  set_precision(c, "amp_bf16");
  c.model.kind = ModelKind::Bert;
  c.model.size = "tiny";
  c.model.layers = 2, c.model.hidden = 32, c.model.heads = 2, c.model.seq_len = 16;
  c.data.kind = DataKind::Markov;
  c.data.vocab = 96;
  c.checkpointing = CheckpointPolicy::EveryK;
  c.checkpoint_k = 1;
  RangeLog dev;
  two_steps(dev, c);
  EXPECT_EQ(dev.depth, 0);
  EXPECT_EQ(dev.min_depth, 0);
  for (const char* name : {"embeddings forward", "encoder.layer.0 forward", "encoder.layer.1 forward",
                           "cls head forward", "cls head backward", "encoder.layer.1 backward",
                           "encoder.layer.0 backward", "encoder.layer.0 recompute", "embeddings backward"})
    EXPECT_TRUE(dev.has(name)) << name;
}

}  // namespace
}  // namespace mpb
