// Optimizer updates on the GPU over the scalar cores in ops/optimizer.h.
// Fused AdamW: one kernel, one pass over (param, grad, m, v). Unfused: one
// kernel per update equation (m, v, param), as a framework without a fused
// optimizer runs it; each kernel evaluates the same scalar expressions, so
// both give bit-identical results.
//
// Dtypes (the Device contract in core/device.h, checked by Device::adamw_step
// and Device::sgd_step; backends/cpu/kernels/optimizer.cpp implements the same): the
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
//
// A decided GradScale (Device::decide_step): every kernel of the update
// reads the decision from device memory at its start and returns at once on a
// skip, or takes its grad_scale; a host value arrives as decision == null.
// So the host never waits for the gradients' statistics inside a step.
//
// no_decay (optimizer.decay_exclude): the elements in those ranges take the
// step constants made with weight_decay 0, chosen per element by
// scalar::in_sorted_ranges, so the fused kernel stays one pass over every
// element. The ranges travel by value in the kernel's parameters (no device
// buffer, no copy, no sync), at most kRangesPerLaunch per launch: more ranges
// split [0, n) into pieces of consecutive elements, one launch each, every
// element still updated exactly once.
#include <algorithm>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/kernel_util.cuh"
#include "ops/dtype_io.h"
#include "ops/optimizer.h"

