// Shared by the training tests that run on both backends: the step-counter
// tests' CPU half (tests/train/test_step_counters.cpp) and GPU half
// (tests/gpu/test_step_counters_cuda.cpp) must ask the same of their devices.
#pragma once

#include <string>

#include "config/schema.h"
#include "core/device.h"
#include "train/cell_factory.h"
#include "train/trainer.h"

namespace mpb {
namespace train_test {

// The settings that send a training step down every path it has: probes on
// some steps, an evaluation between steps, an injected non-finite step (the
// loss scaler's skip path, with a dynamic scale for fp16), at the given
// precision, fusion and accumulation.
inline void take_every_step_path(CellConfig& c, const std::string& precision, bool fused, int accumulation) {
  set_precision(c, precision);
  if (precision == "amp_fp16") c.loss_scale.mode = LossScaleMode::Dynamic;
  c.fused = fused;
  c.accumulation = accumulation;
  c.numerics_every = 3;
  c.eval_every = 2;
  c.inject_nonfinite = {5};
}

// The cell's model and data (seed 7) trained on `dev`; the caller hands a fresh
// device so that its counters see this run alone.
inline RunRecord train_cell(Device& dev, const CellConfig& c) {
  auto model = build_model(dev, c, 7);
  auto data = build_dataset(c, 7);
  return train(dev, *model, *data, c);
}

}  // namespace train_test
}  // namespace mpb
