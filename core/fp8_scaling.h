// Delayed per-tensor FP8 scaling, NVIDIA Transformer Engine's recipe
// (transformer_engine.common.recipe.DelayedScaling): each FP8 tensor keeps a
// history of its last `amax_history_len` absolute maxima; the scale used for
// a step was computed from the history *before* that step (the "delay": no
// extra pass over the tensor to find its amax before casting it).
//
//   amax  = max(history)            (amax_compute_algo: max)
//         = the newest entry        (amax_compute_algo: most_recent)
//   scale = 2^(floor(log2(fp8_max / amax)) - margin)
//
// A value x is stored as fp8(x * scale) and read back as that / scale. The
// power of two is TE's original _default_sf_compute (v0.x: exp = floor(log2(
// fp8_max / amax)) - margin; sf = 2^|exp|, inverted for exp < 0): multiplying
// by it is exact, so scaling changes only the range, never the rounding.
// As in TE, an amax of 0 (a tensor that was all zeros) or a non-finite amax
// (an overflowing step) keeps the previous scale. The initial scale is 1.
//
// Host-side bookkeeping: the backends only read the scales and report the
// amaxes (GemmArgs' FP8 operands, core/device.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mpb {

enum class AmaxAlgo { Max, MostRecent };
const char* amax_algo_name(AmaxAlgo a);  // "max", "most_recent"

struct Fp8Recipe {
  int margin = 0;
  int amax_history_len = 1024;  // TE's default
  AmaxAlgo amax_compute_algo = AmaxAlgo::Max;
};

// The scale for one tensor from its amax; `previous` when amax is 0 or not finite.
float fp8_scale_from_amax(float amax, float fp8_max, int margin, float previous);

// One tensor's amax history and current scale.
class Fp8TensorScale {
 public:
  Fp8TensorScale(const Fp8Recipe& recipe, float fp8_max);
  // Records this step's amax and recomputes the scale for the next step.
  void update(float amax);
  float scale() const { return scale_; }
  float reduced_amax() const;  // the history reduced by the recipe's algorithm
  int64_t steps() const { return steps_; }

 private:
  Fp8Recipe recipe_;
  float fp8_max_;
  std::vector<float> history_;  // ring buffer, newest at head_
  int64_t head_ = -1, steps_ = 0;
  float scale_ = 1.0f;
};

}  // namespace mpb
