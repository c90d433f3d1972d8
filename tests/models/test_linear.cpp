// models/linear.h on a two-layer case, x -> act(x W1^T + b1) = h -> h W2^T + b2
// = y, forward and backward, fused and unfused, against a float64 reference
// written here from the definitions; GradMode::Accumulate adds.
//
// Tolerance: fp32 GEMMs over k <= 7 terms of magnitude <= 1 and the
// approximate tanh of the GELU (ops/approx_math.h, a few fp32 ulps) leave
// errors around 1e-6 on values of order 1; 2e-5 (abs + rel) is far below any
// real mistake (a missing bias or activation derivative is off by >= 0.1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "models/linear.h"
#include "models/param_store.h"

namespace mpb {
namespace {

constexpr int64_t M = 5, K = 7, N1 = 6, N2 = 3;  // rows, input, hidden, output
constexpr double kTol = 2e-5;

std::vector<float> random_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

double act_d(Activation a, double x) {
  if (a == Activation::Relu) return std::max(x, 0.0);
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
double act_grad_d(Activation a, double x) {
  if (a == Activation::Relu) return x > 0.0 ? 1.0 : 0.0;
  const double c = 0.7978845608028654, t = std::tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

using Mat = std::vector<double>;  // row-major

// out[m,n] = a[m,k] . b^T (b [n,k]) when tb, else a . b (b [k,n]); ta: a is [k,m].
Mat matmul(const Mat& a, const Mat& b, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  Mat out(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t p = 0; p < k; ++p)
        s += a[static_cast<size_t>(ta ? p * m + i : i * k + p)] * b[static_cast<size_t>(tb ? j * k + p : p * n + j)];
      out[static_cast<size_t>(i * n + j)] = s;
    }
  return out;
}
Mat col_sums(const Mat& a, int64_t m, int64_t n) {
  Mat s(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) s[static_cast<size_t>(j)] += a[static_cast<size_t>(i * n + j)];
  return s;
}

struct Reference {
  Mat pre, h, y, dw2, db2, dpre, dw1, db1, dx;
};

Reference reference(const std::vector<float>& w, const std::vector<float>& x, const std::vector<float>& dy,
                    Activation act) {
  const Mat W(w.begin(), w.end()), X(x.begin(), x.end()), DY(dy.begin(), dy.end());
  const Mat W1(W.begin(), W.begin() + N1 * K), B1(W.begin() + N1 * K, W.begin() + N1 * K + N1);
  const Mat W2(W.begin() + N1 * K + N1, W.begin() + N1 * K + N1 + N2 * N1), B2(W.end() - N2, W.end());
  Reference r;
  r.pre = matmul(X, W1, M, N1, K, false, true);
  r.h = r.pre;
  for (int64_t i = 0; i < M * N1; ++i) {
    r.pre[static_cast<size_t>(i)] += B1[static_cast<size_t>(i % N1)];
    r.h[static_cast<size_t>(i)] = act_d(act, r.pre[static_cast<size_t>(i)]);
  }
  r.y = matmul(r.h, W2, M, N2, N1, false, true);
  for (int64_t i = 0; i < M * N2; ++i) r.y[static_cast<size_t>(i)] += B2[static_cast<size_t>(i % N2)];
  r.dw2 = matmul(DY, r.h, N2, N1, M, true, false);
  r.db2 = col_sums(DY, M, N2);
  r.dpre = matmul(DY, W2, M, N1, N2, false, false);
  for (int64_t i = 0; i < M * N1; ++i)
    r.dpre[static_cast<size_t>(i)] *= act_grad_d(act, r.pre[static_cast<size_t>(i)]);
  r.dw1 = matmul(r.dpre, X, N1, K, M, true, false);
  r.db1 = col_sums(r.dpre, M, N1);
  r.dx = matmul(r.dpre, W1, M, K, N1, false, false);
  return r;
}

std::vector<float> get(Device& dev, const Tensor& t) {
  std::vector<float> h(static_cast<size_t>(t.numel()));
  dev.download(h.data(), t);
  return h;
}

void expect_near(const std::vector<float>& got, const Mat& want, double factor, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = factor * want[i];
    EXPECT_NEAR(got[i], w, kTol * (1.0 + std::fabs(w))) << what << " [" << i << "]";
  }
}

// The two layers on a CPU device in fp32, through LinearOps.
struct TwoLayers {
  std::unique_ptr<Device> dev = make_cpu_device();
  ParamStore store{*dev, PrecisionPolicy{}};
  ParamRef w1, b1, w2, b2;
  DeviceBuffer x, pre, h, y, dy, dpre, dx;
  std::vector<float> host_w, host_x, host_dy;

  TwoLayers() {
    store.add("l1.weight", Shape{N1, K}, ParamRole::Weight);
    store.add("l1.bias", Shape{N1}, ParamRole::Bias);
    store.add("l2.weight", Shape{N2, N1}, ParamRole::Weight);
    store.add("l2.bias", Shape{N2}, ParamRole::Bias);
    store.allocate();
    w1 = store.ref(0), b1 = store.ref(1), w2 = store.ref(2), b2 = store.ref(3);
    host_w = random_values(static_cast<size_t>(store.numel()), 1);
    store.upload(host_w);
    auto buf = [&](int64_t rows, int64_t cols) { return dev->alloc(Shape{rows, cols}, DType::F32, MemCategory::Activations); };
    x = buf(M, K), pre = buf(M, N1), h = buf(M, N1), y = buf(M, N2), dy = buf(M, N2), dpre = buf(M, N1), dx = buf(M, K);
    host_x = random_values(static_cast<size_t>(M * K), 2);
    host_dy = random_values(static_cast<size_t>(M * N2), 3);
    dev->upload(x, host_x.data());
    dev->upload(dy, host_dy.data());
    dev->fill(store.grads(), 1e3f);  // stale gradients: Overwrite must not see them
  }

