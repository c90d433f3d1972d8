#include "ops/optimizer.h"

#include "backends/cpu/cpu_device_impl.h"
#include "backends/cpu/dispatch.h"

namespace mpb::cpu {

using scalar::Elem;

namespace {

// Calls body(EP, EG, p, g): the element types (backends/cpu/dispatch.h) and
// data of a parameter and its gradient, in any float dtype pair.
template <class Body>
void with_param_and_grad(const Tensor& param, const Tensor& grad, Body body) {
  dispatch_float2(param.dtype, grad.dtype, [&](auto P, auto G) {
    body(Elem<decltype(P)::value>{}, Elem<decltype(G)::value>{}, param.data, grad.data);
  });
}

}  // namespace

void CpuDevice::adamw_step_impl(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                                const AdamWHyper& h, float grad_scale, bool fused, const Tensor& param_copy) {
  const scalar::AdamWStep s = scalar::make_adamw_step(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.step);
  float* mm = static_cast<float*>(m.data);
  float* vv = static_cast<float*>(v.data);
  const int64_t n = param.numel();
  with_param_and_grad(param, grad, [&](auto ep, auto eg, void* p, const void* g) {
    using EP = decltype(ep);
    using EG = decltype(eg);
    if (fused) {
      // One pass: moments and weights (and their copy) while the element is in a register.
      auto step = [&](int64_t i) {
        scalar::adamw_moments(EG::load(g, i) * grad_scale, mm[i], vv[i], s);
        float w = EP::load(p, i);
        scalar::adamw_param(w, mm[i], vv[i], s);
        EP::store(p, i, w);
      };
      if (param_copy.empty()) {
#pragma omp parallel for simd
        for (int64_t i = 0; i < n; ++i) step(i);
        return;
      }
      dispatch_float(param_copy.dtype, [&](auto C) {
        using EC = Elem<decltype(C)::value>;
        void* c = param_copy.data;
#pragma omp parallel for simd
        for (int64_t i = 0; i < n; ++i) {
          step(i);
          EC::store(c, i, EP::load(p, i));  // the copy of the stored (rounded) weight
        }
      });
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
  with_param_and_grad(param, grad, [&](auto ep, auto eg, void* p, const void* g) {
#pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) {
      float w = decltype(ep)::load(p, i);
      scalar::sgd_update(w, decltype(eg)::load(g, i) * grad_scale, buf[i], s);
      decltype(ep)::store(p, i, w);
    }
  });
}

}  // namespace mpb::cpu
