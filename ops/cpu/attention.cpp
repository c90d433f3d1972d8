// Attention on the CPU: the unfused path's masked softmax (and its backward)
// over materialised scores, and fused flash-style attention that never
// materialises the [T,T] matrix. The mask rule, the online softmax and the
// backward formulas are in ops/attention.h (shared with the CUDA kernels).
//
// Fused layout of the work: one (batch, head) pair per task, parallelised
// over B*H; a task converts its Q/K/V (and dO/O) to fp32 once ([T,D] each,
// K and V also transposed so the inner loops run along contiguous memory),
// then walks query tiles x key tiles (kAttnTileQ x kAttnTileK) with fp32
// accumulators. A task is one thread's work in a fixed order, so the results
// are deterministic and independent of the thread count.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/attention.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"

namespace mpb::cpu {

using scalar::Elem;

namespace {

// dst[0..n) = t[offset .. offset + n) as fp32.
void load_f32_span(float* dst, const Tensor& t, int64_t offset, int64_t n) {
  dispatch_float(t.dtype, [&](auto T) {
    using E = Elem<decltype(T)::value>;
    const void* p = t.data;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dst[i] = E::load(p, offset + i);
  });
}

// t[offset + i] = factor * src[i] for i < n, rounded to t's dtype.
void store_f32_span(const Tensor& t, int64_t offset, const float* src, int64_t n, float factor) {
  dispatch_float(t.dtype, [&](auto T) {
    using E = Elem<decltype(T)::value>;
    void* p = t.data;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) E::store(p, offset + i, factor * src[i]);
  });
}

// [rows, D] row-major -> [D, rows].
void transpose(float* dst, const float* src, int64_t rows, int64_t D) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < D; ++d) dst[d * rows + r] = src[r * D + d];
}

const int32_t* check_key_valid(const char* op, const Tensor& key_valid, int64_t B, int64_t Tk) {
  require(key_valid.dtype == DType::I32 && key_valid.numel() == B * Tk, op, "key_valid must be int32 [B, Tk]");
  return static_cast<const int32_t*>(key_valid.data);
}

struct AttnDims {
  int64_t B, H, Tq, Tk, D;
};

AttnDims check_attention(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                         const Tensor& lse) {
  require(q.shape.ndim == 4 && k.shape.ndim == 4, op, "q, k, v must be 4-D [B,H,T,D]");
  AttnDims d{q.shape[0], q.shape[1], q.shape[2], k.shape[2], q.shape[3]};
  require(d.B > 0 && d.H > 0 && d.Tq > 0 && d.Tk > 0 && d.D > 0, op, "empty attention");
  require(k.shape == Shape{d.B, d.H, d.Tk, d.D} && v.shape == k.shape, op,
          "k and v must be [B,H,Tk,D] with q's B, H and D");
  require(k.dtype == q.dtype && v.dtype == q.dtype, op, "q, k and v must have the same dtype");
  require(out.shape == q.shape, op, "out (and dout) must have q's shape");
  require(lse.dtype == DType::F32 && lse.numel() == d.B * d.H * d.Tq, op, "lse must be fp32 [B,H,Tq]");
  return d;
}

// S[r, c] = a_r . b_(j0+c) for r < nr, c < nc (row stride ldS), with a
// [nr, D] row-major and bt the transposed [D, Tk] right operand; summed over
// D in order, vectorised along c.
void tile_dots(float* S, int64_t ldS, const float* a, const float* bt, int64_t Tk, int64_t D, int64_t nr,
               int64_t j0, int64_t nc) {
  for (int64_t r = 0; r < nr; ++r) {
    float* srow = S + r * ldS;
    std::fill(srow, srow + nc, 0.0f);
    const float* ar = a + r * D;
    for (int64_t e = 0; e < D; ++e) {
      const float ae = ar[e];
      const float* be = bt + e * Tk + j0;
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) srow[c] += ae * be[c];
    }
  }
}

