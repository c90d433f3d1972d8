// Activation functions and their derivatives: the scalar core shared by the
// CPU ops (backends/cpu/kernels/elementwise.cpp) and the CUDA kernels (backends/cuda/*.cu).
#pragma once

#include <cmath>

#include "ops/approx_math.h"
#include "ops/scalar.h"

namespace mpb::scalar {
MPB_ISA_NAMESPACE_BEGIN

// GELU, tanh approximation (Hendrycks & Gimpel; PyTorch approximate='tanh',
// cuBLASLt's GELU epilogue, GPT-2/llm.c). tanh is ops/approx_math.h's, so the
// loops vectorise and both backends compute the same bits.
// gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;

MPB_HD inline float gelu(float x) {
  float u = kGeluC * (x + kGeluA * x * x * x);
  return 0.5f * x * (1.0f + tanh_approx(u));
}

MPB_HD inline float gelu_grad(float x) {
  float x2 = x * x;
  float u = kGeluC * (x + kGeluA * x2 * x);
  float t = tanh_approx(u);
  float du = kGeluC * (1.0f + 3.0f * kGeluA * x2);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

MPB_HD inline float relu(float x) { return x > 0.0f ? x : 0.0f; }
MPB_HD inline float relu_grad(float x) { return x > 0.0f ? 1.0f : 0.0f; }

MPB_ISA_NAMESPACE_END
}  // namespace mpb::scalar
