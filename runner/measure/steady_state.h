// Where a repeat's measured window begins: after the configured warm-up, and
// after any start-up cost that outlasts it (issue 18: start-up steps leaking
// into the measured window caused phantom 50% regressions elsewhere).
#pragma once

#include <string>
#include <vector>

namespace mpb {

struct SteadyState {
  int first_step = 0;       // index of the first measured step (>= the configured warm-up)
  int configured_warmup = 0;
  double reference_ms = 0;  // the median of the later half of the post-warm-up steps
  bool extended = false;    // unprobed steps after the warm-up were left out: start-up outlasted it
};

// The rule, for the result files (docs/RESULTS.md).
extern const char* const kSteadyStateRule;

// From `warmup` on, the first step whose next kWindow unprobed steps have a
// median within kTolerance of the reference, the median of the later half of
// the post-warm-up unprobed steps (start-up is over by then, or the run is
// too short to tell). Searched up to the middle of the post-warm-up steps at
// most, so at least half of them stay measured. probed[i] != 0: step i also
// sampled numerics (slower on purpose) and is not compared.
SteadyState find_steady_state(const std::vector<double>& step_ms, const std::vector<int>& probed, int warmup);

}  // namespace mpb
