// The MLP's loss and every parameter gradient against an independent float64
// implementation: forward in double, gradients by central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "core/rng.h"
#include "models/mlp.h"

namespace mpb {
namespace {

struct Problem {
  MlpConfig cfg;
  int64_t batch = 6;
  std::vector<float> x;
  std::vector<int32_t> y;
};

Problem make_problem(Activation act, bool fused) {
  Problem p;
  p.cfg.input_dim = 7;
  p.cfg.width = 11;
  p.cfg.hidden_layers = 2;
  p.cfg.classes = 5;
  p.cfg.activation = act;
  p.cfg.fused = fused;
  Rng rng(99);
  p.x.resize(static_cast<size_t>(p.batch * p.cfg.input_dim));
  for (float& v : p.x) v = static_cast<float>(rng.normal());
  for (int64_t i = 0; i < p.batch; ++i) p.y.push_back(static_cast<int32_t>(rng.below(p.cfg.classes)));
  return p;
}

double gelu_exact_tanh(double x) {  // the tanh-approximation GELU, in double
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

// Mean cross-entropy of the MLP in double, params in the model's flat layout.
double reference_loss(const Problem& p, const std::vector<ParamInfo>& info, const std::vector<double>& w) {
  const int L = p.cfg.hidden_layers + 1;
  double total = 0.0;
  for (int64_t s = 0; s < p.batch; ++s) {
    std::vector<double> h(p.x.begin() + s * p.cfg.input_dim, p.x.begin() + (s + 1) * p.cfg.input_dim);
    for (int l = 0; l < L; ++l) {
      const ParamInfo& W = info[2 * l];
      const ParamInfo& b = info[2 * l + 1];
      const int64_t out = W.shape[0], in = W.shape[1];
      std::vector<double> z(static_cast<size_t>(out));
      for (int64_t o = 0; o < out; ++o) {
        double acc = w[static_cast<size_t>(b.offset + o)];
        for (int64_t i = 0; i < in; ++i) acc += w[static_cast<size_t>(W.offset + o * in + i)] * h[static_cast<size_t>(i)];
        bool hidden = l < L - 1;
        z[static_cast<size_t>(o)] = !hidden ? acc : (p.cfg.activation == Activation::Gelu ? gelu_exact_tanh(acc) : std::max(acc, 0.0));
      }
      h = z;
    }
    double mx = *std::max_element(h.begin(), h.end());
    double se = 0.0;
    for (double v : h) se += std::exp(v - mx);
    total += std::log(se) + mx - h[static_cast<size_t>(p.y[static_cast<size_t>(s)])];
  }
  return total / double(p.batch);
}

struct ModelRun {
  double loss;
  std::vector<float> params, grads;
  std::vector<ParamInfo> info;
};

ModelRun run_model(const Problem& p) {
  auto dev = make_cpu_device();
  PrecisionPolicy fp32;
  auto model = make_mlp(*dev, p.cfg, fp32, p.batch, 5);
  DeviceBuffer x = dev->alloc(Shape{p.batch, p.cfg.input_dim}, DType::F32, MemCategory::Activations);
  DeviceBuffer y = dev->alloc(Shape{p.batch}, DType::I32, MemCategory::Activations);
  dev->upload(x, p.x.data());
  dev->upload(y, p.y.data());
  ModelRun r;
  model->train_micro(x, y, 1.0f / float(p.batch), GradMode::Overwrite);
  r.loss = dev->read_loss_sum() / double(p.batch);
  r.params.resize(static_cast<size_t>(model->params().numel()));
  r.grads.resize(r.params.size());
  dev->download(r.params.data(), model->params());
  dev->download(r.grads.data(), model->grads());
  r.info = model->param_info();
  return r;
}

// Every parameter's gradient in `r` against central differences (step h) of
// reference_loss, to 2e-5 relative + 2e-6 absolute; a fatal failure at the
// first mismatch. `checked` (if given) counts the elements compared.
void expect_grads_match_finite_differences(const Problem& p, const ModelRun& r, double h,
                                           size_t* checked = nullptr) {
  const std::vector<double> w(r.params.begin(), r.params.end());
  for (size_t i = 0; i < w.size(); ++i) {
    std::vector<double> wp = w, wm = w;
    wp[i] += h;
    wm[i] -= h;
    const double fd = (reference_loss(p, r.info, wp) - reference_loss(p, r.info, wm)) / (2 * h);
    ASSERT_NEAR(r.grads[i], fd, 2e-5 * std::abs(fd) + 2e-6) << "parameter element " << i;
    if (checked) ++*checked;
  }
}

class MlpGradients : public ::testing::TestWithParam<bool> {};

TEST_P(MlpGradients, MatchFloat64FiniteDifferences) {
  const Problem p = make_problem(Activation::Gelu, GetParam());
  const ModelRun r = run_model(p);
  std::vector<double> w(r.params.begin(), r.params.end());
  // The fp32 forward against the float64 one: fp32 rounding through three
  // small layers leaves ~1e-6 relative error; GELU's tanh is approximated to
  // 2e-7 absolute (ops/approx_math.h).
  EXPECT_NEAR(r.loss, reference_loss(p, r.info, w), 1e-5 * std::abs(r.loss) + 1e-6);

  // Central differences in double with h = 1e-5 have truncation error
  // ~h^2 |f'''| ~ 1e-10 and rounding error ~1e-16/h ~ 1e-11: the reference
  // is good to ~1e-9. The analytic gradient is computed in fp32 (~1e-6
  // relative per op, a dozen ops deep), hence 2e-5 relative + 2e-6 absolute.
  size_t checked = 0;
  ASSERT_NO_FATAL_FAILURE(expect_grads_match_finite_differences(p, r, 1e-5, &checked));
  EXPECT_EQ(checked, w.size());
}

INSTANTIATE_TEST_SUITE_P(FusedAndUnfused, MlpGradients, ::testing::Values(false, true),
                         [](const auto& param_info) { return param_info.param ? "fused" : "unfused"; });

TEST(MlpGradients, ReluMatchesFiniteDifferencesAwayFromKinks) {
  // ReLU's derivative jumps at 0; with random inputs no pre-activation sits
  // within h of 0 (checked below), so finite differences are valid.
  const Problem p = make_problem(Activation::Relu, false);
  expect_grads_match_finite_differences(p, run_model(p), 1e-6);
}

TEST(MlpGradients, FusedEqualsUnfusedWithinFp32Rounding) {
  const ModelRun a = run_model(make_problem(Activation::Gelu, false));
  const ModelRun b = run_model(make_problem(Activation::Gelu, true));
  // Same init, same data; only oneDNN's fused bias/GELU epilogue differs in
  // rounding order (a few fp32 ulps).
  ASSERT_EQ(a.grads.size(), b.grads.size());
  EXPECT_NEAR(a.loss, b.loss, 1e-6);
  for (size_t i = 0; i < a.grads.size(); ++i) ASSERT_NEAR(a.grads[i], b.grads[i], 1e-5 * std::abs(a.grads[i]) + 1e-7) << i;
}

}  // namespace
}  // namespace mpb
