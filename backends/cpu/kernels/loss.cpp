// Softmax cross-entropy and accuracy on the CPU: rows in parallel, each in
// fp32 with the scalar cores of ops/softmax_xent.h; the loss summed in row
// order.
#include <cmath>
#include <vector>

#include "backends/cpu/kernel_errors.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/dispatch.h"
#include "ops/softmax_xent.h"

namespace mpb::cpu::MPB_CPU_ISA_NS {

using scalar::Elem;

namespace {

// A label >= the number of classes C is an error in the data, which only the
// backend can read (core/device.h): here, before anything is written, as
// std::out_of_range (the CUDA kernels flag it instead). Negative labels are
// ignored rows.
const int32_t* check_labels(const char* op, const Tensor& labels, int64_t C) {
  const int32_t* y = static_cast<const int32_t*>(labels.data);
  const int64_t B = labels.numel();
  for (int64_t r = 0; r < B; ++r)
    if (y[r] >= C)
      throw_bad_label(op, y[r], r, C);
  return y;
}

// One row in fp32, as every safe softmax does: e[c] = exp(x[c] - max) and
// their sum. Branch-free loops over a thread's scratch row, so they vectorise.
template <typename E>
void row_exp(const void* logits, int64_t base, int64_t C, float* e, float& row_max, float& sum) {
  float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
  for (int64_t c = 0; c < C; ++c) {
    const float x = E::load(logits, base + c);
    mx = x > mx ? x : mx;
  }
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t c = 0; c < C; ++c) {
    e[c] = scalar::xent_exp(E::load(logits, base + c), mx);
    s += e[c];
  }
  row_max = mx;
  sum = s;
}

// Rows are reduced independently; their losses are summed in row order on one
// thread so the total does not depend on the thread count.
double sum_in_order(const std::vector<float>& row_loss) {
  double total = 0.0;
  for (float l : row_loss) total += l;
  return total;
}

}  // namespace

double Kernels::softmax_xent_forward_impl(const Tensor& probs, const Tensor& logits, const Tensor& labels,
                                          bool deferred) {
  const int64_t B = logits.rows(), C = logits.cols();
  const int32_t* y = check_labels("softmax_xent_forward", labels, C);
  float* p = static_cast<float*>(probs.data);
  std::vector<float> row_loss(static_cast<size_t>(B));
  dispatch_float(logits.dtype, [&](auto T) {
    using E = Elem<decltype(T)::value>;
    const void* x = logits.data;
#pragma omp parallel for
    for (int64_t r = 0; r < B; ++r) {
      const bool ignored = scalar::xent_ignored(y[r]);
      // Read before the row is overwritten: probs may be the logits (in place).
      const float x_label = ignored ? 0.0f : E::load(x, r * C + y[r]);
      float mx, sum;
      float* e = p + r * C;  // the probabilities' own row is the scratch
      row_exp<E>(x, r * C, C, e, mx, sum);
      const float inv = 1.0f / sum;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) e[c] = e[c] * inv;
      row_loss[static_cast<size_t>(r)] = ignored ? 0.0f : scalar::xent_row_loss(x_label, mx, sum);
    }
  });
  return loss_result(sum_in_order(row_loss), deferred);  // deferred: summed on the device, in call order
}

void Kernels::softmax_xent_backward_impl(const Tensor& dlogits, const Tensor& probs, const Tensor& labels,
                                           float grad_scale) {
  const int64_t B = probs.rows(), C = probs.cols();
  const int32_t* y = check_labels("softmax_xent_backward", labels, C);
  const float* p = static_cast<const float*>(probs.data);
  dispatch_float(dlogits.dtype, [&](auto T) {
    using E = Elem<decltype(T)::value>;
    void* d = dlogits.data;
#pragma omp parallel for
    for (int64_t r = 0; r < B; ++r) {
      const bool ignored = scalar::xent_ignored(y[r]);
      const int64_t label = y[r];
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        E::store(d, r * C + c, ignored ? 0.0f : scalar::xent_grad(p[r * C + c], c == label, grad_scale));
    }
  });
}

double Kernels::softmax_xent_fused_impl(const Tensor& dlogits, const Tensor& logits, const Tensor& labels,
                                        float grad_scale, bool deferred) {
  const int64_t B = logits.rows(), C = logits.cols();
  const int32_t* y = check_labels("softmax_xent_fused", labels, C);
  std::vector<float> row_loss(static_cast<size_t>(B));
  dispatch_float2(logits.dtype, dlogits.dtype, [&](auto T, auto D) {
    using E = Elem<decltype(T)::value>;
    using ED = Elem<decltype(D)::value>;
    const void* x = logits.data;
    void* d = dlogits.data;
#pragma omp parallel
    {
      std::vector<float> scratch(static_cast<size_t>(C));
      float* e = scratch.data();
#pragma omp for
      for (int64_t r = 0; r < B; ++r) {
        if (scalar::xent_ignored(y[r])) {  // not a target: no loss, no gradient
          row_loss[static_cast<size_t>(r)] = 0.0f;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) ED::store(d, r * C + c, 0.0f);
          continue;
        }
        float mx, sum;
        row_exp<E>(x, r * C, C, e, mx, sum);
        row_loss[static_cast<size_t>(r)] = scalar::xent_row_loss(E::load(x, r * C + y[r]), mx, sum);
        // The same probability expression as the unfused forward, so fused == unfused bit for bit.
        const float inv = 1.0f / sum;
        const int64_t label = y[r];
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) ED::store(d, r * C + c, scalar::xent_grad(e[c] * inv, c == label, grad_scale));
      }
    }
  });
  return loss_result(sum_in_order(row_loss), deferred);  // deferred: summed on the device, in call order
}

int64_t Kernels::count_correct_impl(const Tensor& logits, const Tensor& labels) {
  const int64_t B = logits.rows(), C = logits.cols();
  const int32_t* y = check_labels("count_correct", labels, C);
  int64_t correct = 0;
  dispatch_float(logits.dtype, [&](auto T) {
    using E = Elem<decltype(T)::value>;
    const void* x = logits.data;
#pragma omp parallel for reduction(+ : correct)
    for (int64_t r = 0; r < B; ++r) {
      if (scalar::xent_ignored(y[r])) continue;  // not a target (see ops/softmax_xent.h)
      int64_t best = 0;  // ties go to the lowest index, on every backend
      float best_v = E::load(x, r * C);
      for (int64_t c = 1; c < C; ++c) {
        const float v = E::load(x, r * C + c);
        if (v > best_v) best_v = v, best = c;
      }
      correct += (best == y[r]);
    }
  });
  return correct;
}

}  // namespace mpb::cpu::MPB_CPU_ISA_NS
