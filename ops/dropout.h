// Inverted dropout with a counter-based RNG, shared by the CPU op
// (backends/cpu/kernels/transformer.cpp) and the CUDA kernel: no state, no stored mask.
// Element i (the flat index into the tensor) of a call with `seed` is kept
// iff dropout_bits(seed, i) >= dropout_threshold(p), and then multiplied by
// dropout_scale(p) = 1/(1-p) (fp32); dropped elements are exactly 0 (even
// when the input is inf or NaN). The same call on the gradient with the same
// seed is the backward pass. Callers must use a distinct seed per dropout
// site and step: the mask depends on (seed, i) only.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/scalar.h"

namespace mpb::scalar {
MPB_ISA_NAMESPACE_BEGIN

// SplitMix64's finaliser (Steele, Lea & Flood 2014; the mixer of
// java.util.SplittableRandom): a bijection on 64 bits with full avalanche.
MPB_HD inline uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// 32 random bits for element i: the seed is mixed once (so nearby seeds give
// unrelated streams), then the counter is spread by the golden-ratio
// increment, as SplitMix64 does for its sequence, and mixed again.
MPB_HD inline uint32_t dropout_bits(uint64_t seed, uint64_t i) {
  const uint64_t key = splitmix64_mix(seed ^ 0x6A09E667F3BCC909ull);
  return static_cast<uint32_t>(splitmix64_mix(key + (i + 1) * 0x9E3779B97F4A7C15ull) >> 32);
}

// ceil(p * 2^32) for p in [0, 1), so that "bits >= threshold" is exactly
// "bits >= p * 2^32": p * 2^32 is exact in fp32 (a power-of-two scaling; an
// integer already for p >= 2^-9), and the largest p below 1 gives
// 2^32 - 256, which fits.
MPB_HD inline uint32_t dropout_threshold(float p) {
  return static_cast<uint32_t>(static_cast<uint64_t>(ceilf(p * 4294967296.0f)));
}

MPB_HD inline float dropout_scale(float p) { return 1.0f / (1.0f - p); }

MPB_HD inline float dropout_apply(float x, uint32_t bits, uint32_t threshold, float scale) {
  return bits >= threshold ? x * scale : 0.0f;
}

MPB_ISA_NAMESPACE_END
}  // namespace mpb::scalar