// The masked, scaled logits of a tile: q_r . k_(j0+c) through the mask rule.
void tile_logits(float* S, int64_t ldS, const float* q, const float* kt, int64_t Tk, int64_t D, int64_t nr,
                 int64_t j0, int64_t nc, const int32_t* kv, float scale, float mask) {
  tile_dots(S, ldS, q, kt, Tk, D, nr, j0, nc);
  for (int64_t r = 0; r < nr; ++r) {
    float* srow = S + r * ldS;
#pragma omp simd
    for (int64_t c = 0; c < nc; ++c) srow[c] = scalar::masked_logit(srow[c], scale, kv[j0 + c], mask);
  }
}

}  // namespace

// ---- unfused softmax ------------------------------------------------------------------
void masked_softmax_forward(const Tensor& probs, const Tensor& scores, const Tensor& key_valid, float scale,
                            float mask_value) {
  const char* op = "masked_softmax_forward";
  require(scores.shape.ndim == 4, op, "scores must be 4-D [B,H,Tq,Tk]");
  require(probs.shape == scores.shape, op, "probs must have the scores' shape");
  const int64_t B = scores.shape[0], Tk = scores.shape[3];
  const int64_t rows_per_b = scores.shape[1] * scores.shape[2];
  const int32_t* kv = check_key_valid(op, key_valid, B, Tk);
  const float mask = scalar::attention_mask_rounded(scores.dtype, mask_value);
  dispatch_float2(scores.dtype, probs.dtype, [&](auto S, auto P) {
    using ES = Elem<decltype(S)::value>;
    using EP = Elem<decltype(P)::value>;
    const void* ps = scores.data;
    void* pp = probs.data;
    const int64_t rows = scores.rows();
#pragma omp parallel
    {
      std::vector<float> e(static_cast<size_t>(Tk));
      float* ev = e.data();
#pragma omp for
      for (int64_t r = 0; r < rows; ++r) {
        const int32_t* kvb = kv + (r / rows_per_b) * Tk;
        const int64_t base = r * Tk;
        float mx = -INFINITY;
        for (int64_t j = 0; j < Tk; ++j) {
          ev[j] = scalar::masked_logit(ES::load(ps, base + j), scale, kvb[j], mask);
          mx = ev[j] > mx ? ev[j] : mx;  // a NaN logit is skipped here but poisons the sum below
        }
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < Tk; ++j) {
          ev[j] = scalar::softmax_exp(ev[j], mx);
          sum += ev[j];
        }
#pragma omp simd
        for (int64_t j = 0; j < Tk; ++j) EP::store(pp, base + j, ev[j] / sum);
      }
    }
  });
}

void softmax_backward(const Tensor& dscores, const Tensor& probs, const Tensor& dprobs, float scale) {
  const char* op = "softmax_backward";
  require(probs.numel() > 0 && dprobs.shape == probs.shape && dscores.shape == probs.shape, op,
          "dscores, probs and dprobs must have the same shape");
  dispatch_float2(probs.dtype, dprobs.dtype, [&](auto P, auto DP) {
    dispatch_float(dscores.dtype, [&](auto DS) {
      using EP = Elem<decltype(P)::value>;
      using EDP = Elem<decltype(DP)::value>;
      using EDS = Elem<decltype(DS)::value>;
      const void* pp = probs.data;
      const void* pdp = dprobs.data;
      void* pds = dscores.data;
      const int64_t rows = probs.rows(), C = probs.cols();
#pragma omp parallel for
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t base = r * C;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < C; ++j) dot += EP::load(pp, base + j) * EDP::load(pdp, base + j);
#pragma omp simd
        for (int64_t j = 0; j < C; ++j)
          EDS::store(pds, base + j,
                     scalar::softmax_grad(EP::load(pp, base + j), EDP::load(pdp, base + j), dot, scale));
      }
    });
  });
}

