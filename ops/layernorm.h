// LayerNorm pieces shared by the CPU ops (backends/cpu/kernels/transformer.cpp) and the
// CUDA kernels. Statistics are always fp32, whatever the storage dtype.
//
// Forward, per row x[0..C):
//   mean = (sum_c x_c) / C                          (layernorm_mean)
//   var  = (sum_c (x_c - mean)^2) / C               two passes, not E[x^2] - mean^2,
//                                                   so var >= 0 and no cancellation
//   rstd = 1 / sqrt(var + eps)                      (layernorm_rstd)
//   y_c  = ((x_c - mean) * rstd) * gamma_c + beta_c (layernorm_out)
// The row sums are reductions (the backend picks the order; on the CPU a
// vectorised sum in fp32); everything else is these functions.
//
// Backward, per row, with xhat_c = (x_c - mean) * rstd and g_c = dy_c * gamma_c:
//   a    = (sum_c g_c) / C
//   b    = (sum_c g_c * xhat_c) / C
//   dx_c = rstd * (g_c - a - xhat_c * b)              (layernorm_dx)
//   dgamma_c = sum_rows dy_c * xhat_c, dbeta_c = sum_rows dy_c (fp32, reduced over
//   rows in a fixed order: deterministic).
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/scalar.h"

namespace mpb::scalar {
MPB_ISA_NAMESPACE_BEGIN

// Rows per partial dgamma/dbeta sum in the backward: rows in order within a
// chunk, then the chunk partials in chunk order. A fixed number, so the
// reduction order depends on the shape only (not on threads or GPU blocks),
// and one number, so both backends sum in the same order. The CUDA backend
// runs one block per chunk.
constexpr int64_t kLnGradChunk = 32;

MPB_HD inline float layernorm_mean(float sum, int64_t cols) { return sum / static_cast<float>(cols); }

// sum_sq_dev = sum_c (x_c - mean)^2
MPB_HD inline float layernorm_rstd(float sum_sq_dev, int64_t cols, float eps) {
  const float var = sum_sq_dev / static_cast<float>(cols);
  return 1.0f / sqrtf(var + eps);
}

MPB_HD inline float layernorm_xhat(float x, float mean, float rstd) { return (x - mean) * rstd; }

MPB_HD inline float layernorm_out(float x, float mean, float rstd, float gamma, float beta) {
  return layernorm_xhat(x, mean, rstd) * gamma + beta;
}

// mean_g = a, mean_gx = b above.
MPB_HD inline float layernorm_dx(float g, float xhat, float mean_g, float mean_gx, float rstd) {
  return rstd * ((g - mean_g) - xhat * mean_gx);
}

MPB_ISA_NAMESPACE_END
}  // namespace mpb::scalar
