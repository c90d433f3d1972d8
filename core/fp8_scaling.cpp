#include "core/fp8_scaling.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mpb {

const char* amax_algo_name(AmaxAlgo a) { return a == AmaxAlgo::Max ? "max" : "most_recent"; }

float fp8_scale_from_amax(float amax, float fp8_max, int margin, float previous) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return previous;
  // floor(log2(fp8_max / amax)) in double: fp8_max / amax is a power of two
  // exactly when it should be, and log2 of a power of two is exact, so an
  // amax equal to fp8_max / 2^k gives exponent k, not k - 1.
  const int e = static_cast<int>(std::floor(std::log2(static_cast<double>(fp8_max) / amax))) - margin;
  // 2^e in fp32: amax >= 2^-149 bounds e above by about 149 + 16; clamp to
  // the finite fp32 powers of two so a tiny amax gives the largest scale, not inf.
  return std::ldexp(1.0f, std::clamp(e, -126, 127));
}

Fp8TensorScale::Fp8TensorScale(const Fp8Recipe& recipe, float fp8_max) : recipe_(recipe), fp8_max_(fp8_max) {
  if (recipe.amax_history_len < 1) throw std::invalid_argument("fp8.amax_history_len must be at least 1");
  if (recipe.margin < 0) throw std::invalid_argument("fp8.margin must be >= 0");
  history_.assign(static_cast<size_t>(recipe.amax_history_len), 0.0f);
}

float Fp8TensorScale::reduced_amax() const {
  if (head_ < 0) return 0.0f;
  if (recipe_.amax_compute_algo == AmaxAlgo::MostRecent) return history_[static_cast<size_t>(head_)];
  // Max over the filled part; NaN (an overflowing step) propagates, as
  // torch.max over TE's history tensor does, and keeps the previous scale.
  const size_t filled = static_cast<size_t>(std::min<int64_t>(steps_, static_cast<int64_t>(history_.size())));
  float m = 0.0f;
  for (size_t i = 0; i < filled; ++i) {
    if (std::isnan(history_[i])) return history_[i];
    m = std::max(m, history_[i]);
  }
  return m;
}

void Fp8TensorScale::update(float amax) {
  head_ = (head_ + 1) % static_cast<int64_t>(history_.size());
  history_[static_cast<size_t>(head_)] = amax;
  ++steps_;
  scale_ = fp8_scale_from_amax(reduced_amax(), fp8_max_, recipe_.margin, scale_);
}

}  // namespace mpb
