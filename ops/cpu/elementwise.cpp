#include <stdexcept>
#include <string>

#include "ops/activation.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"

namespace mpb::cpu {

using scalar::Elem;

void require(bool ok, const char* op, const char* what) {
  if (!ok) throw std::invalid_argument(std::string(op) + ": " + what);
}

namespace {
// Element-wise loops below this size are not worth waking the thread team.
constexpr int64_t kParallelMin = 1 << 14;

// out[i] = f(in[i]) for any float dtypes, dispatched once, vectorisable.
template <typename F>
void map1(const Tensor& out, const Tensor& in, F f) {
  dispatch_float2(in.dtype, out.dtype, [&](auto I, auto O) {
    using EI = Elem<decltype(I)::value>;
    using EO = Elem<decltype(O)::value>;
    const int64_t n = in.numel();
    const void* src = in.data;
    void* dst = out.data;
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) EO::store(dst, i, f(EI::load(src, i)));
  });
}

// out[i] = f(a[i], b[i]); a and b share a dtype (gradient and saved activation).
template <typename F>
void map2(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  dispatch_float2(a.dtype, out.dtype, [&](auto A, auto O) {
    dispatch_float(b.dtype, [&](auto Bt) {
      using EA = Elem<decltype(A)::value>;
      using EB = Elem<decltype(Bt)::value>;
      using EO = Elem<decltype(O)::value>;
      const int64_t n = a.numel();
      const void* pa = a.data;
      const void* pb = b.data;
      void* dst = out.data;
#pragma omp parallel for simd if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) EO::store(dst, i, f(EA::load(pa, i), EB::load(pb, i)));
    });
  });
}
}  // namespace

void fill(const Tensor& t, float value) {
  dispatch_float(t.dtype, [&](auto T) {
    using E = Elem<decltype(T)::value>;
    const int64_t n = t.numel();
    void* dst = t.data;
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) E::store(dst, i, value);
  });
}

void cast(const Tensor& dst, const Tensor& src) {
  require(dst.numel() == src.numel(), "cast", "element counts differ");
  map1(dst, src, [](float x) { return x; });
}

void scale(const Tensor& t, float factor) {
  map1(t, t, [factor](float x) { return x * factor; });
}

void add_bias(const Tensor& y, const Tensor& bias) {
  require(bias.numel() == y.cols(), "add_bias", "bias must be [cols]");
  dispatch_float2(y.dtype, bias.dtype, [&](auto T, auto Bt) {
    using E = Elem<decltype(T)::value>;
    using EB = Elem<decltype(Bt)::value>;
    const int64_t rows = y.rows(), cols = y.cols();
    const void* b = bias.data;
    void* p = y.data;
#pragma omp parallel for if (rows * cols > kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) E::store(p, r * cols + c, E::load(p, r * cols + c) + EB::load(b, c));
    }
  });
}

void activation_forward(Activation act, const Tensor& out, const Tensor& in) {
  require(out.numel() == in.numel(), "activation_forward", "element counts differ");
  if (act == Activation::Gelu) map1(out, in, [](float x) { return scalar::gelu(x); });
  else map1(out, in, [](float x) { return scalar::relu(x); });
}

void activation_backward(Activation act, const Tensor& din, const Tensor& dout, const Tensor& pre_act) {
  require(din.numel() == dout.numel() && din.numel() == pre_act.numel(), "activation_backward",
          "element counts differ");
  if (act == Activation::Gelu) map2(din, dout, pre_act, [](float g, float x) { return g * scalar::gelu_grad(x); });
  else map2(din, dout, pre_act, [](float g, float x) { return g * scalar::relu_grad(x); });
}

void bias_grad(const Tensor& db, const Tensor& dy, GradMode mode) {
  require(db.numel() == dy.cols(), "bias_grad", "db must be [cols]");
  dispatch_float2(dy.dtype, db.dtype, [&](auto T, auto D) {
    using E = Elem<decltype(T)::value>;
    using ED = Elem<decltype(D)::value>;
    const int64_t rows = dy.rows(), cols = dy.cols();
    void* out = db.data;
    const void* p = dy.data;
    // Each thread owns a block of columns and sums rows in order, in fp32:
    // deterministic and free of false sharing.
#pragma omp parallel for if (rows * cols > kParallelMin)
    for (int64_t c0 = 0; c0 < cols; c0 += 64) {
      const int64_t c1 = c0 + 64 < cols ? c0 + 64 : cols;
      float acc[64] = {};
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = c0; c < c1; ++c) acc[c - c0] += E::load(p, r * cols + c);
      for (int64_t c = c0; c < c1; ++c)
        ED::store(out, c, (mode == GradMode::Accumulate ? ED::load(out, c) : 0.0f) + acc[c - c0]);
    }
  });
}

}  // namespace mpb::cpu
