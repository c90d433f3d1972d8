#include <cmath>
#include <vector>

#include "ops/cpu/cpu_ops.h"
#include "ops/dtype_io.h"
#include "ops/softmax_xent.h"

namespace mpb::cpu {

using scalar::load_f32;
using scalar::store_f32;

namespace {

void check_xent(const char* op, const Tensor& logits, const Tensor& labels, const Tensor& out) {
  require(labels.dtype == DType::I32 && labels.numel() == logits.rows(), op, "labels must be int32 [rows]");
  require(out.numel() == logits.numel(), op, "output must match logits");
}

// Row max and sum of exp(x - max), in fp32 as every safe softmax does.
void row_max_sum(const Tensor& logits, int64_t r, float& row_max, float& sum_exp) {
  const int64_t C = logits.cols();
  row_max = -INFINITY;
  for (int64_t c = 0; c < C; ++c) row_max = std::fmax(row_max, load_f32(logits.data, logits.dtype, r * C + c));
  sum_exp = 0.0f;
  for (int64_t c = 0; c < C; ++c) sum_exp += expf(load_f32(logits.data, logits.dtype, r * C + c) - row_max);
}

// Rows are reduced independently; their losses are summed in row order on one
// thread so the total does not depend on the thread count.
double sum_in_order(const std::vector<float>& row_loss) {
  double total = 0.0;
  for (float l : row_loss) total += l;
  return total;
}

}  // namespace

double softmax_xent_forward(const Tensor& probs, const Tensor& logits, const Tensor& labels) {
  check_xent("softmax_xent_forward", logits, labels, probs);
  require(probs.dtype == DType::F32, "softmax_xent_forward", "probs must be fp32");
  const int64_t B = logits.rows(), C = logits.cols();
  const int32_t* y = static_cast<const int32_t*>(labels.data);
  float* p = static_cast<float*>(probs.data);
  std::vector<float> row_loss(static_cast<size_t>(B));
#pragma omp parallel for
  for (int64_t r = 0; r < B; ++r) {
    float mx, sum;
    row_max_sum(logits, r, mx, sum);
    for (int64_t c = 0; c < C; ++c) p[r * C + c] = expf(load_f32(logits.data, logits.dtype, r * C + c) - mx) / sum;
    row_loss[static_cast<size_t>(r)] =
        scalar::xent_ignored(y[r]) ? 0.0f
                                   : scalar::xent_row_loss(load_f32(logits.data, logits.dtype, r * C + y[r]), mx, sum);
  }
  return sum_in_order(row_loss);
}

void softmax_xent_backward(const Tensor& dlogits, const Tensor& probs, const Tensor& labels, float grad_scale) {
  check_xent("softmax_xent_backward", probs, labels, dlogits);
  const int64_t B = probs.rows(), C = probs.cols();
  const int32_t* y = static_cast<const int32_t*>(labels.data);
  const float* p = static_cast<const float*>(probs.data);
#pragma omp parallel for
  for (int64_t r = 0; r < B; ++r) {
    const bool ignored = scalar::xent_ignored(y[r]);
    for (int64_t c = 0; c < C; ++c)
      store_f32(dlogits.data, dlogits.dtype, r * C + c,
                ignored ? 0.0f : scalar::xent_grad(p[r * C + c], c == y[r], grad_scale));
  }
}

double softmax_xent_fused(const Tensor& dlogits, const Tensor& logits, const Tensor& labels, float grad_scale) {
  check_xent("softmax_xent_fused", logits, labels, dlogits);
  const int64_t B = logits.rows(), C = logits.cols();
  const int32_t* y = static_cast<const int32_t*>(labels.data);
  std::vector<float> row_loss(static_cast<size_t>(B));
#pragma omp parallel for
  for (int64_t r = 0; r < B; ++r) {
    if (scalar::xent_ignored(y[r])) {  // not a target: no loss, no gradient
      row_loss[static_cast<size_t>(r)] = 0.0f;
      for (int64_t c = 0; c < C; ++c) store_f32(dlogits.data, dlogits.dtype, r * C + c, 0.0f);
      continue;
    }
    float mx, sum;
    row_max_sum(logits, r, mx, sum);
    row_loss[static_cast<size_t>(r)] = scalar::xent_row_loss(load_f32(logits.data, logits.dtype, r * C + y[r]), mx, sum);
    // Same expression as the unfused forward's probability, so fused == unfused bit for bit.
    for (int64_t c = 0; c < C; ++c) {
      float prob = expf(load_f32(logits.data, logits.dtype, r * C + c) - mx) / sum;
      store_f32(dlogits.data, dlogits.dtype, r * C + c, scalar::xent_grad(prob, c == y[r], grad_scale));
    }
  }
  return sum_in_order(row_loss);
}

int64_t count_correct(const Tensor& logits, const Tensor& labels) {
  require(labels.dtype == DType::I32 && labels.numel() == logits.rows(), "count_correct",
          "labels must be int32 [rows]");
  const int64_t B = logits.rows(), C = logits.cols();
  const int32_t* y = static_cast<const int32_t*>(labels.data);
  int64_t correct = 0;
#pragma omp parallel for reduction(+ : correct)
  for (int64_t r = 0; r < B; ++r) {
    if (scalar::xent_ignored(y[r])) continue;  // not a target (see ops/softmax_xent.h)
    int64_t best = 0;  // ties go to the lowest index, on every backend
    float best_v = load_f32(logits.data, logits.dtype, r * C);
    for (int64_t c = 1; c < C; ++c) {
      float v = load_f32(logits.data, logits.dtype, r * C + c);
      if (v > best_v) best_v = v, best = c;
    }
    correct += (best == y[r]);
  }
  return correct;
}

}  // namespace mpb::cpu