namespace mpb::cuda {

namespace {

using scalar::Elem;

// The no-decay ranges travel in pieces (scalar::decay_pieces, ops/optimizer.h)
// of at most 32: 16 + 16 * 32 + 4 bytes, far below the 4 KiB of kernel
// parameters every supported architecture takes. BERT-base has about 100
// ranges (4 pieces), BERT-large about 200 (7). Kernels take a piece as a
// __grid_constant__ parameter, so the binary search reads the constant bank
// (threads of a warp mostly read the same entry: a broadcast) instead of a
// per-thread local copy of the array.
using scalar::DecayPiece;
using scalar::decay_pieces;

__device__ inline bool excluded(int64_t i, const DecayPiece& piece) {
  return scalar::in_sorted_ranges(i, piece.begin, piece.end, piece.count);
}

// The decision, if any: false when it skips the update (every thread reads
// the same slot, so a block returns as a whole); otherwise grad_scale is its factor.
__device__ inline bool take_decision(const StepDecisionSlot* decision, float& grad_scale) {
  if (decision == nullptr) return true;
  if (decision->skip != 0) return false;
  grad_scale = decision->grad_scale;
  return true;
}
__device__ inline bool skipped(const StepDecisionSlot* decision) {
  return decision != nullptr && decision->skip != 0;
}

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

// copy == nullptr: no param_copy. `decayed` outside the piece's ranges, `plain` inside.
template <DType P, DType G>
__global__ void adamw_fused_kernel(void* p, const void* g, float* m, float* v, const __grid_constant__ DecayPiece piece,
                                   scalar::AdamWStep decayed, scalar::AdamWStep plain, float grad_scale,
                                   const StepDecisionSlot* decision, void* copy, DType copy_t) {
  if (!take_decision(decision, grad_scale)) return;
  for (int64_t i = piece.lo + global_thread(); i < piece.hi; i += grid_threads()) {
    const scalar::AdamWStep s = excluded(i, piece) ? plain : decayed;
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
// it reads and writes only its own state. Weight decay plays no part in them.
template <DType G>
__global__ void adamw_m_kernel(const void* g, float* m, int64_t n, scalar::AdamWStep s, float grad_scale,
                               const StepDecisionSlot* decision) {
  if (!take_decision(decision, grad_scale)) return;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    float mi = m[i], unused = 0.0f;
    scalar::adamw_moments(Elem<G>::load(g, i) * grad_scale, mi, unused, s);
    m[i] = mi;
  }
}

template <DType G>
__global__ void adamw_v_kernel(const void* g, float* v, int64_t n, scalar::AdamWStep s, float grad_scale,
                               const StepDecisionSlot* decision) {
  if (!take_decision(decision, grad_scale)) return;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    float unused = 0.0f, vi = v[i];
    scalar::adamw_moments(Elem<G>::load(g, i) * grad_scale, unused, vi, s);
    v[i] = vi;
  }
}

template <DType P>
__global__ void adamw_param_kernel(void* p, const float* m, const float* v, const __grid_constant__ DecayPiece piece,
                                   scalar::AdamWStep decayed, scalar::AdamWStep plain,
                                   const StepDecisionSlot* decision) {
  if (skipped(decision)) return;
  for (int64_t i = piece.lo + global_thread(); i < piece.hi; i += grid_threads()) {
    float pi = Elem<P>::load(p, i);
    scalar::adamw_param(pi, m[i], v[i], excluded(i, piece) ? plain : decayed);
    Elem<P>::store(p, i, pi);
  }
}

template <DType P, DType G>
__global__ void sgd_kernel(void* p, const void* g, float* buf, const __grid_constant__ DecayPiece piece, scalar::SgdStep decayed,
                           scalar::SgdStep plain, float grad_scale, const StepDecisionSlot* decision) {
  if (!take_decision(decision, grad_scale)) return;
  for (int64_t i = piece.lo + global_thread(); i < piece.hi; i += grid_threads()) {
    float pi = Elem<P>::load(p, i), bi = buf[i];
    scalar::sgd_update(pi, Elem<G>::load(g, i) * grad_scale, bi, excluded(i, piece) ? plain : decayed);
    Elem<P>::store(p, i, pi);
    buf[i] = bi;
  }
}

// LAMB (ops/optimizer.h), two kernels per piece of at most kLambPerLaunch
// tensors, passed by value like the no-decay pieces (8 + 8 * 2 * 64 + 8 + 8
// bytes). Grid (kLambPartials, tensors): block b of tensor k covers the
// elements begin + b * kThreads + j * kLambPartials * kThreads. Pass 1 updates
// the moments and writes each block's sums of w^2 and u^2 (double in the
// block, a fixed reduction tree) to the caller's scratch; pass 2 sums a
// tensor's kLambPartials partials in index order (every block the same sum:
// the same trust ratio) and moves the weights. Nothing goes through the host:
// no sync, no allocation, and the result is deterministic.
constexpr int kLambPerLaunch = 64;
struct LambPiece {
  int64_t begin[kLambPerLaunch], end[kLambPerLaunch];
  unsigned long long decayed;  // bit k: tensor k takes weight decay
  int first;                   // the index of tensor 0 of the piece in the call's list (its scratch slot)
  int count;
};
static_assert(sizeof(unsigned long long) * 8 >= kLambPerLaunch, "one decay bit per tensor of a piece");

__device__ inline float* lamb_partial(float* scratch, const LambPiece& piece, int k, int b) {
  return scratch + 2 * ((static_cast<int64_t>(piece.first) + k) * kLambPartials + b);
}

template <DType P, DType G>
__global__ void lamb_norms_kernel(const void* p, const void* g, float* m, float* v,
                                  const __grid_constant__ LambPiece piece, scalar::LambStep s, float grad_scale,
                                  const StepDecisionSlot* decision, float* scratch) {
  if (!take_decision(decision, grad_scale)) return;
  __shared__ double smem[kWarps];
  const int k = static_cast<int>(blockIdx.y);
  const bool decayed = (piece.decayed >> k) & 1ull;
  double w_sq = 0.0, u_sq = 0.0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = piece.begin[k] + global_thread(); i < piece.end[k]; i += stride) {
    float mi = m[i], vi = v[i];
    scalar::lamb_moments(Elem<G>::load(g, i) * grad_scale, mi, vi, s);
    m[i] = mi;
    v[i] = vi;
    const float w = Elem<P>::load(p, i);
    const float u = scalar::lamb_direction(w, mi, vi, s, decayed);
    w_sq += static_cast<double>(w) * static_cast<double>(w);
    u_sq += static_cast<double>(u) * static_cast<double>(u);
  }
  w_sq = block_reduce(w_sq, 0.0, SumOp{}, smem);
  u_sq = block_reduce(u_sq, 0.0, SumOp{}, smem);
  if (threadIdx.x == 0) {
    // fp32 partials: each rounding is a relative 2^-24 of a sum of squares,
    // far below any effect on the trust ratio (tests/opcheck/test_lamb.cpp).
    float* out = lamb_partial(scratch, piece, k, static_cast<int>(blockIdx.x));
    out[0] = static_cast<float>(w_sq);
    out[1] = static_cast<float>(u_sq);
  }
}

template <DType P>
__global__ void lamb_apply_kernel(void* p, const float* m, const float* v, const __grid_constant__ LambPiece piece,
                                  scalar::LambStep s, float lr, const StepDecisionSlot* decision, float* scratch,
                                  void* copy, DType copy_t) {
  if (skipped(decision)) return;
  const int k = static_cast<int>(blockIdx.y);
  const bool decayed = (piece.decayed >> k) & 1ull;
  double w_sq = 0.0, u_sq = 0.0;
  for (int b = 0; b < kLambPartials; ++b) {  // in order: every block of the tensor gets the same sums
    const float* part = lamb_partial(scratch, piece, k, b);
    w_sq += static_cast<double>(part[0]);
    u_sq += static_cast<double>(part[1]);
  }
  const float scaled_lr = scalar::lamb_scaled_lr(lr, w_sq, u_sq);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = piece.begin[k] + global_thread(); i < piece.end[k]; i += stride) {
    float w = Elem<P>::load(p, i);
    scalar::lamb_param(w, scalar::lamb_direction(w, m[i], v[i], s, decayed), scaled_lr);
    Elem<P>::store(p, i, w);
    if (copy != nullptr) scalar::store_f32(copy, copy_t, i, stored_value<P>(w));
  }
}

}  // namespace

