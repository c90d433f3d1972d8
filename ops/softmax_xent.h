// Softmax cross-entropy pieces shared by the CPU and CUDA ops. A row is
// reduced in fp32 in two passes (max, then sum of exp(x - max)), as every
// numerically safe implementation does; these helpers are the per-element math.
//
// Ignored rows (masked-LM): a row whose label is negative (-100 in PyTorch's
// ignore_index, -1 in bert4keras-style sparse labels; any value < 0 here) is
// not a prediction target. Its loss contributes exactly 0 to the returned sum,
// its dlogits row is exactly 0, and count_correct skips it. The probs row of
// the unfused forward is still the softmax (it is well defined). The returned
// values stay sums: the caller divides by the number of non-ignored rows (and
// folds 1/that count into grad_scale) itself.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/approx_math.h"
#include "ops/scalar.h"

namespace mpb::scalar {
MPB_ISA_NAMESPACE_BEGIN

// exp(x - row_max) for the row sums and probabilities: ops/approx_math.h's
// exp, so the CPU loops vectorise and both backends compute the same values.
MPB_HD inline float xent_exp(float x, float row_max) { return exp_approx(x - row_max); }

// loss of one row = log(sum_j exp(x_j - max)) - (x_label - max)
MPB_HD inline float xent_row_loss(float x_label, float row_max, float sum_exp) {
  return logf(sum_exp) - (x_label - row_max);
}

// d loss / d x_j, times grad_scale (1/batch, and the loss scale).
MPB_HD inline float xent_grad(float prob, bool is_label, float grad_scale) {
  return (prob - (is_label ? 1.0f : 0.0f)) * grad_scale;
}

// The ignore rule above.
MPB_HD inline bool xent_ignored(int32_t label) { return label < 0; }

MPB_ISA_NAMESPACE_END
}  // namespace mpb::scalar
