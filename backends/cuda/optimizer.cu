// Optimizer updates on the GPU over the scalar cores in ops/optimizer.h.
// Fused AdamW: one kernel, one pass over (param, grad, m, v). Unfused: one
// kernel per update equation (m, v, param), as a framework without a fused
// optimizer runs it; each kernel evaluates the same scalar expressions, so
// both give bit-identical results.
//
// Dtypes (the Device contract in core/device.h, checked by Device::adamw_step
// and Device::sgd_step; backends/cpu/optimizer.cpp implements the same): the
// parameter is fp32 (master weights) or fp16/bf16 (no master copy, apex O3:
// loaded to fp32, updated, stored rounded to nearest even through
// scalar::Elem); the gradient is any float dtype, loaded to fp32 and then
// multiplied by grad_scale; the state (m, v, momentum) is always fp32. The
// kernels are instantiated per (param, grad) dtype pair.
//
// param_copy (AdamW): the fused kernel also writes the copy of each updated
// (stored, rounded) parameter in the same pass, as the CPU does; its dtype is a
// runtime switch (scalar::store_f32) so the instantiations stay per (param,
// grad). The unfused path casts after its three kernels (a separate sweep, as
// unfused code runs). Either way param_copy == cast(param) bit for bit.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/kernel_util.cuh"
#include "ops/dtype_io.h"
#include "ops/optimizer.h"

namespace mpb::cuda {

namespace {

using scalar::Elem;

// x as stored in dtype T and loaded back (the identity for fp32).
template <DType T>
__device__ inline float stored_value(float x) {
  if constexpr (T == DType::F32) {
    return x;
  } else {
    uint16_t bits = 0;  // the 16-bit formats' storage type
    Elem<T>::store(&bits, 0, x);
    return Elem<T>::load(&bits, 0);
  }
}

// copy == nullptr: no param_copy.
template <DType P, DType G>
__global__ void adamw_fused_kernel(void* p, const void* g, float* m, float* v, int64_t n, scalar::AdamWStep s,
                                   float grad_scale, void* copy, DType copy_t) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    float mi = m[i], vi = v[i], pi = Elem<P>::load(p, i);
    scalar::adamw_moments(Elem<G>::load(g, i) * grad_scale, mi, vi, s);
    scalar::adamw_param(pi, mi, vi, s);
    m[i] = mi;
    v[i] = vi;
    Elem<P>::store(p, i, pi);
    // The copy of the stored (rounded) weight: what cast(param_copy, param) writes.
    if (copy != nullptr) scalar::store_f32(copy, copy_t, i, stored_value<P>(pi));
  }
}

// adamw_moments updates m and v independently of each other; each of these
// kernels keeps one and feeds a dummy for the other (which it discards), so
// it reads and writes only its own state.
template <DType G>
__global__ void adamw_m_kernel(const void* g, float* m, int64_t n, scalar::AdamWStep s, float grad_scale) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    float mi = m[i], unused = 0.0f;
    scalar::adamw_moments(Elem<G>::load(g, i) * grad_scale, mi, unused, s);
    m[i] = mi;
  }
}

template <DType G>
__global__ void adamw_v_kernel(const void* g, float* v, int64_t n, scalar::AdamWStep s, float grad_scale) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    float unused = 0.0f, vi = v[i];
    scalar::adamw_moments(Elem<G>::load(g, i) * grad_scale, unused, vi, s);
    v[i] = vi;
  }
}

template <DType P>
__global__ void adamw_param_kernel(void* p, const float* m, const float* v, int64_t n, scalar::AdamWStep s) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    float pi = Elem<P>::load(p, i);
    scalar::adamw_param(pi, m[i], v[i], s);
    Elem<P>::store(p, i, pi);
  }
}

template <DType P, DType G>
__global__ void sgd_kernel(void* p, const void* g, float* buf, int64_t n, scalar::SgdStep s, float grad_scale) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    float pi = Elem<P>::load(p, i), bi = buf[i];
    scalar::sgd_update(pi, Elem<G>::load(g, i) * grad_scale, bi, s);
    Elem<P>::store(p, i, pi);
    buf[i] = bi;
  }
}

}  // namespace

void CudaDevice::adamw_step_impl(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                                 const AdamWHyper& h, float grad_scale, bool fused, const Tensor& param_copy) {
  const int64_t n = param.numel();
  const bool has_copy = !param_copy.empty();
  if (n == 0) return;
  // Per-step constants on the host in double, rounded to fp32: the same
  // numbers the CPU backend feeds its element update.
  const scalar::AdamWStep s = scalar::make_adamw_step(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.step);
  void* p = param.data;
  const void* g = grad.data;
  auto* mm = static_cast<float*>(m.data);
  auto* vv = static_cast<float*>(v.data);
  const unsigned grid = elementwise_grid(n);
  dispatch_float2(param.dtype, grad.dtype, "adamw_step", [&](auto P, auto G) {
    constexpr DType kP = decltype(P)::value, kG = decltype(G)::value;
    if (fused) {
      adamw_fused_kernel<kP, kG><<<grid, kThreads, 0, stream()>>>(
          p, g, mm, vv, n, s, grad_scale, has_copy ? param_copy.data : nullptr, param_copy.dtype);
      MPB_CHECK_LAUNCH("adamw_fused_kernel");
      return;
    }
    adamw_m_kernel<kG><<<grid, kThreads, 0, stream()>>>(g, mm, n, s, grad_scale);
    MPB_CHECK_LAUNCH("adamw_m_kernel");
    adamw_v_kernel<kG><<<grid, kThreads, 0, stream()>>>(g, vv, n, s, grad_scale);
    MPB_CHECK_LAUNCH("adamw_v_kernel");
    adamw_param_kernel<kP><<<grid, kThreads, 0, stream()>>>(p, mm, vv, n, s);
    MPB_CHECK_LAUNCH("adamw_param_kernel");
  });
  // Unfused: the copy in a separate sweep after the update (the fused kernel wrote it already).
  if (!fused && has_copy) cast(param_copy, param);
}

void CudaDevice::sgd_step_impl(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf,
                               const SgdHyper& h, float grad_scale) {
  const int64_t n = param.numel();
  if (n == 0) return;
  const scalar::SgdStep s{h.lr, h.momentum, h.weight_decay};
  const unsigned grid = elementwise_grid(n);
  auto* buf = static_cast<float*>(momentum_buf.data);
  dispatch_float2(param.dtype, grad.dtype, "sgd_step", [&](auto P, auto G) {
    sgd_kernel<decltype(P)::value, decltype(G)::value><<<grid, kThreads, 0, stream()>>>(param.data, grad.data, buf,
                                                                                       n, s, grad_scale);
  });
  MPB_CHECK_LAUNCH("sgd_kernel");
}

}  // namespace mpb::cuda