// ---- fused attention --------------------------------------------------------------------
void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& key_valid, float scale, float mask_value) {
  const char* op = "attention_forward";
  const AttnDims d = check_attention(op, q, k, v, out, lse);
  const int32_t* kv = check_key_valid(op, key_valid, d.B, d.Tk);
  const float mask = scalar::attention_mask_rounded(q.dtype, mask_value);
  constexpr int64_t Br = scalar::kAttnTileQ, Bc = scalar::kAttnTileK;
  const int64_t D = d.D, Tq = d.Tq, Tk = d.Tk;
  float* lse_p = static_cast<float*>(lse.data);
#pragma omp parallel
  {
    std::vector<float> kf(static_cast<size_t>(Tk * D)), kt(kf.size()), vf(kf.size());
    std::vector<float> qf(static_cast<size_t>(Br * D)), acc(qf.size()), S(static_cast<size_t>(Br * Bc));
    float m[Br], l[Br];
#pragma omp for schedule(dynamic)
    for (int64_t bh = 0; bh < d.B * d.H; ++bh) {
      const int32_t* kvb = kv + (bh / d.H) * Tk;
      load_f32_span(kf.data(), k, bh * Tk * D, Tk * D);
      load_f32_span(vf.data(), v, bh * Tk * D, Tk * D);
      transpose(kt.data(), kf.data(), Tk, D);
      for (int64_t i0 = 0; i0 < Tq; i0 += Br) {
        const int64_t nr = std::min(Br, Tq - i0);
        load_f32_span(qf.data(), q, (bh * Tq + i0) * D, nr * D);
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t r = 0; r < nr; ++r) m[r] = -INFINITY, l[r] = 0.0f;
        for (int64_t j0 = 0; j0 < Tk; j0 += Bc) {
          const int64_t nc = std::min(Bc, Tk - j0);
          tile_logits(S.data(), Bc, qf.data(), kt.data(), Tk, D, nr, j0, nc, kvb, scale, mask);
          for (int64_t r = 0; r < nr; ++r) {
            float* srow = S.data() + r * Bc;
            float mt = m[r];
            for (int64_t c = 0; c < nc; ++c) mt = srow[c] > mt ? srow[c] : mt;
            const float corr = scalar::online_rescale(m[r], mt);
            float rowsum = 0.0f;
#pragma omp simd reduction(+ : rowsum)
            for (int64_t c = 0; c < nc; ++c) {
              srow[c] = scalar::softmax_exp(srow[c], mt);
              rowsum += srow[c];
            }
            l[r] = l[r] * corr + rowsum;
            m[r] = mt;
            float* ar = acc.data() + r * D;
#pragma omp simd
            for (int64_t e = 0; e < D; ++e) ar[e] *= corr;
            for (int64_t c = 0; c < nc; ++c) {
              const float p = srow[c];
              const float* vr = vf.data() + (j0 + c) * D;
#pragma omp simd
              for (int64_t e = 0; e < D; ++e) ar[e] += p * vr[e];
            }
          }
        }
        for (int64_t r = 0; r < nr; ++r) {
          const int64_t row = bh * Tq + i0 + r;
          float* ar = acc.data() + r * D;
#pragma omp simd
          for (int64_t e = 0; e < D; ++e) ar[e] = ar[e] / l[r];
          store_f32_span(out, row * D, ar, D, 1.0f);
          lse_p[row] = scalar::attention_lse(m[r], l[r]);
        }
      }
    }
  }
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                        const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& key_valid, float scale, float mask_value) {
  const char* op = "attention_backward";
  const AttnDims d = check_attention(op, q, k, v, out, lse);
  require(dout.shape == q.shape && dq.shape == q.shape, op, "dout and dq must have q's shape");
  require(dk.shape == k.shape && dv.shape == k.shape, op, "dk and dv must have k's shape");
  const int32_t* kv = check_key_valid(op, key_valid, d.B, d.Tk);
  const float mask = scalar::attention_mask_rounded(q.dtype, mask_value);
  constexpr int64_t Br = scalar::kAttnTileQ, Bc = scalar::kAttnTileK;
  const int64_t D = d.D, Tq = d.Tq, Tk = d.Tk;
  const float* lse_p = static_cast<const float*>(lse.data);
#pragma omp parallel
  {
    const size_t nq = static_cast<size_t>(Tq * D), nk = static_cast<size_t>(Tk * D);
    std::vector<float> qf(nq), dof(nq), dqa(nq), di(static_cast<size_t>(Tq));
    std::vector<float> kf(nk), kt(nk), vt(nk), tmp(std::max(nq, nk));
    std::vector<float> dka(static_cast<size_t>(Bc * D)), dva(dka.size());
    std::vector<float> P(static_cast<size_t>(Br * Bc)), dS(P.size());
#pragma omp for schedule(dynamic)
    for (int64_t bh = 0; bh < d.B * d.H; ++bh) {
      const int32_t* kvb = kv + (bh / d.H) * Tk;
      const float* lse_bh = lse_p + bh * Tq;
      load_f32_span(qf.data(), q, bh * Tq * D, Tq * D);
      load_f32_span(dof.data(), dout, bh * Tq * D, Tq * D);
      load_f32_span(kf.data(), k, bh * Tk * D, Tk * D);
      transpose(kt.data(), kf.data(), Tk, D);
      load_f32_span(tmp.data(), v, bh * Tk * D, Tk * D);
      transpose(vt.data(), tmp.data(), Tk, D);
      // D_i = rowsum(dO_i * O_i), from the stored O.
      load_f32_span(tmp.data(), out, bh * Tq * D, Tq * D);
      for (int64_t i = 0; i < Tq; ++i) {
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t e = 0; e < D; ++e) s += dof[static_cast<size_t>(i * D + e)] * tmp[static_cast<size_t>(i * D + e)];
        di[static_cast<size_t>(i)] = s;
      }
      std::fill(dqa.begin(), dqa.end(), 0.0f);
      for (int64_t j0 = 0; j0 < Tk; j0 += Bc) {
        const int64_t nc = std::min(Bc, Tk - j0);
        std::fill(dka.begin(), dka.end(), 0.0f);
        std::fill(dva.begin(), dva.end(), 0.0f);
        for (int64_t i0 = 0; i0 < Tq; i0 += Br) {
          const int64_t nr = std::min(Br, Tq - i0);
          // P = exp(logits - lse) and dP = dO V^T (into dS), per row.
          tile_logits(P.data(), Bc, qf.data() + i0 * D, kt.data(), Tk, D, nr, j0, nc, kvb, scale, mask);
          tile_dots(dS.data(), Bc, dof.data() + i0 * D, vt.data(), Tk, D, nr, j0, nc);
          for (int64_t r = 0; r < nr; ++r) {
            float* prow = P.data() + r * Bc;
            float* dsrow = dS.data() + r * Bc;
            const float li = lse_bh[i0 + r], dii = di[static_cast<size_t>(i0 + r)];
#pragma omp simd
            for (int64_t c = 0; c < nc; ++c) {
              prow[c] = scalar::softmax_exp(prow[c], li);
              dsrow[c] = scalar::attention_ds(prow[c], dsrow[c], dii);
            }
            const float* dor = dof.data() + (i0 + r) * D;
            const float* qr = qf.data() + (i0 + r) * D;
            float* dqr = dqa.data() + (i0 + r) * D;
            for (int64_t c = 0; c < nc; ++c) {
              const float p = prow[c], ds = dsrow[c];
              float* dvr = dva.data() + c * D;
              float* dkr = dka.data() + c * D;
              const float* kr = kf.data() + (j0 + c) * D;
#pragma omp simd
              for (int64_t e = 0; e < D; ++e) {
                dvr[e] += p * dor[e];
                dkr[e] += ds * qr[e];
                dqr[e] += ds * kr[e];
              }
            }
          }
        }
        store_f32_span(dk, (bh * Tk + j0) * D, dka.data(), nc * D, scale);
        store_f32_span(dv, (bh * Tk + j0) * D, dva.data(), nc * D, 1.0f);
      }
      store_f32_span(dq, bh * Tq * D, dqa.data(), Tq * D, scale);
    }
  }
}

}  // namespace mpb::cpu
