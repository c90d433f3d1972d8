// exp and tanh written out as explicit fused multiply-adds, so that
//  - the CPU loops that use them vectorise (libm's scalar expf/tanhf calls
//    don't, without fast-math), and
//  - the CPU and the GPU compute bit-identical values: the same operations
//    in the same order, with fmaf() on both sides instead of whatever
//    contraction each compiler chooses.
// Accuracy (tests/ops/test_approx_math.cpp): exp within 2 ulp of the exact
// value over the whole finite range; tanh within 2e-7 absolute.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/numerics.h"
#include "ops/scalar.h"

namespace mpb::scalar {
MPB_ISA_NAMESPACE_BEGIN

MPB_HD inline float exp_approx(float x) {
  // Branch-free so that loops over it vectorise: compute on a clamped
  // argument, then select the special results. Beyond the clamp expf is inf
  // or below the smallest normal (flushed to 0, which no caller relies on).
  const float lo = -87.33654f, hi = 88.72283f;
  // (Plain comparisons, not fminf/floorf: GCC vectorises those only under
  // fast-math flags.)
  float xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  xc = x != x ? 0.0f : xc;
  // x = n ln2 + r, |r| <= ln2/2, with ln2 split in two for an exact n*ln2_hi.
  // n = round(x / ln2): adding and subtracting 1.5 * 2^23 rounds to an integer
  // (|x / ln2| < 2^22), in any IEEE arithmetic, on both backends.
  const float kRound = 12582912.0f;
  const float n = fmaf(xc, 1.44269504088896341f, kRound) - kRound;
  float r = fmaf(n, -0.693359375f, xc);
  r = fmaf(n, 2.12194440e-4f, r);
  // exp(r) by its degree-6 Taylor-like polynomial (Cephes expf coefficients).
  float p = 1.9875691500e-4f;
  p = fmaf(p, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  p = fmaf(p, r * r, r);
  p = p + 1.0f;
  // times 2^n, n in [-126, 128]: scale in two steps so 2^n never overflows.
  const int ni = static_cast<int>(n);
  const int half = ni / 2;
  const float s1 = bits_to_float(static_cast<uint32_t>(half + 127) << 23);
  const float s2 = bits_to_float(static_cast<uint32_t>(ni - half + 127) << 23);
  float y = p * s1 * s2;
  y = x < lo ? 0.0f : y;
  y = x > hi ? INFINITY : y;
  return x != x ? x : y;  // NaN stays NaN
}

// tanh(u) = 1 - 2 / (exp(2u) + 1): saturates cleanly to +-1 and is exact in
// the limits; near 0 its absolute error is a few 1e-8, which is what GELU's
// 0.5 x (1 + tanh) is sensitive to.
MPB_HD inline float tanh_approx(float u) {
  float e = exp_approx(2.0f * u);
  return 1.0f - 2.0f / (e + 1.0f);
}

MPB_ISA_NAMESPACE_END
}  // namespace mpb::scalar
