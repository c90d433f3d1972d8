// The additive padding bias that the CUDA backend hands cuDNN SDPA
// (backends/cuda/attention_sdpa_call.cu: a [B,1,1,Tk] tensor in q's dtype, built by
// scalar::attention_bias of ops/attention.h) reproduces the mask rule the
// CPU's masked_logit applies: stored in the dtype it loses nothing (its
// values are 0, the rounded mask, or NaN), and scale * s + bias is
// masked_logit's logit bit for bit, the fp16 hazard (mask -1e9 -> -inf, a
// real key's 0 * -inf = NaN) included. cuDNN's own arithmetic is compared
// with the CPU in tests/gpu/test_cudnn_attention.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/numerics.h"
#include "core/precision.h"
#include "opcheck/host.h"
#include "ops/attention.h"

namespace {

using namespace mpb;

// x as stored in a tensor of dtype t and read back (what cuDNN reads): the
// op check's rounding (opcheck/host.h), not ops/attention.h's own.
float stored(DType t, float x) { return static_cast<float>(opcheck::stored(t, x)); }

// Bitwise equal, or both NaN (a NaN's payload is not part of the rule).
bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  uint32_t x = 0, y = 0;
  std::memcpy(&x, &a, sizeof x);
  std::memcpy(&y, &b, sizeof y);
  return x == y;
}

TEST(AttentionBias, StoredInTheDtypeItIsTheMaskRulesTerm) {
  for (DType t : {DType::F16, DType::BF16, DType::F32}) {
    for (float mask_value : {attention_mask_value(t), -1e4f, -30000.0f, -1e9f, -3.0e38f}) {
      const float m = scalar::attention_mask_rounded(t, mask_value);
      for (int32_t kv : {0, 1}) {
        const float bias = scalar::attention_bias(kv, m);
        EXPECT_TRUE(same(stored(t, bias), bias)) << dtype_name(t) << " mask " << mask_value << " kv " << kv;
        for (float s : {0.0f, -0.0f, 1.5f, -7.25f, 123.456f, -1e-3f}) {
          for (float scale : {0.125f, 0.17677669f, 1.0f}) {
            const float logit = scalar::masked_logit(s, scale, kv, m);
            EXPECT_TRUE(same(scale * s + stored(t, bias), logit))
                << dtype_name(t) << " mask " << mask_value << " kv " << kv << " s " << s << " scale " << scale;
          }
        }
      }
    }
  }
}

TEST(AttentionBias, ValuesOfTheRule) {
  // A real key adds zero, a padded key the rounded mask.
  EXPECT_EQ(scalar::attention_bias(1, -1e4f), 0.0f);
  EXPECT_EQ(scalar::attention_bias(0, scalar::attention_mask_rounded(DType::F16, -1e4f)), round_to_half(-1e4f));
  EXPECT_EQ(scalar::attention_bias(0, scalar::attention_mask_rounded(DType::BF16, -1e9f)), round_to_bf16(-1e9f));
  // The fp16 hazard: -1e9 is -inf in fp16; a real key's term is NaN, a padded key's -inf.
  const float m = scalar::attention_mask_rounded(DType::F16, -1e9f);
  ASSERT_TRUE(std::isinf(m) && m < 0);
  EXPECT_TRUE(std::isnan(scalar::attention_bias(1, m)));
  EXPECT_TRUE(std::isinf(scalar::attention_bias(0, m)));
  // The safe constant keeps every term finite in fp16.
  const float safe = scalar::attention_mask_rounded(DType::F16, attention_mask_value(DType::F16));
  EXPECT_TRUE(std::isfinite(scalar::attention_bias(0, safe)) && std::isfinite(scalar::attention_bias(1, safe)));
}

}  // namespace
