// Element-wise maps over float tensors of any dtypes: the loops behind the
// CPU's element-wise ops (elementwise.cpp) and dropout (transformer.cpp),
// dispatched once per dtype combination so they vectorise.
#pragma once

#include <cstdint>

#include "backends/cpu/kernels/dispatch.h"
#include "core/tensor.h"

namespace mpb::cpu::MPB_CPU_ISA_NS {

// Loops below this many elements are not worth waking the thread team.
constexpr int64_t kParallelMin = 1 << 14;

// out[i] = f(in[i], i), for maps that depend on the position (dropout's
// counter-based mask).
template <typename F>
void map1_indexed(const Tensor& out, const Tensor& in, F f) {
  dispatch_float2(in.dtype, out.dtype, [&](auto I, auto O) {
    using EI = scalar::Elem<decltype(I)::value>;
    using EO = scalar::Elem<decltype(O)::value>;
    const int64_t n = in.numel();
    const void* src = in.data;
    void* dst = out.data;
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) EO::store(dst, i, f(EI::load(src, i), i));
  });
}

// out[i] = f(in[i]).
template <typename F>
void map1(const Tensor& out, const Tensor& in, F f) {
  map1_indexed(out, in, [&](float x, int64_t) { return f(x); });
}

// out[i] = f(a[i], b[i]).
template <typename F>
void map2(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  dispatch_float3(a.dtype, b.dtype, out.dtype, [&](auto A, auto Bt, auto O) {
    using EA = scalar::Elem<decltype(A)::value>;
    using EB = scalar::Elem<decltype(Bt)::value>;
    using EO = scalar::Elem<decltype(O)::value>;
    const int64_t n = a.numel();
    const void* pa = a.data;
    const void* pb = b.data;
    void* dst = out.data;
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) EO::store(dst, i, f(EA::load(pa, i), EB::load(pb, i)));
  });
}

}  // namespace mpb::cpu::MPB_CPU_ISA_NS
