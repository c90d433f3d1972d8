#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mpb {

double scheduled_lr(double lr, int warmup, const std::string& decay, long long step, long long steps) {
  if (warmup > 0 && step <= warmup) return lr * double(step) / double(warmup);
  if (decay == "none") return lr;
  const double span = double(std::max<long long>(1, steps - warmup));
  const double progress = std::clamp(double(step - warmup) / span, 0.0, 1.0);
  if (decay == "linear") return lr * (1.0 - progress);
  if (decay == "cosine") return lr * 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress));
  throw std::invalid_argument("unknown learning-rate decay '" + decay + "'");
}

}  // namespace mpb
