// Device::lamb_step against the independent float64 LAMB written from the
// paper (opcheck/reference.h, paper_lamb_step), over many steps, layouts and
// hyper-parameters. Run on the backend this executable is built for
// (test_ops: CPU; test_ops_cuda: CUDA, skipped without a GPU). The op-check
// table (opcheck/cases_optimizer.cpp) has the short cases every backend and
// the CPU comparison run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "opcheck/host.h"
#include "opcheck/opcheck.h"
#include "opcheck/reference.h"
#include "tests/opcheck/backend_under_test.h"

namespace mpb::opcheck {
namespace {

using Lamb = BackendUnderTest;

// A flat buffer of `sizes` tensors, every third one excluded from decay; one
// tensor starts at zero (||x|| = 0: ratio 1) and one excluded tensor gets a
// zero gradient (||u|| = 0: ratio 1, no move).
struct Layout {
  std::vector<LambTensor> tensors;
  int64_t n = 0;
  explicit Layout(const std::vector<int64_t>& sizes) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      tensors.push_back({n, n + sizes[k], k % 3 != 2});
      n += sizes[k];
    }
  }
};

// Runs `steps` LAMB steps on the device and in float64, and compares the
// weights after each one. The reference rounds its weights to the parameter
// dtype after each step, as the device stores them (apex O3: no fp32 master
// copy), so both follow the same trajectory.
void check(Device& dev, DType param_t, DType grad_t, bool bias_correction, const std::vector<int64_t>& sizes,
           int steps, float weight_decay = 0.01f) {
  const Layout L(sizes);
  const int64_t n = L.n;
  const LambHyper h{1e-2f, 0.9f, 0.999f, 1e-6f, weight_decay, 1, bias_correction};
  // The reference takes the fp32 values the device is given (0.999f is not
  // 0.999: 1 - beta2 differs by 1.3e-5 of itself, which without bias
  // correction is a 6e-6 relative difference in every step).
  const PaperLamb ph{double(h.lr), double(h.beta1), double(h.beta2), double(h.eps), double(h.weight_decay),
                     bias_correction};
  const float grad_scale = 0.5f;  // an unscale factor: the update sees grad * 0.5

  std::mt19937 rng(1234);
  std::normal_distribution<double> normal(0.0, 1.0);
  Host p0(param_t, {n});
  for (int64_t i = 0; i < n; ++i) p0.set(i, float(0.05 * normal(rng)));
  const LambTensor& zero_w = L.tensors[1];  // all-zero weights
  for (int64_t i = zero_w.begin; i < zero_w.end; ++i) p0.set(i, 0.0f);
  std::vector<double> x = p0.values(), m(size_t(n), 0.0), v(size_t(n), 0.0);

  DeviceBuffer p = put(dev, p0), dm = put(dev, filled(DType::F32, {n}, 0.0f)), dv = put(dev, filled(DType::F32, {n}, 0.0f));
  DeviceBuffer scratch = dev.alloc(Shape{lamb_scratch_floats(L.tensors.size())}, DType::F32, MemCategory::Optimizer);
  DeviceBuffer copy = dev.alloc(Shape{n}, DType::BF16, MemCategory::Activations);
  const LambTensor& zero_g = L.tensors[2];  // excluded from decay, zero gradient

  for (int step = 1; step <= steps; ++step) {
    Host g(grad_t, {n});
    for (int64_t i = 0; i < n; ++i) {
      const bool zero = i >= zero_g.begin && i < zero_g.end;
      // Gradients of mixed magnitude across tensors, as layers have.
      const double layer_scale = std::pow(10.0, double(i % 4) - 2.0);
      g.set(i, zero ? 0.0f : float(layer_scale * normal(rng)));
    }
    LambHyper hs = h;
    hs.step = step;
    dev.lamb_step(p, put(dev, g), dm, dv, hs, grad_scale, copy, L.tensors, scratch);

    std::vector<double> gv = g.values();
    for (double& gi : gv) gi *= double(grad_scale);
    paper_lamb_step(x, m, v, gv, L.tensors, ph, param_t, step);
    const Host got = fetch(dev, p);
    double worst = 0.0;
    int64_t worst_i = -1;
    for (int64_t i = 0; i < n; ++i) {
      // fp32: the per-element arithmetic is about ten fp32 operations
      // (relative 2^-24 each) on a move of lr * ratio * u, which the trust
      // ratio keeps near lr * ||x|| per tensor, plus the storing rounding:
      // 1e-6 * (|x| + 0.05) per step is ~15 ulps of |x| over all steps, yet
      // 1000x below one step's move (lr = 1e-2 of |x|), so a wrong ratio,
      // moment, correction or decay fails. bf16/fp16 weights: the device
      // and the reference round the same value unless the two land on either
      // side of a rounding boundary, a difference of one unit in the last
      // place that later steps carry but do not grow: 2 ulps of the dtype.
      const double tol = param_t == DType::F32 ? 1e-6 * step * (std::fabs(x[size_t(i)]) + 0.05)
                                               : 2.0 * ulp(param_t, x[size_t(i)]) + 1e-6 * step * 0.05;
      const double err = std::fabs(got.value(i) - x[size_t(i)]) / tol;
      if (err > worst || std::isnan(err)) {
        worst = std::isnan(err) ? INFINITY : err;
        worst_i = i;
      }
    }
    ASSERT_LE(worst, 1.0) << "step " << step << " element " << worst_i << ": device " << got.value(worst_i)
                          << " float64 " << x[size_t(worst_i)];
    // The zero-gradient, undecayed tensor never moves (its update is 0).
    for (int64_t i = zero_g.begin; i < zero_g.end; ++i) ASSERT_EQ(got.value(i), p0.value(i)) << i;
    // The fused copy is the stored weight cast to bf16, bit for bit.
    DeviceBuffer cast = dev.alloc(Shape{n}, DType::BF16, MemCategory::Activations);
    dev.cast(cast, p);
    std::string where;
    ASSERT_TRUE(identical(fetch(dev, copy), fetch(dev, cast), &where)) << "param_copy differs at " << where;
  }
}

