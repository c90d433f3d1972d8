#include "ops/optimizer.h"

#include "ops/cpu/cpu_ops.h"

namespace mpb::cpu {

namespace {
void check_state(const char* op, const Tensor& p, const Tensor& g, const Tensor& s) {
  require(p.dtype == DType::F32 && s.dtype == DType::F32, op, "fp32 master weights and state expected");
  require(g.dtype == DType::F32, op, "fp32 gradients expected");
  require(p.numel() == g.numel() && p.numel() == s.numel(), op, "element counts differ");
}
}  // namespace

void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamWHyper& h,
                float grad_scale, bool fused) {
  check_state("adamw_step", param, grad, m);
  check_state("adamw_step", param, grad, v);
  const scalar::AdamWStep s = scalar::make_adamw_step(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.step);
  float* p = static_cast<float*>(param.data);
  const float* g = static_cast<const float*>(grad.data);
  float* mm = static_cast<float*>(m.data);
  float* vv = static_cast<float*>(v.data);
  const int64_t n = param.numel();
  if (fused) {
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
      scalar::adamw_moments(g[i] * grad_scale, mm[i], vv[i], s);
      scalar::adamw_param(p[i], mm[i], vv[i], s);
    }
    return;
  }
  // Unfused: the moments in one sweep, the parameters in another, as a
  // non-fused framework optimizer reads and writes memory.
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) scalar::adamw_moments(g[i] * grad_scale, mm[i], vv[i], s);
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) scalar::adamw_param(p[i], mm[i], vv[i], s);
}

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const SgdHyper& h,
              float grad_scale) {
  check_state("sgd_step", param, grad, momentum_buf);
  const scalar::SgdStep s{h.lr, h.momentum, h.weight_decay};
  float* p = static_cast<float*>(param.data);
  const float* g = static_cast<const float*>(grad.data);
  float* buf = static_cast<float*>(momentum_buf.data);
  const int64_t n = param.numel();
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) scalar::sgd_update(p[i], g[i] * grad_scale, buf[i], s);
}

}  // namespace mpb::cpu
