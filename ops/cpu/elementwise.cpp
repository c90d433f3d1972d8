#include <omp.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "ops/activation.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/dtype_io.h"

namespace mpb::cpu {

using scalar::load_f32;
using scalar::store_f32;

void require(bool ok, const char* op, const char* what) {
  if (!ok) throw std::invalid_argument(std::string(op) + ": " + what);
}

namespace {
// Element-wise loops below this size are not worth waking the thread team.
constexpr int64_t kParallelMin = 1 << 14;
}  // namespace

void fill(const Tensor& t, float value) {
  require(is_float(t.dtype), "fill", "float tensor expected");
  const int64_t n = t.numel();
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) store_f32(t.data, t.dtype, i, value);
}

void cast(const Tensor& dst, const Tensor& src) {
  require(dst.numel() == src.numel(), "cast", "element counts differ");
  require(is_float(dst.dtype) && is_float(src.dtype), "cast", "float tensors expected");
  const int64_t n = dst.numel();
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) store_f32(dst.data, dst.dtype, i, load_f32(src.data, src.dtype, i));
}

void scale(const Tensor& t, float factor) {
  const int64_t n = t.numel();
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) store_f32(t.data, t.dtype, i, load_f32(t.data, t.dtype, i) * factor);
}

void add_bias(const Tensor& y, const Tensor& bias) {
  require(bias.dtype == DType::F32 && bias.numel() == y.cols(), "add_bias", "bias must be fp32 [cols]");
  const int64_t rows = y.rows(), cols = y.cols();
  const float* b = static_cast<const float*>(bias.data);
#pragma omp parallel for if (rows * cols > kParallelMin)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      int64_t i = r * cols + c;
      store_f32(y.data, y.dtype, i, load_f32(y.data, y.dtype, i) + b[c]);
    }
}

void activation_forward(Activation act, const Tensor& out, const Tensor& in) {
  require(out.numel() == in.numel(), "activation_forward", "element counts differ");
  const int64_t n = in.numel();
  if (act == Activation::Gelu) {
#pragma omp parallel for if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) store_f32(out.data, out.dtype, i, scalar::gelu(load_f32(in.data, in.dtype, i)));
  } else {
#pragma omp parallel for if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) store_f32(out.data, out.dtype, i, scalar::relu(load_f32(in.data, in.dtype, i)));
  }
}

void activation_backward(Activation act, const Tensor& din, const Tensor& dout, const Tensor& pre_act) {
  require(din.numel() == dout.numel() && din.numel() == pre_act.numel(), "activation_backward",
          "element counts differ");
  const int64_t n = din.numel();
  if (act == Activation::Gelu) {
#pragma omp parallel for if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i)
      store_f32(din.data, din.dtype, i,
                load_f32(dout.data, dout.dtype, i) * scalar::gelu_grad(load_f32(pre_act.data, pre_act.dtype, i)));
  } else {
#pragma omp parallel for if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i)
      store_f32(din.data, din.dtype, i,
                load_f32(dout.data, dout.dtype, i) * scalar::relu_grad(load_f32(pre_act.data, pre_act.dtype, i)));
  }
}

void bias_grad(const Tensor& db, const Tensor& dy, GradMode mode) {
  require(db.dtype == DType::F32 && db.numel() == dy.cols(), "bias_grad", "db must be fp32 [cols]");
  const int64_t rows = dy.rows(), cols = dy.cols();
  float* out = static_cast<float*>(db.data);
  // Each thread owns a block of columns and sums rows in order: deterministic
  // and free of false sharing.
#pragma omp parallel for if (rows * cols > kParallelMin)
  for (int64_t c0 = 0; c0 < cols; c0 += 64) {
    const int64_t c1 = c0 + 64 < cols ? c0 + 64 : cols;
    float acc[64] = {};
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = c0; c < c1; ++c) acc[c - c0] += load_f32(dy.data, dy.dtype, r * cols + c);
    for (int64_t c = c0; c < c1; ++c) out[c] = (mode == GradMode::Accumulate ? out[c] : 0.0f) + acc[c - c0];
  }
}

}  // namespace mpb::cpu
