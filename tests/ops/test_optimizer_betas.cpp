// The step constants of AdamW and LAMB (ops/optimizer.h make_adamw_step,
// make_lamb_step) form 1 - beta and the bias corrections 1 - beta^t from the
// configured betas in double and round once, as PyTorch does with its
// Python-float betas (torch.optim.AdamW: `1 - beta2`, `1 - beta2 ** step`).
// The old way, 1.0f - beta rounded to fp32 first, carries beta's rounding
// error magnified by 1 / (1 - beta): 1 - 0.999f is 0.00099998713, 1.3e-5 from
// 0.001 and a different float, which these tests tell apart.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/optimizer.h"

namespace mpb {
namespace {

// The fp32 value PyTorch's kernel receives: the double rounded once.
float once(double x) { return static_cast<float>(x); }

TEST(OptimizerBetas, OneMinusBetaIsFormedInDouble) {
  const double betas[] = {0.9, 0.98, 0.99, 0.999, 0.9999, 0.5, 0.0};
  for (double beta : betas) {
    const scalar::AdamWStep a = scalar::make_adamw_step(1e-3f, beta, beta, 1e-8f, 0.01f, 1);
    const scalar::LambStep l = scalar::make_lamb_step(beta, beta, 1e-6f, 0.01f, true, 1);
    EXPECT_EQ(a.one_minus_beta1, once(1.0 - beta)) << beta;
    EXPECT_EQ(a.one_minus_beta2, once(1.0 - beta)) << beta;
    EXPECT_EQ(l.one_minus_beta1, once(1.0 - beta)) << beta;
    EXPECT_EQ(l.one_minus_beta2, once(1.0 - beta)) << beta;
    EXPECT_EQ(a.beta1, once(beta)) << beta;  // the multiplier of the old moment: beta rounded once
    EXPECT_EQ(l.beta2, once(beta)) << beta;
  }
}

// The case the issue names, with numbers: the old fp32 form is a different
// float, 1.3e-5 (relative) from 0.001; the new one is within half an fp32 ulp.
TEST(OptimizerBetas, Beta2Of0999IsNotFloatRounded) {
  const float old_form = 1.0f - 0.999f;
  const scalar::AdamWStep a = scalar::make_adamw_step(1e-3f, 0.9, 0.999, 1e-8f, 0.0f, 1);
  EXPECT_NE(a.one_minus_beta2, old_form);
  EXPECT_NEAR(std::fabs(double(old_form) - 0.001) / 0.001, 1.287e-5, 1e-8);
  EXPECT_LE(std::fabs(double(a.one_minus_beta2) - 0.001) / 0.001, 0x1p-24);
}

// 1 - beta^t from the double beta: PyTorch's bias_correction1/2. From
// double(0.999f) the correction of step 1 would be the old 1 - 0.999f.
TEST(OptimizerBetas, BiasCorrectionsUseTheDoubleBetas) {
  for (long long t : {1LL, 2LL, 10LL, 1000LL, 100000LL}) {
    const double td = double(t);
    const scalar::AdamWStep a = scalar::make_adamw_step(1e-3f, 0.9, 0.999, 1e-8f, 0.0f, t);
    EXPECT_EQ(a.bias1, once(1.0 - std::pow(0.9, td))) << t;
    EXPECT_EQ(a.bias2_sqrt, once(std::sqrt(1.0 - std::pow(0.999, td)))) << t;
    const scalar::LambStep l = scalar::make_lamb_step(0.9, 0.999, 1e-6f, 0.01f, true, t);
    EXPECT_EQ(l.bias1, once(1.0 - std::pow(0.9, td))) << t;
    EXPECT_EQ(l.bias2, once(1.0 - std::pow(0.999, td))) << t;
  }
  const scalar::LambStep off = scalar::make_lamb_step(0.9, 0.999, 1e-6f, 0.01f, false, 7);
  EXPECT_EQ(off.bias1, 1.0f);
  EXPECT_EQ(off.bias2, 1.0f);
}

// The element update uses them: one step from zero moments gives
// m = (1 - beta1) g and v = (1 - beta2) g^2 with PyTorch's constants.
TEST(OptimizerBetas, MomentsUseTheDoubleFormedConstants) {
  const scalar::AdamWStep a = scalar::make_adamw_step(1e-3f, 0.9, 0.999, 1e-8f, 0.0f, 1);
  float m = 0.0f, v = 0.0f;
  scalar::adamw_moments(3.0f, m, v, a);
  EXPECT_EQ(m, once(1.0 - 0.9) * 3.0f);
  EXPECT_EQ(v, once(1.0 - 0.999) * 3.0f * 3.0f);
  const scalar::LambStep l = scalar::make_lamb_step(0.9, 0.999, 1e-6f, 0.0f, true, 1);
  m = 0.0f, v = 0.0f;
  scalar::lamb_moments(3.0f, m, v, l);
  EXPECT_EQ(m, once(1.0 - 0.9) * 3.0f);
  EXPECT_EQ(v, once(1.0 - 0.999) * 3.0f * 3.0f);
}

}  // namespace
}  // namespace mpb
