// The CPU transformer ops that are not attention: add, LayerNorm (forward,
// residual + forward, backward), the QKV/head layout shuffles and dropout.
// Per-element math is in ops/layernorm.h and ops/dropout.h (shared with CUDA).
#include <algorithm>
#include <vector>

#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/dispatch.h"
#include "backends/cpu/kernels/elementwise_map.h"
#include "ops/dropout.h"
#include "ops/layernorm.h"

namespace mpb::cpu::MPB_CPU_ISA_NS {

using scalar::Elem;

namespace {

// Rows handed to a thread at a time by the LayerNorm loops.
constexpr int64_t kLnRowBlock = 8;
using scalar::kLnGradChunk;  // rows per partial dgamma/dbeta sum (ops/layernorm.h)

std::vector<float> to_f32(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  convert(Tensor(out.data(), DType::F32, t.shape), t);
  return out;
}

// out[i] = a[i] + b[i] for i in [i0, i1).
void add_range(const Tensor& out, const Tensor& a, const Tensor& b, int64_t i0, int64_t i1) {
  dispatch_float3(a.dtype, b.dtype, out.dtype, [&](auto A, auto Bt, auto O) {
    using EA = Elem<decltype(A)::value>;
    using EB = Elem<decltype(Bt)::value>;
    using EO = Elem<decltype(O)::value>;
    const void* pa = a.data;
    const void* pb = b.data;
    void* po = out.data;
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) EO::store(po, i, EA::load(pa, i) + EB::load(pb, i));
  });
}

// LayerNorm of rows [r0, r1) of x (cols C) into out, saving mean/rstd.
void layernorm_rows(const Tensor& out, float* mean, float* rstd, const Tensor& x, const float* gamma,
                    const float* beta, float eps, int64_t r0, int64_t r1) {
  dispatch_float2(x.dtype, out.dtype, [&](auto X, auto O) {
    using EX = Elem<decltype(X)::value>;
    using EO = Elem<decltype(O)::value>;
    const int64_t C = x.cols();
    const void* px = x.data;
    void* po = out.data;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t base = r * C;
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int64_t c = 0; c < C; ++c) s += EX::load(px, base + c);
      const float mu = scalar::layernorm_mean(s, C);
      float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
      for (int64_t c = 0; c < C; ++c) {
        const float d = EX::load(px, base + c) - mu;
        ss += d * d;
      }
      const float rs = scalar::layernorm_rstd(ss, C, eps);
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        EO::store(po, base + c, scalar::layernorm_out(EX::load(px, base + c), mu, rs, gamma[c], beta[c]));
      mean[r] = mu;
      rstd[r] = rs;
    }
  });
}

}  // namespace

void Kernels::add_impl(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t n = out.numel();
  const int64_t blocks = (n + 4095) / 4096;
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) add_range(out, a, b, blk * 4096, std::min(n, (blk + 1) * 4096));
}

void Kernels::layernorm_forward_impl(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                                       const Tensor& gamma, const Tensor& beta, float eps) {
  const std::vector<float> g = to_f32(gamma), bt = to_f32(beta);
  const int64_t rows = x.rows();
  float* mu = static_cast<float*>(mean.data);
  float* rs = static_cast<float*>(rstd.data);
#pragma omp parallel for if (x.numel() > kParallelMin)
  for (int64_t r0 = 0; r0 < rows; r0 += kLnRowBlock)
    layernorm_rows(out, mu, rs, x, g.data(), bt.data(), eps, r0, std::min(rows, r0 + kLnRowBlock));
}

