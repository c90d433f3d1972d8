#include "ops/optimizer.h"

#include "backends/cpu/cpu_device_impl.h"
#include "backends/cpu/dispatch.h"

namespace mpb::cpu {

using scalar::Elem;

void CpuDevice::adamw_step_impl(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                                const AdamWHyper& h, float grad_scale, bool fused, const Tensor& param_copy) {
  const scalar::AdamWStep s = scalar::make_adamw_step(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.step);
  float* mm = static_cast<float*>(m.data);
  float* vv = static_cast<float*>(v.data);
  const int64_t n = param.numel();
  dispatch_float2(param.dtype, grad.dtype, [&](auto P, auto G) {
    using EP = Elem<decltype(P)::value>;
    using EG = Elem<decltype(G)::value>;
    void* p = param.data;
    const void* g = grad.data;
    if (fused) {
      if (!param_copy.empty()) {  // one pass: moments, weights, and their copy
        dispatch_float(param_copy.dtype, [&](auto C) {
          using EC = Elem<decltype(C)::value>;
          void* c = param_copy.data;
#pragma omp parallel for simd
          for (int64_t i = 0; i < n; ++i) {
            scalar::adamw_moments(EG::load(g, i) * grad_scale, mm[i], vv[i], s);
            float w = EP::load(p, i);
            scalar::adamw_param(w, mm[i], vv[i], s);
            EP::store(p, i, w);
            EC::store(c, i, EP::load(p, i));  // the copy of the stored (rounded) weight
          }
        });
        return;
      }
#pragma omp parallel for simd
      for (int64_t i = 0; i < n; ++i) {
        scalar::adamw_moments(EG::load(g, i) * grad_scale, mm[i], vv[i], s);
        float w = EP::load(p, i);
        scalar::adamw_param(w, mm[i], vv[i], s);
        EP::store(p, i, w);
      }
      return;
    }
    // Unfused: the moments in one sweep, the parameters in another, as a
    // non-fused framework optimizer reads and writes memory.
#pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) scalar::adamw_moments(EG::load(g, i) * grad_scale, mm[i], vv[i], s);
#pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) {
      float w = EP::load(p, i);
      scalar::adamw_param(w, mm[i], vv[i], s);
      EP::store(p, i, w);
    }
  });
  if (!fused && !param_copy.empty()) convert(param_copy, param);  // a separate sweep, as unfused code does
}

void CpuDevice::sgd_step_impl(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const SgdHyper& h,
                              float grad_scale) {
  const scalar::SgdStep s{h.lr, h.momentum, h.weight_decay};
  float* buf = static_cast<float*>(momentum_buf.data);
  const int64_t n = param.numel();
  dispatch_float2(param.dtype, grad.dtype, [&](auto P, auto G) {
    using EP = Elem<decltype(P)::value>;
    using EG = Elem<decltype(G)::value>;
    void* p = param.data;
    const void* g = grad.data;
#pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) {
      float w = EP::load(p, i);
      scalar::sgd_update(w, EG::load(g, i) * grad_scale, buf[i], s);
      EP::store(p, i, w);
    }
  });
}

}  // namespace mpb::cpu
