#include "train/loss_scaler.h"

#include <algorithm>

namespace mpb {

LossScaler::LossScaler(const LossScaleConfig& cfg) : cfg_(cfg), hysteresis_left_(cfg.hysteresis) {
  if (cfg.mode == LossScaleMode::Static) scale_ = cfg.value;
  else if (cfg.mode == LossScaleMode::Dynamic) scale_ = std::clamp(cfg.init, cfg.min > 0 ? cfg.min : 0.0, cfg.max > 0 ? cfg.max : cfg.init);
  else scale_ = 1.0;
}

bool LossScaler::update(bool finite) {
  if (cfg_.mode != LossScaleMode::Dynamic) return !finite;
  if (finite) {
    // GradScaler: grow after growth_interval consecutive finite steps.
    if (++good_steps_ >= cfg_.growth_interval) {
      scale_ *= cfg_.growth_factor;
      if (cfg_.max > 0) scale_ = std::min(scale_, cfg_.max);
      good_steps_ = 0;
      // DeepSpeed (consecutive_hysteresis=False, its default) restores the
      // hysteresis budget only when the scale grows.
      hysteresis_left_ = cfg_.hysteresis;
    }
    return false;
  }
  good_steps_ = 0;
  // DeepSpeed: while budget remains, an overflow only spends it; once it is
  // down to 1, every overflow backs off (the budget is not restored here).
  if (hysteresis_left_ > 1) {
    --hysteresis_left_;
  } else {
    scale_ *= cfg_.backoff_factor;
    if (cfg_.min > 0) scale_ = std::max(scale_, cfg_.min);
  }
  return true;
}

}  // namespace mpb