void CudaDevice::adamw_step_impl(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                                 const AdamWHyper& h, GradScale grad_scale, bool fused, const Tensor& param_copy,
                                 const std::vector<ElementRange>& no_decay) {
  const int64_t n = param.numel();
  const float gs = grad_scale.value();
  const StepDecisionSlot* decision = decision_for(grad_scale);
  const bool has_copy = !param_copy.empty();
  if (n == 0) return;
  // Per-step constants on the host in double, rounded to fp32: the same
  // numbers the CPU backend feeds its element update, for both groups.
  const scalar::AdamWStep decayed = scalar::make_adamw_step(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.step);
  const scalar::AdamWStep plain = scalar::make_adamw_step(h.lr, h.beta1, h.beta2, h.eps, 0.0f, h.step);
  void* p = param.data;
  const void* g = grad.data;
  auto* mm = static_cast<float*>(m.data);
  auto* vv = static_cast<float*>(v.data);
  const std::vector<DecayPiece> pieces = decay_pieces(n, no_decay);
  dispatch_float2(param.dtype, grad.dtype, "adamw_step", [&](auto P, auto G) {
    constexpr DType kP = decltype(P)::value, kG = decltype(G)::value;
    if (fused) {
      for (const DecayPiece& piece : pieces) {
        if (piece.hi == piece.lo) continue;  // not made by decay_pieces; a zero grid would be a launch error
        adamw_fused_kernel<kP, kG><<<elementwise_grid(piece.hi - piece.lo), kThreads, 0, stream()>>>(
            p, g, mm, vv, piece, decayed, plain, gs, decision, has_copy ? param_copy.data : nullptr,
            param_copy.dtype);
        MPB_CHECK_LAUNCH("adamw_fused_kernel");
      }
      return;
    }
    const unsigned grid = elementwise_grid(n);
    adamw_m_kernel<kG><<<grid, kThreads, 0, stream()>>>(g, mm, n, decayed, gs, decision);
    MPB_CHECK_LAUNCH("adamw_m_kernel");
    adamw_v_kernel<kG><<<grid, kThreads, 0, stream()>>>(g, vv, n, decayed, gs, decision);
    MPB_CHECK_LAUNCH("adamw_v_kernel");
    for (const DecayPiece& piece : pieces) {
      if (piece.hi == piece.lo) continue;
      adamw_param_kernel<kP><<<elementwise_grid(piece.hi - piece.lo), kThreads, 0, stream()>>>(
          p, mm, vv, piece, decayed, plain, decision);
      MPB_CHECK_LAUNCH("adamw_param_kernel");
    }
  });
  // Unfused: the copy in a separate sweep after the update (the fused kernel
  // wrote it already). After a skipped update it rewrites the same values.
  if (!fused && has_copy) cast(param_copy, param);
}