// Sizes: a tensor big enough for every CUDA block of a partial sum to loop,
// the zero ones, a single element, an odd bias-sized one.
const std::vector<int64_t> kSizes = {3000, 64, 257, 1, 70001, 768, 5};

TEST_F(Lamb, Fp32MatchesPaperFloat64) { check(*dev_, DType::F32, DType::F32, true, kSizes, 6); }
TEST_F(Lamb, NoBiasCorrection) { check(*dev_, DType::F32, DType::F32, false, kSizes, 4); }
TEST_F(Lamb, Bf16GradientsFp32Weights) { check(*dev_, DType::F32, DType::BF16, true, kSizes, 3); }
TEST_F(Lamb, HalfWeights) {
  check(*dev_, DType::BF16, DType::BF16, true, kSizes, 3);
  check(*dev_, DType::F16, DType::F32, true, kSizes, 3);
}
// Decay strong enough that wd * w (10 * 0.05) is as large as the Adam
// direction (about 1 per element): the decay term's place in u, and so in
// ||u||, changes the trust ratio by tens of percent if it is wrong.
TEST_F(Lamb, StrongDecay) { check(*dev_, DType::F32, DType::F32, true, kSizes, 4, 10.0f); }
// More tensors than one CUDA launch takes (64): the pieces must keep each
// tensor's scratch slot and decay bit.
TEST_F(Lamb, ManyTensors) {
  std::vector<int64_t> sizes;
  for (int k = 0; k < 150; ++k) sizes.push_back(1 + (k * 37) % 300);
  check(*dev_, DType::F32, DType::F32, true, sizes, 2);
}

}  // namespace
}  // namespace mpb::opcheck
