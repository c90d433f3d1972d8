// Loss scaling as a state machine, applied once per optimizer step.
//  none:    scale 1, never skips on its own (non-finite grads still skip).
//  static:  a fixed scale.
//  dynamic: PyTorch GradScaler's rule: a non-finite step multiplies the scale
//           by backoff_factor (0.5) and skips; growth_interval (2000)
//           consecutive finite steps multiply it by growth_factor (2).
//           Options: `min`/`max` clamp the scale (apex min_loss_scale /
//           max_loss_scale, JMP), and `hysteresis` (DeepSpeed): the scale only
//           backs off after that many non-finite steps; the step is skipped
//           every time.
#pragma once

#include "config/cell_config.h"

namespace mpb {

class LossScaler {
 public:
  explicit LossScaler(const LossScaleConfig& cfg);
  double scale() const { return scale_; }
  // Records one optimizer step's finite check; returns true when the
  // optimizer step must be skipped.
  bool update(bool grads_finite);

 private:
  LossScaleConfig cfg_;
  double scale_;
  int good_steps_ = 0;
  int hysteresis_left_;
};

}  // namespace mpb