void CudaDevice::sgd_step_impl(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf,
                               const SgdHyper& h, GradScale grad_scale, const std::vector<ElementRange>& no_decay) {
  const int64_t n = param.numel();
  const StepDecisionSlot* decision = decision_for(grad_scale);
  if (n == 0) return;
  const scalar::SgdStep decayed{h.lr, h.momentum, h.weight_decay};
  const scalar::SgdStep plain{h.lr, h.momentum, 0.0f};
  auto* buf = static_cast<float*>(momentum_buf.data);
  const std::vector<DecayPiece> pieces = decay_pieces(n, no_decay);
  dispatch_float2(param.dtype, grad.dtype, "sgd_step", [&](auto P, auto G) {
    for (const DecayPiece& piece : pieces) {
      if (piece.hi == piece.lo) continue;
      sgd_kernel<decltype(P)::value, decltype(G)::value><<<elementwise_grid(piece.hi - piece.lo), kThreads, 0,
                                                           stream()>>>(param.data, grad.data, buf, piece, decayed,
                                                                       plain, grad_scale.value(), decision);
      MPB_CHECK_LAUNCH("sgd_kernel");
    }
  });
}

void CudaDevice::lamb_step_impl(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                                const LambHyper& h, GradScale grad_scale, const Tensor& param_copy,
                                const std::vector<LambTensor>& tensors, const Tensor& scratch) {
  const StepDecisionSlot* decision = decision_for(grad_scale);
  const scalar::LambStep s = scalar::make_lamb_step(h.beta1, h.beta2, h.eps, h.weight_decay, h.bias_correction, h.step);
  std::vector<LambPiece> pieces;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (i % kLambPerLaunch == 0) {
      pieces.push_back(LambPiece{});
      pieces.back().first = static_cast<int>(i);
    }
    LambPiece& piece = pieces.back();
    piece.begin[piece.count] = tensors[i].begin;
    piece.end[piece.count] = tensors[i].end;
    if (tensors[i].decayed) piece.decayed |= 1ull << piece.count;
    ++piece.count;
  }
  auto* mm = static_cast<float*>(m.data);
  auto* vv = static_cast<float*>(v.data);
  auto* sc = static_cast<float*>(scratch.data);
  void* copy = param_copy.empty() ? nullptr : param_copy.data;
  dispatch_float2(param.dtype, grad.dtype, "lamb_step", [&](auto P, auto G) {
    constexpr DType kP = decltype(P)::value, kG = decltype(G)::value;
    for (const LambPiece& piece : pieces) {  // Device::lamb_step checked: every tensor non-empty, count >= 1
      const dim3 grid(kLambPartials, static_cast<unsigned>(piece.count));
      lamb_norms_kernel<kP, kG><<<grid, kThreads, 0, stream()>>>(param.data, grad.data, mm, vv, piece, s,
                                                                 grad_scale.value(), decision, sc);
      MPB_CHECK_LAUNCH("lamb_norms_kernel");
      lamb_apply_kernel<kP><<<grid, kThreads, 0, stream()>>>(param.data, mm, vv, piece, s, h.lr, decision, sc, copy,
                                                             param_copy.dtype);
      MPB_CHECK_LAUNCH("lamb_apply_kernel");
    }
  });
}

}  // namespace mpb::cuda
