#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace mpb {

double scheduled_lr(double lr, int warmup, LrDecay decay, long long step, long long steps) {
  const long long s = step - 1;  // LambdaLR's index: 0 for the first update
  if (warmup > 0 && s < warmup) return lr * double(s) / double(warmup);
  const double span = double(std::max<long long>(1, steps - warmup));
  const double progress = std::clamp(double(s - warmup) / span, 0.0, 1.0);
  switch (decay) {
    case LrDecay::None: return lr;
    case LrDecay::Linear: return lr * (1.0 - progress);
    case LrDecay::Cosine: return lr * 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress));
  }
  return lr;
}

}  // namespace mpb
