// Precision fp8 through a real model (the MLP on the CPU device): the linear
// layers register their three FP8 tensors, one step's amaxes are what the
// host can compute independently (the first layer's input is the batch
// itself), and the scales follow core/fp8_scaling.h's formula from them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "core/fp8_scaling.h"
#include "core/numerics.h"
#include "core/precision.h"
#include "models/fp8_linears.h"
#include "models/mlp.h"

namespace mpb {
namespace {

TEST(Fp8Linears, MlpStepRecordsAmaxesAndDelayedScales) {
  auto dev = make_cpu_device();
  PrecisionPolicy policy = resolve_policy("fp8");
  policy.fp8_recipe = Fp8Recipe{1, 4, AmaxAlgo::Max};  // margin 1: every scale halved
  MlpConfig cfg;
  cfg.input_dim = 16, cfg.width = 32, cfg.hidden_layers = 2, cfg.classes = 4;
  const int64_t B = 8;
  auto model = make_mlp(*dev, cfg, policy, B, 7);
  Fp8Linears* fp8 = model->fp8();
  ASSERT_NE(fp8, nullptr);
  EXPECT_EQ(make_mlp(*dev, cfg, resolve_policy("amp_bf16"), B, 7)->fp8(), nullptr);

  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<uint16_t> x(B * cfg.input_dim);
  float amax_x = 0.0f;
  for (auto& v : x) {
    v = float_to_bf16_bits(nd(rng));
    amax_x = std::max(amax_x, std::fabs(bf16_bits_to_float(v)));
  }
  std::vector<int32_t> y(B);
  for (int64_t i = 0; i < B; ++i) y[i] = static_cast<int32_t>(i % cfg.classes);
  ASSERT_EQ(model->input().dtype, DType::BF16);
  dev->upload(model->input(), x.data());
  DeviceBuffer labels = dev->alloc(Shape{B}, DType::I32, MemCategory::Activations);
  dev->upload(labels, y.data());

  model->train_micro(model->input(), labels, 1.0f, GradMode::Overwrite);
  fp8->update(true);
  const auto& r = fp8->last_step();
  ASSERT_EQ(r.size(), 3u * 3u);  // 3 linear layers x (input, weight, grad_output)
  EXPECT_EQ(r[0].name, "linear0.input");
  EXPECT_STREQ(r[0].format, "e4m3");
  EXPECT_EQ(r[2].name, "linear0.grad_output");
  EXPECT_STREQ(r[2].format, "e5m2");
  EXPECT_EQ(r[0].amax, amax_x);  // the batch's max |x|, exactly
  for (const auto& t : r) {
    EXPECT_EQ(t.scale, 1.0f) << t.name;  // the first step ran with the initial scale
    EXPECT_GT(t.amax, 0.0f) << t.name;
  }

  // The second step uses the scales computed from the first step's amaxes.
  model->train_micro(model->input(), labels, 1.0f, GradMode::Overwrite);
  fp8->update(true);
  const auto& r2 = fp8->last_step();
  for (size_t i = 0; i < r.size(); ++i) {
    const float fmax = r[i].format[1] == '4' ? kE4M3Max : kE5M2Max;
    const float want = std::ldexp(1.0f, int(std::floor(std::log2(double(fmax) / r[i].amax))) - 1);
    EXPECT_EQ(r2[i].scale, want) << r[i].name << " amax " << r[i].amax;
  }
  EXPECT_EQ(r2[0].amax, amax_x);  // same batch, same input amax
}

}  // namespace
}  // namespace mpb
