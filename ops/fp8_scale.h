// Delayed FP8 scaling (core/fp8_scaling.h, Transformer Engine's recipe): the
// scalar core of both backends' Device::fp8_update_scales, so the CPU tests
// prove the math a GPU runs. core/fp8_scaling.cpp's host Fp8TensorScale is
// written separately (log2 where this uses frexp): the op checks hold the
// device op to it.
#pragma once

#include <cfloat>
#include <cmath>

#include "ops/scalar.h"

namespace mpb::scalar {
MPB_ISA_NAMESPACE_BEGIN

// 2^(floor(log2(fp8_max / amax)) - margin) in fp32, clamped to the finite fp32
// powers of two (a tiny amax gives the largest scale, not inf); `previous`
// when amax is 0, negative or not finite (TE keeps the scale then). The
// exponent comes from frexp of the ratio in double, which is exact on every
// host and GPU: a log2 is only within an ulp, and a ratio just below a power
// of two could round up to it.
MPB_HD inline float fp8_scale_from_amax(float amax, float fp8_max, int margin, float previous) {
  if (!(amax > 0.0f) || !(amax <= FLT_MAX)) return previous;
  int e = 0;
  (void)frexp(static_cast<double>(fp8_max) / static_cast<double>(amax), &e);  // ratio = f 2^e, f in [0.5, 1)
  int k = e - 1 - margin;                                                      // floor(log2 ratio) - margin
  k = k < -126 ? -126 : (k > 127 ? 127 : k);
  return ldexpf(1.0f, k);
}

// Reducing an amax history (amax_compute_algo max): the largest entry, or
// NaN once any entry is NaN (an overflowing step; torch.max over TE's history
// propagates it, and the scale is then kept). Order-free: a backend may
// reduce the entries in any order and get these bits.
MPB_HD inline float fp8_amax_max(float a, float b) {
  if (a != a) return a;  // NaN
  if (b != b) return b;
  return a > b ? a : b;
}

MPB_ISA_NAMESPACE_END
}  // namespace mpb::scalar