void Kernels::residual_layernorm_forward_impl(const Tensor& out, const Tensor& sum, const Tensor& mean,
                                                const Tensor& rstd, const Tensor& a, const Tensor& b,
                                                const Tensor& gamma, const Tensor& beta, float eps) {
  const std::vector<float> g = to_f32(gamma), bt = to_f32(beta);
  const int64_t rows = sum.rows(), C = sum.cols();
  float* mu = static_cast<float*>(mean.data);
  float* rs = static_cast<float*>(rstd.data);
  // Per block of rows: the sum is stored (rounded to its dtype), then
  // normalised from the stored values while they are in cache. The LayerNorm
  // sees exactly what the backward pass will read as x, and the result equals
  // add() followed by layernorm_forward() bit for bit.
#pragma omp parallel for if (sum.numel() > kParallelMin)
  for (int64_t r0 = 0; r0 < rows; r0 += kLnRowBlock) {
    const int64_t r1 = std::min(rows, r0 + kLnRowBlock);
    add_range(sum, a, b, r0 * C, r1 * C);
    layernorm_rows(out, mu, rs, sum, g.data(), bt.data(), eps, r0, r1);
  }
}

void Kernels::layernorm_backward_impl(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                                        const Tensor& dout, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                        const Tensor& gamma, GradMode dx_mode, GradMode param_mode) {
  const std::vector<float> g = to_f32(gamma);
  const int64_t rows = x.rows(), C = x.cols();
  const int64_t chunks = (rows + kLnGradChunk - 1) / kLnGradChunk;
  // Partial dgamma/dbeta per chunk of rows: [chunks][C] each.
  std::vector<float> part_g(static_cast<size_t>(chunks * C)), part_b(static_cast<size_t>(chunks * C));
  const float* mu = static_cast<const float*>(mean.data);
  const float* rs = static_cast<const float*>(rstd.data);
  const bool accumulate = dx_mode == GradMode::Accumulate;
  dispatch_float3(x.dtype, dout.dtype, dx.dtype, [&](auto X, auto DY, auto DX) {
    using EX = Elem<decltype(X)::value>;
    using EY = Elem<decltype(DY)::value>;
    using EDX = Elem<decltype(DX)::value>;
    const void* px = x.data;
    const void* pdy = dout.data;
    void* pdx = dx.data;
    const float* gm = g.data();
#pragma omp parallel for if (x.numel() > kParallelMin)
    for (int64_t ch = 0; ch < chunks; ++ch) {
      float* pg = part_g.data() + ch * C;
      float* pb = part_b.data() + ch * C;
      std::fill(pg, pg + C, 0.0f);
      std::fill(pb, pb + C, 0.0f);
      const int64_t r1 = std::min(rows, (ch + 1) * kLnGradChunk);
      for (int64_t r = ch * kLnGradChunk; r < r1; ++r) {
        const int64_t base = r * C;
        const float m = mu[r], s = rs[r];
        float sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
        for (int64_t c = 0; c < C; ++c) {
          const float xh = scalar::layernorm_xhat(EX::load(px, base + c), m, s);
          const float gc = EY::load(pdy, base + c) * gm[c];
          sg += gc;
          sgx += gc * xh;
        }
        const float mean_g = scalar::layernorm_mean(sg, C), mean_gx = scalar::layernorm_mean(sgx, C);
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          const float dy = EY::load(pdy, base + c);
          const float xh = scalar::layernorm_xhat(EX::load(px, base + c), m, s);
          const float d = scalar::layernorm_dx(dy * gm[c], xh, mean_g, mean_gx, s);
          EDX::store(pdx, base + c, accumulate ? EDX::load(pdx, base + c) + d : d);
          pg[c] += dy * xh;
          pb[c] += dy;
        }
      }
    }
  });
  // Chunks summed in order, columns in parallel.
  dispatch_float2(dgamma.dtype, dbeta.dtype, [&](auto G, auto Bt) {
    using EG = Elem<decltype(G)::value>;
    using EB = Elem<decltype(Bt)::value>;
    void* pdg = dgamma.data;
    void* pdb = dbeta.data;
    const bool acc = param_mode == GradMode::Accumulate;
#pragma omp parallel for if (chunks * C > kParallelMin)
    for (int64_t c0 = 0; c0 < C; c0 += 64) {
      const int64_t c1 = std::min(C, c0 + 64);
      float sg[64] = {}, sb[64] = {};
      for (int64_t ch = 0; ch < chunks; ++ch)
        for (int64_t c = c0; c < c1; ++c) {
          sg[c - c0] += part_g[static_cast<size_t>(ch * C + c)];
          sb[c - c0] += part_b[static_cast<size_t>(ch * C + c)];
        }
      for (int64_t c = c0; c < c1; ++c) {
        EG::store(pdg, c, (acc ? EG::load(pdg, c) : 0.0f) + sg[c - c0]);
        EB::store(pdb, c, (acc ? EB::load(pdb, c) : 0.0f) + sb[c - c0]);
      }
    }
  });
}

