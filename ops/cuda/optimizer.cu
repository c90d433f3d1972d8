// Optimizer updates on the GPU over the scalar cores in ops/optimizer.h.
// Fused AdamW: one kernel, one pass over (param, grad, m, v). Unfused: one
// kernel per update equation (m, v, param), as a framework without a fused
// optimizer runs it; each kernel evaluates the same scalar expressions, so
// both give bit-identical results.
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_device_impl.h"
#include "ops/cuda/kernel_util.cuh"
#include "ops/optimizer.h"

namespace mpb::cuda {

namespace {

__global__ void adamw_fused_kernel(float* p, const float* g, float* m, float* v, int64_t n, scalar::AdamWStep s,
                                   float grad_scale) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    float mi = m[i], vi = v[i], pi = p[i];
    scalar::adamw_moments(g[i] * grad_scale, mi, vi, s);
    scalar::adamw_param(pi, mi, vi, s);
    m[i] = mi;
    v[i] = vi;
    p[i] = pi;
  }
}

// adamw_moments updates m and v independently of each other; each of these
// kernels keeps one and feeds a dummy for the other (which it discards), so
// it reads and writes only its own state.
__global__ void adamw_m_kernel(const float* g, float* m, int64_t n, scalar::AdamWStep s, float grad_scale) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    float mi = m[i], unused = 0.0f;
    scalar::adamw_moments(g[i] * grad_scale, mi, unused, s);
    m[i] = mi;
  }
}

__global__ void adamw_v_kernel(const float* g, float* v, int64_t n, scalar::AdamWStep s, float grad_scale) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    float unused = 0.0f, vi = v[i];
    scalar::adamw_moments(g[i] * grad_scale, unused, vi, s);
    v[i] = vi;
  }
}

__global__ void adamw_param_kernel(float* p, const float* m, const float* v, int64_t n, scalar::AdamWStep s) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    float pi = p[i];
    scalar::adamw_param(pi, m[i], v[i], s);
    p[i] = pi;
  }
}

__global__ void sgd_kernel(float* p, const float* g, float* buf, int64_t n, scalar::SgdStep s, float grad_scale) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    float pi = p[i], bi = buf[i];
    scalar::sgd_update(pi, g[i] * grad_scale, bi, s);
    p[i] = pi;
    buf[i] = bi;
  }
}

// The CPU backend's checks (ops/cpu/optimizer.cpp).
void check_state(const char* op, const Tensor& p, const Tensor& g, const Tensor& s) {
  require(p.dtype == DType::F32 && s.dtype == DType::F32, op, "fp32 master weights and state expected");
  require(g.dtype == DType::F32, op, "fp32 gradients expected");
  require(p.numel() == g.numel() && p.numel() == s.numel(), op, "element counts differ");
  require(p.numel() == 0 || (p.data && g.data && s.data), op, "null tensor");
}

}  // namespace

void CudaDevice::adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                            const AdamWHyper& h, float grad_scale, bool fused) {
  check_state("adamw_step", param, grad, m);
  check_state("adamw_step", param, grad, v);
  require(h.step >= 1, "adamw_step", "step is 1-based");
  const int64_t n = param.numel();
  if (n == 0) return;
  // Per-step constants on the host in double, rounded to fp32: the same
  // numbers the CPU backend feeds its element update.
  const scalar::AdamWStep s = scalar::make_adamw_step(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.step);
  auto* p = static_cast<float*>(param.data);
  const auto* g = static_cast<const float*>(grad.data);
  auto* mm = static_cast<float*>(m.data);
  auto* vv = static_cast<float*>(v.data);
  const unsigned grid = elementwise_grid(n);
  if (fused) {
    adamw_fused_kernel<<<grid, kThreads, 0, stream()>>>(p, g, mm, vv, n, s, grad_scale);
    MPB_CHECK_LAUNCH("adamw_fused_kernel");
    return;
  }
  adamw_m_kernel<<<grid, kThreads, 0, stream()>>>(g, mm, n, s, grad_scale);
  MPB_CHECK_LAUNCH("adamw_m_kernel");
  adamw_v_kernel<<<grid, kThreads, 0, stream()>>>(g, vv, n, s, grad_scale);
  MPB_CHECK_LAUNCH("adamw_v_kernel");
  adamw_param_kernel<<<grid, kThreads, 0, stream()>>>(p, mm, vv, n, s);
  MPB_CHECK_LAUNCH("adamw_param_kernel");
}

void CudaDevice::sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const SgdHyper& h,
                          float grad_scale) {
  check_state("sgd_step", param, grad, momentum_buf);
  const int64_t n = param.numel();
  if (n == 0) return;
  const scalar::SgdStep s{h.lr, h.momentum, h.weight_decay};
  sgd_kernel<<<elementwise_grid(n), kThreads, 0, stream()>>>(static_cast<float*>(param.data),
                                                             static_cast<const float*>(grad.data),
                                                             static_cast<float*>(momentum_buf.data), n, s, grad_scale);
  MPB_CHECK_LAUNCH("sgd_kernel");
}

}  // namespace mpb::cuda
