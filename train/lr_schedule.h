// The learning rate of optimizer update t (1-based, counted in applied
// updates, so a skipped non-finite step does not advance the schedule, as
// with GradScaler). The step convention is PyTorch's LambdaLR as HuggingFace's
// get_linear_schedule_with_warmup / get_cosine_schedule_with_warmup (and
// Google's and NVIDIA's BERT recipes) use it: update t reads the schedule at
// s = t - 1 (scheduler.step() runs after optimizer.step()), so
//   s <  warmup:  lr * s / warmup             (the first update has lr 0)
//   s >= warmup:  lr * f(p), p = (s - warmup) / max(1, steps - warmup)
//                 f = 1 (none) | 1 - p (linear) | (1 + cos(pi p)) / 2 (cosine)
// and the last update (s = steps - 1) has lr * 1/(steps - warmup) under linear
// decay, never 0. docs/CONFIG.md has a table of the first and last updates.
#pragma once

#include "config/cell_config.h"

namespace mpb {

double scheduled_lr(double lr, int warmup, LrDecay decay, long long step, long long steps);

}  // namespace mpb