  // The MLP's backward order: layer 2's weight gradient, dpre through the
  // activation (possibly writing db1), layer 1's weight and input gradients.
  bool backward(const LinearOps& lin, Activation act, GradMode mode) {
    lin.weight_grad(w2, b2, dy, h, mode);
    const bool db1_done = lin.input_grad(dpre, dy, w2, act, pre, b1, mode);
    lin.weight_grad(w1, db1_done ? ParamRef{} : b1, dpre, x, mode);
    lin.input_grad(dx, dpre, w1);
    return db1_done;
  }
};

struct Case {
  Activation act;
  bool fused;
};

class LinearOpsCase : public ::testing::TestWithParam<Case> {};

TEST_P(LinearOpsCase, ForwardAndBackwardMatchFloat64AndAccumulateAdds) {
  const Case c = GetParam();
  TwoLayers t;
  const LinearOps lin(*t.dev, GemmCompute::F32, LinearFusion{c.fused, c.fused});
  lin.forward(t.h, t.pre, t.x, t.w1, t.b1, c.act);
  lin.forward(t.y, t.h, t.w2, t.b2);
  const Reference r = reference(t.host_w, t.host_x, t.host_dy, c.act);
  expect_near(get(*t.dev, t.pre), r.pre, 1.0, "pre-activation");
  expect_near(get(*t.dev, t.h), r.h, 1.0, "activation");
  expect_near(get(*t.dev, t.y), r.y, 1.0, "output");

  const bool db1_done = t.backward(lin, c.act, GradMode::Overwrite);
  // Only the fused GELU path folds db1 into the input-gradient GEMM (DGeluBGrad).
  EXPECT_EQ(db1_done, c.fused && c.act == Activation::Gelu);
  expect_near(get(*t.dev, t.w2.g), r.dw2, 1.0, "dW2");
  expect_near(get(*t.dev, t.b2.g), r.db2, 1.0, "db2");
  expect_near(get(*t.dev, t.dpre), r.dpre, 1.0, "dpre");
  expect_near(get(*t.dev, t.w1.g), r.dw1, 1.0, "dW1");
  expect_near(get(*t.dev, t.b1.g), r.db1, 1.0, "db1");
  expect_near(get(*t.dev, t.dx), r.dx, 1.0, "dx");

  // A second micro-batch with the same data adds: every gradient doubles
  // (DGeluBGrad never accumulates, so db1 goes through bias_grad here).
  EXPECT_FALSE(t.backward(lin, c.act, GradMode::Accumulate));
  expect_near(get(*t.dev, t.w2.g), r.dw2, 2.0, "dW2 accumulated");
  expect_near(get(*t.dev, t.b2.g), r.db2, 2.0, "db2 accumulated");
  expect_near(get(*t.dev, t.w1.g), r.dw1, 2.0, "dW1 accumulated");
  expect_near(get(*t.dev, t.b1.g), r.db1, 2.0, "db1 accumulated");
  expect_near(get(*t.dev, t.dx), r.dx, 1.0, "dx (its own mode: Overwrite)");

  // The input gradient of a residual branch adds to what is there.
  lin.input_grad(t.dx, t.dpre, t.w1, GradMode::Accumulate);
  expect_near(get(*t.dev, t.dx), r.dx, 2.0, "dx accumulated");
}

TEST(LinearOps, FusedAndUnfusedAgree) {
  for (Activation act : {Activation::Relu, Activation::Gelu}) {
    std::vector<std::vector<float>> outs[2];
    for (int fused = 0; fused < 2; ++fused) {
      TwoLayers t;
      const LinearOps lin(*t.dev, GemmCompute::F32, LinearFusion{fused == 1, fused == 1});
      lin.forward(t.h, t.pre, t.x, t.w1, t.b1, act);
      lin.forward(t.y, t.h, t.w2, t.b2);
      t.backward(lin, act, GradMode::Overwrite);
      for (const Tensor& v : {t.pre.tensor(), t.h.tensor(), t.y.tensor(), t.dpre.tensor(), t.dx.tensor(),
                              t.store.grads()})
        outs[fused].push_back(get(*t.dev, v));
    }
    for (size_t i = 0; i < outs[0].size(); ++i) {
      const Mat unfused(outs[0][i].begin(), outs[0][i].end());
      expect_near(outs[1][i], unfused, 1.0, "tensor " + std::to_string(i) + (act == Activation::Gelu ? " gelu" : " relu"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ActivationAndFusion, LinearOpsCase,
                         ::testing::Values(Case{Activation::Relu, false}, Case{Activation::Relu, true},
                                           Case{Activation::Gelu, false}, Case{Activation::Gelu, true}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.act == Activation::Gelu ? "Gelu" : "Relu") +
                                  (i.param.fused ? "Fused" : "Unfused");
                         });

}  // namespace
}  // namespace mpb
