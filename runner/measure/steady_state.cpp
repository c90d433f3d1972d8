#include "runner/measure/steady_state.h"

#include <algorithm>

#include "runner/measure/stats.h"

namespace mpb {

namespace {
// Five steps: consecutive step times decorrelate within about six steps on the
// development VM (docs/REPORTS.md), so a median of five is one step's noise
// damped, yet short enough to place the end of start-up within a few steps.
constexpr int kWindow = 5;
// 10% above the reference still counts as start-up: above the robust spread of
// steps on a quiet machine (about 5%), below the start-up effects that matter
// (first-touch allocation, autotuning, clocks ramping: 1.5x-3x).
constexpr double kTolerance = 0.10;
}  // namespace

const char* const kSteadyStateRule =
    "the first step from warmup_steps on whose next 5 unprobed steps have a median within 10% of the median of "
    "the later half of the post-warm-up steps, searched up to the middle of them";

SteadyState find_steady_state(const std::vector<double>& step_ms, const std::vector<int>& probed, int warmup) {
  SteadyState s;
  const int n = static_cast<int>(step_ms.size());
  s.configured_warmup = std::clamp(warmup, 0, n);
  s.first_step = s.configured_warmup;
  // The unprobed steps after the warm-up, by index.
  std::vector<int> idx;
  for (int i = s.configured_warmup; i < n; ++i)
    if (i >= static_cast<int>(probed.size()) || !probed[static_cast<size_t>(i)]) idx.push_back(i);
  if (static_cast<int>(idx.size()) < 2 * kWindow) return s;  // too few steps to tell start-up from noise
  const size_t half = idx.size() / 2;
  std::vector<double> later;
  for (size_t k = half; k < idx.size(); ++k) later.push_back(step_ms[static_cast<size_t>(idx[k])]);
  s.reference_ms = median(later);
  for (size_t k = 0; k < half; ++k) {
    std::vector<double> window;
    for (size_t w = k; w < k + kWindow; ++w) window.push_back(step_ms[static_cast<size_t>(idx[w])]);
    if (median(window) <= (1.0 + kTolerance) * s.reference_ms) {
      s.first_step = idx[k];
      s.extended = k > 0;
      return s;
    }
  }
  s.first_step = idx[half];  // never settled in the first half: measure the second
  s.extended = true;
  return s;
}

}  // namespace mpb
