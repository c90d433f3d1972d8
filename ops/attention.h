// Attention pieces shared by the CPU ops (backends/cpu/kernels/attention.cpp) and the
// CUDA kernels: the mask rule, the softmax element math, the online
// (flash-style) softmax recurrences and their backward.
//
// The mask rule (masked_softmax_forward and attention_forward/backward)
// ---------------------------------------------------------------------------
// Frameworks build the additive padding mask as a tensor in the compute dtype:
// bert4keras/Keras `x + (1 - mask) * value` with `value` a constant of floatx,
// TF BERT's `(1.0 - mask) * -10000.0` cast to the activations' dtype. We
// reproduce that faithfully:
//   1. m = mask_value rounded to the dtype of the scores (masked softmax) or of
//      q (fused attention): attention_mask_rounded(). -1e9 becomes -inf in
//      fp16 (|x| >= 65520 overflows), stays finite in bf16 and fp32.
//   2. logit[i,j] = scale * s[i,j] + (1 - key_valid[b,j]) * m, in fp32
//      (masked_logit), with key_valid 1 (real key) or 0 (padding).
// With a finite m a real key adds exactly 0 (0 * m = 0) and a padded key a
// large negative number whose exp is exactly 0 next to the real keys. With
// m = -inf a real key adds 0 * (-inf) = NaN: every logit of every row of that
// batch element is NaN (or -inf), and so are the probabilities and outputs.
// That is the fp16 hazard tests/core/test_half_safe_constants.cpp shows and
// core/precision.h's attention_mask_value() avoids. A row whose keys are all
// padded gets uniform-ish weights over scale*s + m (finite m), as in every
// framework with an additive mask; it is not special-cased.
//
// Softmax: p_j = exp(l_j - max_j l) / sum_j exp(l_j - max_j l) in fp32 with
// exp_approx (ops/approx_math.h), so the CPU and GPU exponentials agree.
// Backward (w.r.t. the raw scores): ds_j = scale * p_j * (dp_j - sum_k p_k dp_k).
//
// Fused attention (flash-style, FlashAttention-2)
// ---------------------------------------------------------------------------
// Forward, per query row i, keys visited in tiles of kAttnTileK (queries are
// processed in tiles of kAttnTileQ; neither changes the math of a row):
//   running max m (init -inf), running sum l (init 0), accumulator acc[D] (0);
//   per key tile: m' = max(m, max_j l_ij); c = online_rescale(m, m');
//     p_ij = exp(l_ij - m'); l = l * c + sum_j p_ij; acc = acc * c + sum_j p_ij v_j; m = m'
//   out_i = acc / l;  lse_i = m + log(l)   (the log-sum-exp of the logits,
//   scale and mask included; fp32 [B,H,Tq]).
// Backward: p_ij = exp(l_ij - lse_i) recomputed, D_i = sum_d dO_id * O_id
// (from the stored O and dO), dV_j = sum_i p_ij dO_i, dP_ij = dO_i . v_j,
// dS_ij = p_ij * (dP_ij - D_i), dQ_i = scale * sum_j dS_ij k_j,
// dK_j = scale * sum_i dS_ij q_i. All sums fp32; outputs rounded once to the
// tensors' dtypes.
// Dropout (core/attention_layout.h AttnDropout): O = drop(P) V with P's row
// sum undropped (acc / l), drop() the dropout op's rule (ops/dropout.h) on
// element ((b*H + h)*Tq + i)*Tk + j; backward: dV from drop(P), dP through
// the mask, dS = P (drop(dP) - D_i) with D_i = rowsum(dO * O) as before. The tiles and the sum order differ between backends, so the
// results agree to fp32 tolerance, not bit for bit.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "core/numerics.h"
#include "ops/approx_math.h"
#include "ops/scalar.h"

namespace mpb::scalar {
MPB_ISA_NAMESPACE_BEGIN

// CPU tile sizes (queries x keys). Any value gives the same math up to the
// order of fp32 sums; T need not be a multiple of them.
constexpr int kAttnTileQ = 64;
constexpr int kAttnTileK = 64;

// Step 1 of the mask rule: the mask constant as the compute dtype holds it.
MPB_HD inline float attention_mask_rounded(DType dtype, float mask_value) {
  switch (dtype) {
    case DType::F16: return round_to_half(mask_value);
    case DType::BF16: return round_to_bf16(mask_value);
    default: return mask_value;
  }
}

// Step 2's additive mask term (1 - key_valid) * m: 0 for a real key, m for
// padding, NaN for a real key when m is -inf. The product is evaluated even
// for real keys (0 * m), exactly as the framework's mask tensor does, which is
// what makes m = -inf produce NaN. Its value is 0, m or NaN, so it is exact in
// m's dtype: the CUDA backend stores it as cuDNN SDPA's [B,1,1,Tk] bias tensor
// in q's dtype (backends/cuda/attention.cu), and cuDNN's logit
// scale * s + bias is then this rule's.
MPB_HD inline float attention_bias(int32_t key_valid, float mask_rounded) {
  return static_cast<float>(1 - key_valid) * mask_rounded;
}

// Step 2: the masked, scaled logit in fp32. key_valid is 0 or 1.
MPB_HD inline float masked_logit(float score, float scale, int32_t key_valid, float mask_rounded) {
  return scale * score + attention_bias(key_valid, mask_rounded);
}

// Unnormalised probability of a logit given the row's max (or lse).
MPB_HD inline float softmax_exp(float logit, float row_max) { return exp_approx(logit - row_max); }

// d loss / d score for one element; dot = sum_k p_k * dp_k over the row.
MPB_HD inline float softmax_grad(float p, float dp, float dot, float scale) { return scale * (p * (dp - dot)); }

// Rescale factor of the running sum/accumulator when the running max moves
// from m_old to m_new (>= m_old). Equal maxima (including -inf == -inf, a
// tile of only -inf logits seen first) give exactly 1, never exp(-inf + inf).
MPB_HD inline float online_rescale(float m_old, float m_new) {
  return m_old == m_new ? 1.0f : exp_approx(m_old - m_new);
}

MPB_HD inline float attention_lse(float row_max, float row_sum) { return row_max + logf(row_sum); }

// dS_ij before the scale: p * (dP - D_i).
MPB_HD inline float attention_ds(float p, float dp, float d_i) { return p * (dp - d_i); }

MPB_ISA_NAMESPACE_END
}  // namespace mpb::scalar
