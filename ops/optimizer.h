// Optimizer update rules for one element: the scalar core shared by the CPU
// and CUDA optimizers. fp32 master weights and state throughout.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "core/device.h"  // ElementRange
#include "ops/scalar.h"

namespace mpb::scalar {
MPB_ISA_NAMESPACE_BEGIN

// Per-step constants of AdamW (Loshchilov & Hutter; PyTorch torch.optim.AdamW):
// decoupled weight decay p *= 1 - lr*wd, then the bias-corrected Adam step.
struct AdamWStep {
  float lr, beta1, beta2, eps, decay;  // decay = 1 - lr * weight_decay
  float one_minus_beta1, one_minus_beta2;  // formed in double from the configured betas, rounded once
  float bias1, bias2_sqrt;             // 1 - beta1^t, sqrt(1 - beta2^t)
};

MPB_HD inline void adamw_moments(float g, float& m, float& v, const AdamWStep& s) {
  m = s.beta1 * m + s.one_minus_beta1 * g;
  v = s.beta2 * v + s.one_minus_beta2 * g * g;
}

MPB_HD inline void adamw_param(float& p, float m, float v, const AdamWStep& s) {
  // PyTorch: denom = sqrt(v)/sqrt(1-beta2^t) + eps; p -= lr/(1-beta1^t) * m/denom
  float denom = sqrtf(v) / s.bias2_sqrt + s.eps;
  p = p * s.decay - (s.lr / s.bias1) * (m / denom);
}

// The per-step constants, computed once on the host in double and rounded to
// fp32, so both backends feed the element update identical numbers. The
// betas come in double, as configured: 1 - beta and the bias corrections
// 1 - beta^t are formed from them in double and rounded once, as PyTorch
// forms them from its Python-float betas. From an fp32-rounded beta they
// would carry beta's rounding error, magnified by 1 / (1 - beta): 1 - 0.999f
// is 1.3e-5 (relative) away from 0.001 and rounds to a different float.
inline AdamWStep make_adamw_step(float lr, double beta1, double beta2, float eps, float weight_decay,
                                 long long step) {
  double t = static_cast<double>(step);
  AdamWStep s{};
  s.lr = lr;
  s.beta1 = static_cast<float>(beta1);
  s.beta2 = static_cast<float>(beta2);
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.eps = eps;
  s.decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  s.bias1 = static_cast<float>(1.0 - std::pow(beta1, t));
  s.bias2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t)));
  return s;
}

// optimizer.decay_exclude (PyTorch: a parameter group with weight_decay 0):
// whether element i lies in one of `count` sorted, disjoint ranges
// [begin[k], end[k]). Those elements take the step constants made with
// weight_decay 0 (AdamW: decay == 1 exactly; SGD: weight_decay == 0), so they
// compute what a separate call with weight_decay 0 computes, bit for bit.
// Binary search: the CUDA kernels' per-element test.
MPB_HD inline bool in_sorted_ranges(long long i, const long long* begin, const long long* end, int count) {
  int lo = 0, hi = count;  // the first range that ends after i
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (end[mid] <= i) lo = mid + 1;
    else hi = mid;
  }
  return lo < count && begin[lo] <= i;
}

// A piece of [0, n) for a backend that passes the no-decay ranges with each
// launch (the CUDA kernels, by value): elements [lo, hi) and the ranges inside
// it, at most kRangesPerPiece.
constexpr int kRangesPerPiece = 32;
struct DecayPiece {
  long long lo, hi;
  long long begin[kRangesPerPiece], end[kRangesPerPiece];
  int count;
};

// [0, n) cut so that each piece holds at most kRangesPerPiece of the sorted,
// disjoint ranges; a piece ends where the next piece's first range begins, so
// every element is in exactly one piece and every range inside one. No
// ranges: one piece [0, n). Host code.
inline std::vector<DecayPiece> decay_pieces(long long n, const std::vector<ElementRange>& no_decay) {
  std::vector<DecayPiece> pieces;
  size_t next = 0;
  long long lo = 0;
  do {
    DecayPiece piece{};
    piece.lo = lo;
    const size_t stop = std::min(no_decay.size(), next + kRangesPerPiece);
    for (size_t k = next; k < stop; ++k) {
      piece.begin[piece.count] = no_decay[k].begin;
      piece.end[piece.count] = no_decay[k].end;
      ++piece.count;
    }
    next = stop;
    piece.hi = next < no_decay.size() ? no_decay[next].begin : n;
    lo = piece.hi;
    pieces.push_back(piece);
  } while (next < no_decay.size());
  return pieces;
}

// LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning",
// Algorithm 2; NVIDIA apex FusedLAMB, adam_w_mode): Adam moments, the
// direction u = m_hat / (sqrt(v_hat) + eps) + wd * w, then per parameter
// tensor w -= lr * (||w|| / ||u||) * u. The trust ratio needs the whole
// tensor's norms before any element moves, so a step is two passes: pass 1
// updates the moments and sums w^2 and u^2; pass 2 recomputes u from the
// stored moments (the same float expression on the same inputs: the same
// bits, so no per-element buffer for u) and moves the weights.
struct LambStep {
  float beta1, beta2, eps, weight_decay;
  float one_minus_beta1, one_minus_beta2;  // formed in double, as make_adamw_step does
  float bias1, bias2;  // 1 - beta^t with bias correction, 1 without (apex's bias_correction)
};

// The per-step constants, computed once on the host in double and rounded to
// fp32, from the betas in double, as make_adamw_step does.
inline LambStep make_lamb_step(double beta1, double beta2, float eps, float weight_decay, bool bias_correction,
                               long long step) {
  const double t = static_cast<double>(step);
  LambStep s{};
  s.beta1 = static_cast<float>(beta1);
  s.beta2 = static_cast<float>(beta2);
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.eps = eps;
  s.weight_decay = weight_decay;
  s.bias1 = bias_correction ? static_cast<float>(1.0 - std::pow(beta1, t)) : 1.0f;
  s.bias2 = bias_correction ? static_cast<float>(1.0 - std::pow(beta2, t)) : 1.0f;
  return s;
}

MPB_HD inline void lamb_moments(float g, float& m, float& v, const LambStep& s) {
  m = s.beta1 * m + s.one_minus_beta1 * g;
  v = s.beta2 * v + s.one_minus_beta2 * g * g;
}

// The update direction of one element (apex multi_tensor_lamb stage 1:
// (m/bc1) / (sqrt(v/bc2) + eps) + decay * p); decayed == false: a tensor
// excluded from weight decay (optimizer.decay_exclude).
MPB_HD inline float lamb_direction(float w, float m, float v, const LambStep& s, bool decayed) {
  const float u = (m / s.bias1) / (sqrtf(v / s.bias2) + s.eps);
  return decayed ? u + s.weight_decay * w : u;
}

// lr times the trust ratio ||w|| / ||u|| of a tensor from its sums of squares
// (in double), rounded to fp32 once: ratio 1 when either norm is 0 (a
// zero-initialised tensor, or one whose update is 0), as apex and the paper's
// reference implementations do, so such a tensor takes a plain Adam step.
MPB_HD inline float lamb_scaled_lr(float lr, double w_sq, double u_sq) {
  const double wn = sqrt(w_sq), un = sqrt(u_sq);
  const double ratio = (wn > 0.0 && un > 0.0) ? wn / un : 1.0;
  return static_cast<float>(static_cast<double>(lr) * ratio);
}

MPB_HD inline void lamb_param(float& w, float u, float scaled_lr) { w = w - scaled_lr * u; }

// One optimizer step's decision from its gradients' statistics (the loss
// scaler's finite check and gradient clipping; Device::decide_step): skip when
// a gradient is non-finite; otherwise the norm of the unscaled gradient, and
// the factor the update multiplies the gradients by (unscale x clip), rounded
// to fp32 once. Double throughout: sqrt and division are correctly rounded on
// the host and on a GPU (no fast-math; the CUDA build has --fmad=false), so a
// decision made on either from the same statistics has the same bits. On a
// skip, norm and grad_scale are 0 (the caller records the norm as NaN).
struct StepDecision {
  bool skip;
  double norm;
  float grad_scale;
};

MPB_HD inline StepDecision decide_step(double sum_squares, long long nonfinite, double loss_scale,
                                       double grad_clip) {
  StepDecision d{};
  // sum_squares >= 0 by construction: "not <= DBL_MAX" is inf or NaN.
  d.skip = nonfinite != 0 || !(sum_squares <= DBL_MAX);
  if (d.skip) return d;
  d.norm = sqrt(sum_squares) / loss_scale;
  const double clip = (grad_clip > 0.0 && d.norm > grad_clip) ? grad_clip / d.norm : 1.0;
  d.grad_scale = static_cast<float>(clip / loss_scale);
  return d;
}

// SGD with momentum and coupled weight decay (torch.optim.SGD, dampening 0).
struct SgdStep {
  float lr, momentum, weight_decay;
};

MPB_HD inline void sgd_update(float& p, float g, float& buf, const SgdStep& s) {
  g = g + s.weight_decay * p;
  buf = s.momentum * buf + g;
  p = p - s.lr * buf;
}

MPB_ISA_NAMESPACE_END
}  // namespace mpb::scalar
