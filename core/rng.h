// A small, fully specified random number generator (SplitMix64) and a
// Box-Muller normal, so that data and initial weights are identical on every
// machine and standard library (std::normal_distribution is not).
#pragma once

#include <cmath>
#include <cstdint>

namespace mpb {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  // Independent streams: the seed of stream `id` under `seed`.
  static uint64_t stream_seed(uint64_t seed, uint64_t id) { return Rng(seed ^ (id * 0xD1B54A32D192ED03ull)).next_u64(); }

  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal (Box-Muller; the second value is discarded for simplicity).
  double normal() {
    double u1 = uniform();
    double u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  uint64_t below(uint64_t n) { return next_u64() % n; }

 private:
  uint64_t state_;
};

}  // namespace mpb
