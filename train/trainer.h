// The training loop: micro-batches -> forward/backward (scaled loss) ->
// unscale + finite check -> optimizer step or skip -> scale update, with
// device-timed steps and periodic evaluation. Nothing here is model-specific.
#pragma once

#include <functional>
#include <vector>

#include "core/device.h"
#include "models/model.h"
#include "models/teacher_data.h"
#include "runner/config.h"

namespace mpb {

struct EvalPoint {
  int step = 0;
  double loss = 0.0;
  double accuracy = 0.0;
};

struct RunRecord {
  std::vector<double> step_ms, loss, wall_s, loss_scale, grad_norm;
  std::vector<int> skipped;
  std::vector<EvalPoint> evals;
  MemorySnapshot memory;  // peaks over the whole run
  double flops_per_step = 0.0;
};

// Called after every optimizer step (for progress lines).
using StepCallback = std::function<void(int step, const RunRecord&)>;

// Trains `model` for cfg.steps optimizer steps on `data`.
RunRecord train(Device& dev, Model& model, const TeacherData& data, const CellConfig& cfg,
                const StepCallback& on_step = {});

}  // namespace mpb
