// The float64 references themselves (opcheck/reference.cpp), checked where a
// reference is a formula rather than the definition: the analytic LayerNorm
// gradient against central differences of the float64 forward. (The op
// itself is checked against both by the op-check table.) No device.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "opcheck/reference.h"

namespace mpb::opcheck {
namespace {

TEST(Reference, LayerNormGradientMatchesFiniteDifferences) {
  const int64_t rows = 5, C = 24;
  const double eps = 1e-5;
  std::vector<double> x(static_cast<size_t>(rows * C)), dy(x.size());
  const std::vector<float> rx = random_nonzero(x.size(), 41, 0.1f, 2.0f), rdy = random_nonzero(x.size(), 42);
  for (size_t e = 0; e < x.size(); ++e) x[e] = rx[e] + 0.25 * static_cast<double>((e / C) % 7) - 0.5, dy[e] = rdy[e];
  const std::vector<float> rg = random_nonzero(static_cast<size_t>(C), 43, 0.5f, 1.5f), rb = random_nonzero(static_cast<size_t>(C), 44);
  std::vector<double> g(rg.begin(), rg.end()), b(rb.begin(), rb.end());
  // L = sum(dy * LN(x; g, b)).
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& gv, const std::vector<double>& bv) {
    const LnRef f = layernorm_ref(xv, gv, bv, rows, C, eps);
    double l = 0.0;
    for (size_t e = 0; e < f.y.size(); ++e) l += dy[e] * f.y[e];
    return l;
  };
  // Central differences: truncation O(h^2 |L'''|) ~ 1e-12 and cancellation
  // ~ 1e-16 |L| / h ~ 1e-10 for h = 1e-6; agreement to 1e-7 is 3 orders
  // tighter than any formula error.
  const double h = 1e-6, tol = 1e-7;
  auto fd = [&](std::vector<double>* t, size_t i) {
    const double x0 = (*t)[i];
    (*t)[i] = x0 + h;
    const double lp = loss(x, g, b);
    (*t)[i] = x0 - h;
    const double lm = loss(x, g, b);
    (*t)[i] = x0;
    return (lp - lm) / (2 * h);
  };
  const LnGrad an = layernorm_grad_ref(x, g, dy, layernorm_ref(x, g, b, rows, C, eps), rows, C);
  for (size_t e = 0; e < x.size(); ++e) ASSERT_NEAR(an.dx[e], fd(&x, e), tol) << "dx " << e;
  for (size_t c = 0; c < g.size(); ++c) {
    ASSERT_NEAR(an.dg[c], fd(&g, c), tol) << "dgamma " << c;
    ASSERT_NEAR(an.db[c], fd(&b, c), tol) << "dbeta " << c;
  }
}

}  // namespace
}  // namespace mpb::opcheck
