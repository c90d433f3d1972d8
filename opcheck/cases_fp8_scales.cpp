// fp8_update_scales: delayed FP8 scaling's per-step update on the device,
// against core/fp8_scaling.h's host Fp8TensorScale (written separately: log2
// where the device core uses frexp; the amaxes here keep clear of the
// rounding edge just below a power of two where the two could differ).
// Exact: every step's scales, the histories and counts, and zeroed amaxes.
// The other backends promise the CPU's bits (max is order-free).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/fp8.h"
#include "core/fp8_scaling.h"
#include "opcheck/cases.h"

namespace mpb::opcheck {
namespace {

class Fp8Scales : public Instance {
 public:
  // Slots alternate E4M3 and E5M2 maxima; amax(step, slot) draws from values
  // that test the rules: powers of two (no off-by-one), zero and inf and NaN
  // (the scale is kept; NaN and inf stay in a max history until they roll
  // out), a tiny amax (the largest finite scale), and an untouched slot.
  Fp8Scales(Fp8Recipe recipe, int64_t n) : recipe_(recipe), n_(n) {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const float pool[] = {448.0f, 224.0f, 225.0f, 1.0f, 3.5f, 1000.0f, 0.0f, 1e-45f, 57344.0f, 0.37f, inf, nan};
    const int np = static_cast<int>(sizeof pool / sizeof pool[0]);
    Gen g(seed_of("fp8_update_scales", recipe.margin, recipe.amax_history_len, recipe.amax_compute_algo, n));
    for (int s = 0; s < kSteps; ++s) {
      std::vector<float> a(static_cast<size_t>(n));
      std::vector<bool> t(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        // Mostly finite, so histories hold real maxima; slot 1 untouched on step 3.
        const int pick = g.coin(0.8) ? g.below(np - 2) : g.below(np);
        a[static_cast<size_t>(i)] = pool[pick] * (g.coin(0.5) ? 1.0f : 0.125f);
        t[static_cast<size_t>(i)] = !(i == 1 && s == 3);
        if (!t[static_cast<size_t>(i)]) a[static_cast<size_t>(i)] = 0.0f;  // no GEMM touched it
      }
      amax_.push_back(a);
      touched_.push_back(t);
    }
  }

  Outputs run(Device& dev) override {
    const int64_t len = recipe_.amax_history_len;
    Host fmax(DType::F32, Shape{n_});
    for (int64_t i = 0; i < n_; ++i) fmax.set(i, i % 2 ? kE5M2Max : kE4M3Max);
    DeviceBuffer scale = put(dev, filled(DType::F32, Shape{n_}, 1.0f)), fp8_max = put(dev, fmax);
    DeviceBuffer history = put(dev, filled(DType::F32, Shape{n_, len}, 0.0f));
    DeviceBuffer steps = put(dev, ints(std::vector<int32_t>(static_cast<size_t>(n_), 0), Shape{n_}));
    Outputs o;
    for (int s = 0; s < kSteps; ++s) {
      Host a(DType::F32, Shape{n_});
      for (int64_t i = 0; i < n_; ++i) a.set(i, amax_[static_cast<size_t>(s)][static_cast<size_t>(i)]);
      DeviceBuffer amax = put(dev, a);
      dev.fp8_update_scales(scale, amax, history, steps, fp8_max, touched_[static_cast<size_t>(s)], recipe_.margin,
                            recipe_.amax_compute_algo == AmaxAlgo::MostRecent);
      o.add("scale after step " + std::to_string(s + 1), dev, scale);
      if (s == kSteps - 1) o.add("amax after the update", dev, amax);
    }
    o.add("steps", dev, steps);
    return o;
  }

  void check(Check& c, Device&, const Outputs& got) override {
    std::vector<Fp8TensorScale> ref;
    for (int64_t i = 0; i < n_; ++i) ref.emplace_back(recipe_, i % 2 ? kE5M2Max : kE4M3Max);
    std::vector<double> counts(static_cast<size_t>(n_), 0.0);
    for (int s = 0; s < kSteps; ++s) {
      std::vector<double> want(static_cast<size_t>(n_));
      for (int64_t i = 0; i < n_; ++i) {
        const auto k = static_cast<size_t>(i);
        if (touched_[static_cast<size_t>(s)][k]) {
          ref[k].update(amax_[static_cast<size_t>(s)][k]);
          ++counts[k];
        }
        want[k] = ref[k].scale();
      }
      const std::string name = "scale after step " + std::to_string(s + 1);
      c.exact(name, got[name], want);
    }
    c.exact("amax after the update", got["amax after the update"], std::vector<double>(static_cast<size_t>(n_), 0.0));
    c.exact("steps", got["steps"], counts);
  }

 private:
  static constexpr int kSteps = 7;
  Fp8Recipe recipe_;
  int64_t n_;
  std::vector<std::vector<float>> amax_;
  std::vector<std::vector<bool>> touched_;
};

}  // namespace

void add_fp8_scale_cases(std::vector<OpCase>& v) {
  const char* tol = "exact: every step's scales == core/fp8_scaling.h's Fp8TensorScale, counts, zeroed amaxes";
  struct Spec {
    Fp8Recipe recipe;
    int64_t n;
    const char* label;
  };
  const Spec specs[] = {{Fp8Recipe{0, 3, AmaxAlgo::Max}, 40, "40 slots, history 3 (entries roll out), max"},
                        {Fp8Recipe{1, 1024, AmaxAlgo::Max}, 7, "7 slots, history 1024, margin 1, max"},
                        {Fp8Recipe{2, 4, AmaxAlgo::MostRecent}, 40, "40 slots, history 4, margin 2, most_recent"},
                        {Fp8Recipe{0, 2, AmaxAlgo::Max}, Device::kFp8MaxSlots, "3072 slots (the most), history 2"}};
  for (const Spec& s : specs)
    v.push_back(make_case<Fp8Scales>("fp8_update_scales", s.label, "f32", Size::Small, tol, true, s.recipe, s.n));
}

}  // namespace mpb::opcheck
