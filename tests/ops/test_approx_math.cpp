// ops/approx_math.h against libm in double.
//
//  * exp_approx: error in ulps of the fp32 result (the ulp of the exact value
//    exp(x), computed in double) over a dense sweep of [-87.3, 88.7] (2
//    million evenly spaced points, every integer, every reduction boundary
//    (n + 1/2) ln 2 and its fp32 neighbours, thousands of consecutive floats
//    at both clamp edges, and tiny arguments), held to the header's bound
//    (2 ulp); special values (NaN, +-inf, beyond the clamps, exp(0) == 1).
//  * tanh_approx: absolute error over [-20, 20] (2 million points plus tiny
//    arguments), held to the header's bound (2e-7); exact saturation to +-1
//    for |u| > 10; NaN.
// The measured maxima are printed (and recorded as test properties).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "ops/approx_math.h"
#include "opcheck/reference.h"

namespace {

using mpb::scalar::exp_approx;
using mpb::scalar::tanh_approx;

// ops/approx_math.h's header comment: "exp within 2 ulp of the exact value
// over the whole finite range; tanh within 2e-7 absolute".
constexpr double kExpMaxUlp = 2.0;
constexpr double kTanhMaxAbs = 2e-7;

// The clamp constants of exp_approx (the largest x whose exp is finite in
// fp32, the smallest whose exp is a normal fp32).
constexpr float kExpLo = -87.33654f;
constexpr float kExpHi = 88.72283f;

// The ulp of the fp32 number nearest to the exact value e > 0: 2^(E - 23) for
// e in [2^E, 2^(E+1)), and 2^-149 (the subnormal spacing) below 2^-126.
double fp32_ulp_at(double e) {
  int fe;
  std::frexp(e, &fe);
  return std::ldexp(1.0, std::max(fe - 1, -126) - 23);
}

struct MaxError {
  double err = 0.0;
  float at = 0.0f;
  void update(double e, float x) {
    if (e > err || std::isnan(e)) err = e, at = x;
  }
};

double exp_ulp_error(float x) {
  const double exact = std::exp(static_cast<double>(x));
  const double got = exp_approx(x);
  return std::fabs(got - exact) / fp32_ulp_at(exact);
}

std::vector<float> exp_sweep_points() {
  std::vector<float> xs;
  const int kN = 2'000'000;
  const double a = -87.3, b = 88.7;
  xs.reserve(kN + 100'000);
  for (int i = 0; i < kN; ++i) xs.push_back(static_cast<float>(a + (b - a) * i / (kN - 1)));
  for (int i = -87; i <= 88; ++i) xs.push_back(static_cast<float>(i));
  // Where the range reduction switches n: (n + 1/2) ln2, +-8 floats around it.
  for (int n = -126; n <= 127; ++n) {
    float x = static_cast<float>((n + 0.5) * 0.69314718055994530942);
    for (int s = 0; s < 8; ++s) x = std::nextafter(x, -INFINITY);
    for (int s = 0; s < 17; ++s, x = std::nextafter(x, INFINITY))
      if (x >= kExpLo && x <= kExpHi) xs.push_back(x);
  }
  // Consecutive floats at both clamp edges (inside the finite range).
  float x = kExpLo;
  for (int i = 0; i < 20'000; ++i, x = std::nextafter(x, INFINITY)) xs.push_back(x);
  x = kExpHi;
  for (int i = 0; i < 20'000; ++i, x = std::nextafter(x, -INFINITY)) xs.push_back(x);
  // Tiny arguments: +-2^-k (exp ~ 1 + x, where the ulp of the result jumps at 1).
  for (int k = 1; k <= 149; ++k) {
    xs.push_back(std::ldexp(1.0f, -k));
    xs.push_back(-std::ldexp(1.0f, -k));
  }
  return xs;
}

TEST(ApproxMath, ExpUlpErrorOverFiniteRange) {
  MaxError worst;
  for (float x : exp_sweep_points()) worst.update(exp_ulp_error(x), x);
  std::printf("[ measured ] exp_approx: max error %.4f ulp at x = %.9g (bound %.1f ulp)\n", worst.err,
              static_cast<double>(worst.at), kExpMaxUlp);
  RecordProperty("exp_max_ulp", std::to_string(worst.err));
  EXPECT_LE(worst.err, kExpMaxUlp) << "at x = " << worst.at;
}

TEST(ApproxMath, ExpSpecialValues) {
  EXPECT_TRUE(std::isnan(exp_approx(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(exp_approx(-std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(exp_approx(INFINITY), INFINITY);
  EXPECT_EQ(exp_approx(-INFINITY), 0.0f);
  EXPECT_EQ(exp_approx(0.0f), 1.0f);
  EXPECT_EQ(exp_approx(-0.0f), 1.0f);
  // Overflow: every x > 88.73 (and already the first float above the clamp,
  // whose exact exp exceeds FLT_MAX) is inf.
  for (float x : {std::nextafter(kExpHi, INFINITY), 88.73f, 88.8f, 89.0f, 100.0f, 1e10f, FLT_MAX}) {
    EXPECT_GT(static_cast<double>(x), std::log(static_cast<double>(FLT_MAX)));
    EXPECT_EQ(exp_approx(x), INFINITY) << "x = " << x;
  }
  // The clamp edge itself is finite and accurate.
  EXPECT_TRUE(std::isfinite(exp_approx(kExpHi)));
  EXPECT_LE(exp_ulp_error(kExpHi), kExpMaxUlp);
  // Underflow: x < -87.34 gives 0 (results that would be fp32 subnormals are
  // flushed, as the header says).
  for (float x : {std::nextafter(kExpLo, -INFINITY), -87.34f, -87.5f, -88.0f, -103.0f, -200.0f, -1e10f, -FLT_MAX})
    EXPECT_EQ(exp_approx(x), 0.0f) << "x = " << x;
  EXPECT_GE(exp_approx(kExpLo), FLT_MIN);
  // Exact powers: exp(n ln 2)'s neighbourhood is handled by the sweep; e^1.
  EXPECT_LE(exp_ulp_error(1.0f), kExpMaxUlp);
}

TEST(ApproxMath, TanhAbsoluteErrorOverRange) {
  MaxError worst;
  const int kN = 2'000'001;  // includes 0 and +-20
  for (int i = 0; i < kN; ++i) {
    const float u = static_cast<float>(-20.0 + 40.0 * i / (kN - 1));
    worst.update(std::fabs(static_cast<double>(tanh_approx(u)) - std::tanh(static_cast<double>(u))), u);
  }
  for (int k = 1; k <= 149; ++k) {
    for (float u : {std::ldexp(1.0f, -k), -std::ldexp(1.0f, -k)})
      worst.update(std::fabs(static_cast<double>(tanh_approx(u)) - std::tanh(static_cast<double>(u))), u);
  }
  std::printf("[ measured ] tanh_approx: max absolute error %.4g at u = %.9g (bound %.1g)\n", worst.err,
              static_cast<double>(worst.at), kTanhMaxAbs);
  RecordProperty("tanh_max_abs", std::to_string(worst.err));
  EXPECT_LE(worst.err, kTanhMaxAbs) << "at u = " << worst.at;
}

TEST(ApproxMath, TanhSaturatesExactly) {
  // |u| > 10: 1 - tanh(u) < 2 e^-20 ~ 4e-9, below half an ulp of 1 (2^-25): +-1 exactly.
  for (int i = 1; i <= 200'000; ++i) {
    const float u = 10.0f + 90.0f * static_cast<float>(i) / 200'000.0f;  // (10, 100]
    ASSERT_EQ(tanh_approx(u), 1.0f) << "u = " << u;
    ASSERT_EQ(tanh_approx(-u), -1.0f) << "u = " << -u;
  }
  const float just_above_10 = std::nextafter(10.0f, INFINITY);
  EXPECT_EQ(tanh_approx(just_above_10), 1.0f);
  EXPECT_EQ(tanh_approx(-just_above_10), -1.0f);
  for (float u : {1e3f, 1e30f, FLT_MAX, INFINITY}) {
    EXPECT_EQ(tanh_approx(u), 1.0f) << "u = " << u;
    EXPECT_EQ(tanh_approx(-u), -1.0f) << "u = " << -u;
  }
  EXPECT_TRUE(std::isnan(tanh_approx(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(tanh_approx(0.0f), 0.0f);
}

}  // namespace
