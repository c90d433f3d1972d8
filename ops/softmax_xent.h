// Softmax cross-entropy pieces shared by the CPU and CUDA ops. A row is
// reduced in fp32 in two passes (max, then sum of exp(x - max)), as every
// numerically safe implementation does; these helpers are the per-element math.
#pragma once

#include <cmath>

#include "ops/scalar.h"

namespace mpb::scalar {

// loss of one row = log(sum_j exp(x_j - max)) - (x_label - max)
MPB_HD inline float xent_row_loss(float x_label, float row_max, float sum_exp) {
  return logf(sum_exp) - (x_label - row_max);
}

// d loss / d x_j, times grad_scale (1/batch, and the loss scale).
MPB_HD inline float xent_grad(float prob, bool is_label, float grad_scale) {
  return (prob - (is_label ? 1.0f : 0.0f)) * grad_scale;
}

}  // namespace mpb::scalar
