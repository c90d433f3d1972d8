// The element-wise ops on the CPU: OpenMP loops over the scalar cores,
// dispatched once per dtype pair so they vectorise (the maps in
// backends/cpu/kernels/elementwise_map.h).
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/dispatch.h"
#include "backends/cpu/kernels/elementwise_map.h"
#include "ops/activation.h"

namespace mpb::cpu::MPB_CPU_ISA_NS {

using scalar::Elem;

void convert(const Tensor& dst, const Tensor& src) {
  map1(dst, src, [](float x) { return x; });
}

void Kernels::convert(const Tensor& dst, const Tensor& src) { MPB_CPU_ISA_NS::convert(dst, src); }

void Kernels::fill_impl(const Tensor& t, float value) {
  dispatch_float(t.dtype, [&](auto T) {
    using E = Elem<decltype(T)::value>;
    const int64_t n = t.numel();
    void* dst = t.data;
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) E::store(dst, i, value);
  });
}

void Kernels::cast_impl(const Tensor& dst, const Tensor& src) { convert(dst, src); }

void Kernels::scale_impl(const Tensor& t, float factor) {
  map1(t, t, [factor](float x) { return x * factor; });
}

void Kernels::add_bias_impl(const Tensor& y, const Tensor& bias) {
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

void Kernels::activation_forward_impl(Activation act, const Tensor& out, const Tensor& in) {
  if (act == Activation::Gelu) map1(out, in, [](float x) { return scalar::gelu(x); });
  else map1(out, in, [](float x) { return scalar::relu(x); });
}

void Kernels::activation_backward_impl(Activation act, const Tensor& din, const Tensor& dout,
                                         const Tensor& pre_act) {
  if (act == Activation::Gelu) map2(din, dout, pre_act, [](float g, float x) { return g * scalar::gelu_grad(x); });
  else map2(din, dout, pre_act, [](float g, float x) { return g * scalar::relu_grad(x); });
}

void Kernels::bias_grad_impl(const Tensor& db, const Tensor& dy, GradMode mode) {
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

}  // namespace mpb::cpu::MPB_CPU_ISA_NS
