// Why core/precision.h's attention_mask_value() and layernorm_eps() exist:
// the "usual" fp32 constants really do produce non-finite values in fp16,
// and the safe ones don't.
//
//  (a) Attention mask: frameworks materialise the additive mask in the compute
//      dtype (ops/attention.h's mask rule). -1e9 rounds to -inf in fp16 and
//      the real keys get 0 * (-inf) = NaN: masked_softmax_forward and the fused
//      attention op return NaN. attention_mask_value(F16) = -1e4 gives finite
//      probabilities with exactly zero weight on the padded keys. In bf16/fp32
//      -1e9 is harmless (it stays finite). The constants are checked here;
//      the ops' behaviour with them, on every backend, in
//      tests/opcheck/test_op_contracts.cpp (*Fp16MaskHazard).
//  (b) LayerNorm epsilon: a LayerNorm computed in fp16 (emulated here with
//      round_to_half after every operation, core/numerics.h) adds eps to the
//      variance in fp16; BERT's 1e-12 flushes to 0, a constant row has
//      variance 0, and 1/sqrt(0) = inf times (x - mean) = 0 gives NaN.
//      layernorm_eps(F16, 1e-12) = 1e-5 keeps it finite. In bf16 the
//      requested 1e-12 survives (fp32's exponent range), so it is kept.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "core/numerics.h"
#include "core/precision.h"
#include "opcheck/reference.h"

namespace {

using namespace mpb;

std::vector<uint16_t> to_half_bits(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = float_to_half_bits(x[i]);
  return h;
}

int64_t count_nonfinite(const std::vector<double>& v) {
  int64_t n = 0;
  for (double x : v) n += !std::isfinite(x);
  return n;
}

TEST(HalfSafeConstants, MaskValueIsFiniteInItsDtype) {
  // -1e9 overflows fp16 (|x| >= 65520 rounds to inf); the safe value doesn't,
  // and its product with 0 (a real key's 1 - key_valid) is 0, not NaN.
  EXPECT_TRUE(half_bits_is_inf(float_to_half_bits(-1e9f)));
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    const float m = attention_mask_value(t);
    const float stored = t == DType::F16 ? round_to_half(m) : (t == DType::BF16 ? round_to_bf16(m) : m);
    EXPECT_TRUE(std::isfinite(stored)) << dtype_name(t);
    EXPECT_EQ(0.0f * stored, 0.0f) << dtype_name(t);
    EXPECT_LE(stored, -1e4f) << dtype_name(t);  // exp(stored + O(10)) is exactly 0 in fp32
  }
  EXPECT_EQ(round_to_half(attention_mask_value(DType::F16)), -10000.0f);  // exactly representable
}

// A LayerNorm computed entirely in a 16-bit format: every intermediate
// rounded with `round` (round_to_half / round_to_bf16), as a framework running
// LayerNorm in the activations' dtype does.
std::vector<float> layernorm_16bit(const std::vector<float>& x, float eps, float (*round)(float)) {
  const float n = static_cast<float>(x.size());
  float sum = 0.0f;
  for (float xi : x) sum = round(sum + round(xi));
  const float mean = round(sum / n);
  float sq = 0.0f;
  for (float xi : x) {
    const float d = round(round(xi) - mean);
    sq = round(sq + round(d * d));
  }
  const float var = round(sq / n);
  const float rstd = round(1.0f / round(std::sqrt(round(var + round(eps)))));
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = round(round(round(x[i]) - mean) * rstd);
  return y;
}

TEST(HalfSafeConstants, LayerNormEpsInFp16) {
  // 0.375 and its partial sums are exact in fp16: the variance is exactly 0
  // (a padding row, a dead feature).
  const std::vector<float> constant(16, 0.375f);
  const float bert_eps = 1e-12f;
  EXPECT_EQ(round_to_half(bert_eps), 0.0f);  // flushes to zero

  const auto bad = layernorm_16bit(constant, bert_eps, round_to_half);
  for (float y : bad) EXPECT_FALSE(std::isfinite(y));  // 0 * inf = NaN

  const float safe = layernorm_eps(DType::F16, bert_eps);
  EXPECT_EQ(safe, 1e-5f);
  for (float y : layernorm_16bit(constant, safe, round_to_half)) EXPECT_EQ(y, 0.0f);
  // A normal row stays finite and close to the fp32 LayerNorm with the safe eps.
  const auto row = opcheck::random_nonzero(16, 5, 0.1f, 2.0f);
  const auto y16 = layernorm_16bit(row, safe, round_to_half);
  double mean = 0.0, var = 0.0;
  for (float v : row) mean += round_to_half(v) / 16.0;
  for (float v : row) var += (round_to_half(v) - mean) * (round_to_half(v) - mean) / 16.0;
  for (size_t i = 0; i < row.size(); ++i) {
    ASSERT_TRUE(std::isfinite(y16[i]));
    EXPECT_NEAR(y16[i], (round_to_half(row[i]) - mean) / std::sqrt(var + safe), 0.02);  // fp16: ~10 roundings of 2^-11
  }

  // bf16 has fp32's exponent range: 1e-12 survives and the constant row is finite.
  EXPECT_GT(round_to_bf16(bert_eps), 0.0f);
  for (float y : layernorm_16bit(constant, bert_eps, round_to_bf16)) EXPECT_EQ(y, 0.0f);
  EXPECT_EQ(layernorm_eps(DType::BF16, bert_eps), bert_eps);
  EXPECT_EQ(layernorm_eps(DType::F32, bert_eps), bert_eps);
  EXPECT_EQ(layernorm_eps(DType::F16, 1e-3f), 1e-3f);  // larger requests are kept

  // The device's own LayerNorm keeps its statistics in fp32, so an fp16
  // tensor with the tiny eps is still finite there.
  auto dev = make_cpu_device();
  auto x = opcheck::upload(*dev, to_half_bits(constant), Shape{1, 16}, DType::F16);
  auto g = opcheck::upload(*dev, std::vector<float>(16, 1.0f), Shape{16}, DType::F32);
  auto b = opcheck::upload(*dev, std::vector<float>(16, 0.0f), Shape{16}, DType::F32);
  auto out = dev->alloc(Shape{1, 16}, DType::F16, MemCategory::Activations);
  auto mean_t = dev->alloc(Shape{1}, DType::F32, MemCategory::Activations);
  auto rstd_t = dev->alloc(Shape{1}, DType::F32, MemCategory::Activations);
  dev->layernorm_forward(out, mean_t, rstd_t, x, g, b, bert_eps);
  EXPECT_EQ(count_nonfinite(opcheck::download_values(*dev, out)), 0);
}

}  // namespace