// ---- head layouts -------------------------------------------------------------------
namespace {

struct HeadDims {
  int64_t B, H, T, D;
};

// [B,H,T,D] as the shuffles see it (the public ops checked the packed shapes).
HeadDims head_dims(const Tensor& heads) {
  return HeadDims{heads.shape[0], heads.shape[1], heads.shape[2], heads.shape[3]};
}

// Copies D-element rows between the packed layout ([B,T,parts,H,D]) and a
// per-head tensor ([B,H,T,D]) for part `part`; to_heads picks the direction.
void shuffle_heads(const Tensor& packed, const Tensor& heads, const HeadDims& d, int parts, int part,
                   bool to_heads) {
  const Tensor& src = to_heads ? packed : heads;
  const Tensor& dst = to_heads ? heads : packed;
  dispatch_float2(src.dtype, dst.dtype, [&](auto S, auto Dt) {
    using ES = Elem<decltype(S)::value>;
    using ED = Elem<decltype(Dt)::value>;
    const void* ps = src.data;
    void* pd = dst.data;
    const int64_t BT = d.B * d.T;
#pragma omp parallel for if (heads.numel() > kParallelMin)
    for (int64_t bt = 0; bt < BT; ++bt) {
      const int64_t b = bt / d.T, t = bt % d.T;
      for (int64_t h = 0; h < d.H; ++h) {
        const int64_t pi = ((bt * parts + part) * d.H + h) * d.D;  // packed
        const int64_t hi = ((b * d.H + h) * d.T + t) * d.D;        // per head
        const int64_t si = to_heads ? pi : hi, di = to_heads ? hi : pi;
#pragma omp simd
        for (int64_t e = 0; e < d.D; ++e) ED::store(pd, di + e, ES::load(ps, si + e));
      }
    }
  });
}

}  // namespace

void Kernels::split_heads_impl(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv) {
  const HeadDims d = head_dims(q);
  shuffle_heads(qkv, q, d, 3, 0, true);
  shuffle_heads(qkv, k, d, 3, 1, true);
  shuffle_heads(qkv, v, d, 3, 2, true);
}

void Kernels::merge_qkv_grads_impl(const Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const HeadDims d = head_dims(dq);
  shuffle_heads(dqkv, dq, d, 3, 0, false);
  shuffle_heads(dqkv, dk, d, 3, 1, false);
  shuffle_heads(dqkv, dv, d, 3, 2, false);
}

void Kernels::merge_heads_impl(const Tensor& out, const Tensor& in) {
  const HeadDims d = head_dims(in);
  shuffle_heads(out, in, d, 1, 0, false);
}

void Kernels::split_heads_grad_impl(const Tensor& din, const Tensor& dout) {
  const HeadDims d = head_dims(din);
  shuffle_heads(dout, din, d, 1, 0, true);
}

// ---- dropout ---------------------------------------------------------------------------
void Kernels::dropout_impl(const Tensor& out, const Tensor& in, float p, uint64_t seed) {
  if (p == 0.0f) {  // identity (a cast when the dtypes differ)
    if (out.data != in.data) convert(out, in);
    return;
  }
  const uint32_t threshold = scalar::dropout_threshold(p);
  const float sc = scalar::dropout_scale(p);
  map1_indexed(out, in, [&](float x, int64_t i) {
    return scalar::dropout_apply(x, scalar::dropout_bits(seed, static_cast<uint64_t>(i)), threshold, sc);
  });
}

}  // namespace mpb::cpu::MPB_CPU_ISA_NS
