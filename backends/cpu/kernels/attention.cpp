// Attention on the CPU: the unfused path's masked softmax (and its backward)
// over materialised scores, and fused flash-style attention that never
// materialises the [T,T] matrix. The mask rule, the online softmax and the
// backward formulas are in ops/attention.h (shared with the CUDA kernels).
//
// Fused layout of the work: forward tasks are (batch, head) x query tile
// (kAttnTileQ rows), backward tasks whole (batch, head) pairs; a task
// converts its operands to fp32 scratch (padded to 16-float rows, K and V
// also transposed where the product needs keys along contiguous memory), then
// walks query tiles x key tiles (kAttnTileQ x kAttnTileK) with fp32
// accumulators. Every product (S = Q K^T, P V, dP = dO V^T, dV = P^T dO,
// dK = dS^T Q, dQ = dS K) is a register-blocked small GEMM (small_gemm: 6
// rows x up to 64 columns held in vector registers, one FMA per term, the
// reduction index in order). Each output element is computed by one thread in a fixed order
// (dK/dV by the thread that owns the (batch, head)), so the results are
// deterministic and independent of the thread count.
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include <immintrin.h>
#include <omp.h>

#include "ops/attention.h"
#include "ops/dropout.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/dispatch.h"

namespace mpb::cpu::MPB_CPU_ISA_NS {

using scalar::Elem;

namespace {

// ---- fused-attention building blocks ----------------------------------------------------
// fp32 scratch rows are padded to multiples of kLanes floats so the
// register-blocked products below need no column remainder; pads are zeroed
// once and never written, or hold values whose results are never read.
constexpr int64_t kLanes = 16;
inline int64_t pad16(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

// The widest vector register of the ISA this file is built for (one build per
// ISA: backends/cpu/cpu_isa.h): a 16-lane group of columns is 1 AVX-512, 2 AVX2
// or 4 SSE2 registers. A 64-byte vector type on AVX2 would live on the stack
// (GCC lowers what the hardware lacks through memory: 15x slower measured).
// Only used as local variables, never passed or returned (ABI-neutral).
#if defined(__AVX512F__)
constexpr int kVecFloats = 16;
#elif defined(__AVX__)
constexpr int kVecFloats = 8;
#else
constexpr int kVecFloats = 4;
#endif
typedef float vnf __attribute__((vector_size(kVecFloats * sizeof(float))));
constexpr int kVecsPerGroup = static_cast<int>(kLanes) / kVecFloats;
// The micro-kernel's block: kRows rows x kMaxGroups 16-column groups of
// accumulators, plus one row of B and a broadcast, all in registers: AVX-512
// 6 x 4 + 4 + 1 = 29 of 32 zmm, AVX2 6 x 2 + 2 + 1 = 15 of 16 ymm (the
// classic 6 x 16 block), SSE2 4 x 4 + 4 (spills a little; that build is the
// reference). More rows per loaded row of B is fewer loads per FMA.
constexpr int kMaxGroups = kVecFloats == 16 ? 4 : 1;
constexpr int kRows = kVecFloats >= 8 ? 6 : 4;

// x in every lane, loaded straight from memory (vbroadcastss): "vnf{} + x"
// would add 0 first, an extra instruction that also turns -0 into +0.
inline vnf broadcast_lanes(const float* x) {
#if defined(__AVX512F__)
  return reinterpret_cast<vnf>(_mm512_set1_ps(*x));
#elif defined(__AVX__)
  return reinterpret_cast<vnf>(_mm256_broadcast_ss(x));
#else
  return reinterpret_cast<vnf>(_mm_set1_ps(*x));
#endif
}

// c + a * b rounded once (IEEE fusedMultiplyAdd, as fmaf), lane by lane. The
// products are written as an explicit fused op (the build never contracts on
// its own: cmake/Warnings.cmake), so every build gives the same bits: the
// FMA instruction where the ISA has one, fmaf per lane in the SSE2 reference
// build (slow, but that build is the reference, not the fast path). An FMA
// issues one instruction where mul + add issued two: the products here are
// bound by the vector pipes, so this is most of the fused path's speed.
inline vnf fma_lanes(vnf a, vnf b, vnf c) {
#if defined(__AVX512F__)
  return reinterpret_cast<vnf>(_mm512_fmadd_ps(reinterpret_cast<__m512>(a), reinterpret_cast<__m512>(b),
                                               reinterpret_cast<__m512>(c)));
#elif defined(__FMA__)
  return reinterpret_cast<vnf>(_mm256_fmadd_ps(reinterpret_cast<__m256>(a), reinterpret_cast<__m256>(b),
                                               reinterpret_cast<__m256>(c)));
#else
  vnf r;
  for (int i = 0; i < kVecFloats; ++i) r[i] = std::fma(a[i], b[i], c[i]);
  return r;
#endif
}

// C[r, 16v + l] (+)= sum_k A(r, k) * Bm[k * ldb + 16v + l] for r < R, v < NV,
// l < 16, with A(r, k) = A[r * ars + k * aks] (row- or column-major A). The
// R x NV groups of accumulators stay in registers; each element's sum runs over
// k in order, starting from C (accumulate) or 0, one fused multiply-add per
// term (fma_lanes): the same bits whatever the vector width.
template <int R, int NV>
inline void micro_kernel(float* C, int64_t ldc, const float* A, int64_t ars, int64_t aks, const float* Bm,
                         int64_t ldb, int64_t K, bool accumulate) {
  constexpr int NW = NV * kVecsPerGroup;  // registers per row
  // Every loop over r and w is unrolled completely, so GCC keeps c and bv in
  // registers (scalar replacement); a loop left rolled sends the
  // accumulators through the stack at every k (seen in the AVX2 build).
  vnf c[R][NW];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int w = 0; w < NW; ++w) {
      if (accumulate)
        __builtin_memcpy(&c[r][w], C + r * ldc + w * kVecFloats, sizeof(vnf));
      else
        c[r][w] = vnf{};
    }
  for (int64_t k = 0; k < K; ++k) {
    const float* b = Bm + k * ldb;
    vnf bv[NW];
#pragma GCC unroll 8
    for (int w = 0; w < NW; ++w) {
      __builtin_memcpy(&bv[w], b + w * kVecFloats, sizeof(vnf));
    }
    const float* a = A + k * aks;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const vnf ar = broadcast_lanes(a + r * ars);
#pragma GCC unroll 8
      for (int w = 0; w < NW; ++w) c[r][w] = fma_lanes(ar, bv[w], c[r][w]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int w = 0; w < NW; ++w) __builtin_memcpy(C + r * ldc + w * kVecFloats, &c[r][w], sizeof(vnf));
}

// C[M, N] (+)= A[M, K] . Bm[K, N] over fp32 scratch: M rows are computed in
// blocks of kRows, then 2 (rows past M up to the next multiple of 4 are
// computed too, so A and C must have them; their results are garbage), N is rounded up to 16
// (Bm and C rows must be that wide). Each output element's sum is the same
// (k in order) whatever the blocking.
void small_gemm(float* C, int64_t ldc, const float* A, int64_t ars, int64_t aks, const float* Bm, int64_t ldb,
                int64_t M, int64_t N, int64_t K, bool accumulate) {
  const int64_t nv = pad16(N) / kLanes, M4 = (M + 3) / 4 * 4;
  // One column strip of R rows: full micro-kernels, then the 1-3 groups left.
  auto strip = [&](auto rows, int64_t m0) {
    constexpr int R = decltype(rows)::value;
    float* c = C + m0 * ldc;
    const float* a = A + m0 * ars;
    int64_t v0 = 0;
    for (; v0 + kMaxGroups <= nv; v0 += kMaxGroups)
      micro_kernel<R, kMaxGroups>(c + v0 * kLanes, ldc, a, ars, aks, Bm + v0 * kLanes, ldb, K, accumulate);
    switch (nv - v0) {
      case 3: micro_kernel<R, 3>(c + v0 * kLanes, ldc, a, ars, aks, Bm + v0 * kLanes, ldb, K, accumulate); break;
      case 2: micro_kernel<R, 2>(c + v0 * kLanes, ldc, a, ars, aks, Bm + v0 * kLanes, ldb, K, accumulate); break;
      case 1: micro_kernel<R, 1>(c + v0 * kLanes, ldc, a, ars, aks, Bm + v0 * kLanes, ldb, K, accumulate); break;
      default: break;
    }
  };
  int64_t m0 = 0;
  for (; m0 + kRows <= M4; m0 += kRows) strip(std::integral_constant<int, kRows>{}, m0);
  for (; m0 < M4; m0 += 2) strip(std::integral_constant<int, 2>{}, m0);  // the 2 or 4 rows left (kRows = 6)
}

// dst[r * ldd + c] = t[offset + r * ld + c] as fp32, r < rows, c < cols: rows
// of an attention operand, ld apart in its storage (its HeadLayout's row).
void load_rows(float* dst, int64_t ldd, const Tensor& t, int64_t offset, int64_t ld, int64_t rows, int64_t cols) {
  dispatch_float(t.dtype, [&](auto T) {
    using E = Elem<decltype(T)::value>;
    const void* p = t.data;
    for (int64_t r = 0; r < rows; ++r) {
      float* dr = dst + r * ldd;
      const int64_t o = offset + r * ld;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) dr[c] = E::load(p, o + c);
    }
  });
}

#if defined(__AVX__)
// dst[c * ldd + r] = src[r * lds + c] for one 8 x 8 block, in registers
// (unpack pairs of rows, shuffle quads, swap 128-bit halves).
inline void transpose_8x8(float* dst, int64_t ldd, const float* src, int64_t lds) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);      // rows i, i+1: columns 0 1 | 4 5, interleaved
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);  // columns 2 3 | 6 7
  }
  for (int i = 0; i < 8; i += 4)
    for (int h = 0; h < 2; ++h) {  // quads of rows i..i+3: columns (2h, 2h+1) | (2h+4, 2h+5)
      r[i + 2 * h] = _mm256_shuffle_ps(t[i + h], t[i + 2 + h], _MM_SHUFFLE(1, 0, 1, 0));
      r[i + 2 * h + 1] = _mm256_shuffle_ps(t[i + h], t[i + 2 + h], _MM_SHUFFLE(3, 2, 3, 2));
    }
  for (int c = 0; c < 4; ++c) {  // r[c]: rows 0-3 of columns c | c+4; r[c+4]: rows 4-7
    _mm256_storeu_ps(dst + c * ldd, _mm256_permute2f128_ps(r[c], r[c + 4], 0x20));
    _mm256_storeu_ps(dst + (c + 4) * ldd, _mm256_permute2f128_ps(r[c], r[c + 4], 0x31));
  }
}
#endif

// dst[c * ldd + r] = src[r * lds + c], r < rows, c < cols: 8 x 8 blocks in
// registers where the ISA has 256-bit vectors (an element-by-element
// transpose cost a tenth of the fused path's time), element by element for
// the edges and in the SSE2 reference build. A copy: the same bits either way.
void transpose_f32(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols) {
  int64_t r8 = 0, c8 = 0;
#if defined(__AVX__)
  r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8)
    for (int64_t c = 0; c < c8; c += 8) transpose_8x8(dst + c * ldd + r, ldd, src + r * lds + c, lds);
#endif
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = (r < r8 ? c8 : 0); c < cols; ++c) dst[c * ldd + r] = src[r * lds + c];
}

// t[offset + r * ld + c] = factor * src[r * lds + c], rounded to t's dtype.
void store_rows(const Tensor& t, int64_t offset, int64_t ld, const float* src, int64_t lds, int64_t rows,
                int64_t cols, float factor) {
  dispatch_float(t.dtype, [&](auto T) {
    using E = Elem<decltype(T)::value>;
    void* p = t.data;
    for (int64_t r = 0; r < rows; ++r) {
      const float* sr = src + r * lds;
      const int64_t o = offset + r * ld;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) E::store(p, o + c, factor * sr[c]);
    }
  });
}

// Rows [t0, t0 + rows) of head bh = b * H + h of an operand, as fp32 scratch;
// and the reverse, scaled and rounded.
void load_head_rows(float* dst, int64_t ldd, const AttnOperand& x, int64_t H, int64_t bh, int64_t t0, int64_t rows,
                    int64_t D) {
  load_rows(dst, ldd, x.t, x.at.at(bh / H, bh % H, t0), x.at.row, rows, D);
}
void store_head_rows(const AttnOperand& x, int64_t H, int64_t bh, int64_t t0, const float* src, int64_t lds,
                     int64_t rows, int64_t D, float factor) {
  store_rows(x.t, x.at.at(bh / H, bh % H, t0), x.at.row, src, lds, rows, D, factor);
}

// Fused attention's dropout (core/attention_layout.h): x[c] for c < n, the
// probabilities (or their gradients) of elements first.. of the [B,H,Tq,Tk]
// probabilities, through the dropout op's mask (ops/dropout.h), in place.
struct AttnDropMask {
  uint64_t seed;
  uint32_t threshold;
  float scale;
  explicit AttnDropMask(const AttnDropout& d)
      : seed(d.seed), threshold(scalar::dropout_threshold(d.p)), scale(scalar::dropout_scale(d.p)) {}
  // bits[c] = the hash of element first + c (the dropout op's index).
  void bits(uint32_t* b, int64_t n, int64_t first) const {
    for (int64_t c = 0; c < n; ++c) b[c] = scalar::dropout_bits(seed, static_cast<uint64_t>(first + c));
  }
  // x[c] dropped or scaled by bits[c].
  void apply(float* x, const uint32_t* b, int64_t n) const {
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) x[c] = scalar::dropout_apply(x[c], b[c], threshold, scale);
  }
};

// Row i of a tile in place: the masked, scaled logits of s (nc entries).
inline void mask_row(float* s, int64_t nc, const int32_t* kv, float scale, float mask) {
#pragma omp simd
  for (int64_t c = 0; c < nc; ++c) s[c] = scalar::masked_logit(s[c], scale, kv[c], mask);
}

// What both fused passes read off the problem to turn a tile's logits into
// probabilities: which keys are valid ([B, Tk]), the masked logit (rounded as
// the operands' type rounds it), the logit scale, and the dropout, if any.
// Each parallel region takes it firstprivate: every thread reads its own copy
// off its stack, as it did the separate locals this replaced, not the shared
// object through a pointer.
struct AttnLogitRules {
  const int32_t* kv;
  float mask;
  float scale;
  bool dropping;
  AttnDropMask drop;
  explicit AttnLogitRules(const AttentionProblem& d)
      : kv(static_cast<const int32_t*>(d.key_valid.data)),
        mask(scalar::attention_mask_rounded(d.q.t.dtype, d.mask_value)),
        scale(d.scale),
        dropping(d.dropout.p > 0.0f),
        drop(d.dropout) {}
};

}  // namespace

// ---- unfused softmax ------------------------------------------------------------------
void Kernels::masked_softmax_forward_impl(const Tensor& probs, const Tensor& scores, const Tensor& key_valid,
                                            float scale, float mask_value) {
  const int64_t Tk = scores.shape[3];
  const int64_t rows_per_b = scores.shape[1] * scores.shape[2];
  const int32_t* kv = static_cast<const int32_t*>(key_valid.data);
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

void Kernels::softmax_backward_impl(const Tensor& dscores, const Tensor& probs, const Tensor& dprobs,
                                      float scale) {
  dispatch_float3(probs.dtype, dprobs.dtype, dscores.dtype, [&](auto P, auto DP, auto DS) {
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
}

// ---- fused attention --------------------------------------------------------------------
// The products run through small_gemm on fp32 scratch that each thread
// allocates once per call (per parallel region). Forward tasks are (b,h) x
// query tile: rows are independent, and a thread reuses its converted K/V
// while consecutive tasks share (b,h). Backward tasks are whole (b,h) pairs,
// so dK/dV (summed over every query tile) belong to one thread.
// Every operand is read and written through its HeadLayout (the contiguous
// heads or the packed QKV / merged buffers: core/attention_layout.h); only
// the addresses differ, so both layouts give the same bits.
void Kernels::attention_forward_impl(const AttentionProblem& d, const AttnOperand& out, const Tensor& lse) {
  const AttnLogitRules rules(d);
  constexpr int64_t Br = scalar::kAttnTileQ, Bc = scalar::kAttnTileK;
  static_assert(Br % 4 == 0 && Bc % kLanes == 0, "tiles must fit the micro-kernel's blocking");
  const int64_t D = d.D, Tq = d.Tq, Tk = d.Tk, Dp = pad16(D), Tkp = pad16(Tk);
  const int64_t BH = d.B * d.H, nqt = (Tq + Br - 1) / Br, ntask = BH * nqt;
  float* lse_p = static_cast<float*>(lse.data);
#pragma omp parallel firstprivate(rules)
  {
    // kt [D][Tkp] (K transposed), vf [Tkp][Dp], qf/acc [Br][Dp], S [Br][Bc].
    std::vector<float> kt(static_cast<size_t>(D * Tkp), 0.0f), vf(static_cast<size_t>(Tkp * Dp), 0.0f);
    std::vector<float> kf(static_cast<size_t>(Tk * Dp));
    std::vector<float> qf(static_cast<size_t>(Br * Dp), 0.0f), acc(qf.size()), S(static_cast<size_t>(Br * Bc));
    float m[Br], l[Br];
    int64_t loaded = -1;
    // Whole (b,h) per chunk when there are enough of them, else single query tiles.
    const int64_t chunk = BH >= 4 * omp_get_num_threads() ? nqt : 1;
#pragma omp for schedule(dynamic, chunk)
    for (int64_t task = 0; task < ntask; ++task) {
      const int64_t bh = task / nqt, i0 = (task % nqt) * Br;
      const int32_t* kvb = rules.kv + (bh / d.H) * Tk;
      if (bh != loaded) {
        load_head_rows(kf.data(), Dp, d.k, d.H, bh, 0, Tk, D);
        transpose_f32(kt.data(), Tkp, kf.data(), Dp, Tk, D);
        load_head_rows(vf.data(), Dp, d.v, d.H, bh, 0, Tk, D);
        loaded = bh;
      }
      const int64_t nr = std::min(Br, Tq - i0);
      load_head_rows(qf.data(), Dp, d.q, d.H, bh, i0, nr, D);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t r = 0; r < nr; ++r) m[r] = -INFINITY, l[r] = 0.0f;
      for (int64_t j0 = 0; j0 < Tk; j0 += Bc) {
        const int64_t nc = std::min(Bc, Tk - j0);
        // S = Q_tile . K_tile^T (sum over D in order), then the mask rule.
        small_gemm(S.data(), Bc, qf.data(), Dp, 1, kt.data() + j0, Tkp, nr, nc, D, false);
        for (int64_t r = 0; r < nr; ++r) {
          float* srow = S.data() + r * Bc;
          mask_row(srow, nc, kvb + j0, rules.scale, rules.mask);
          float mt = m[r];
#pragma omp simd reduction(max : mt)
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
          // The row sum is the undropped one: dropout acts on the normalised
          // probabilities, which acc / l then gives.
          if (rules.dropping) {
            uint32_t bits[Bc];
            rules.drop.bits(bits, nc, (bh * Tq + i0 + r) * Tk + j0);
            rules.drop.apply(srow, bits, nc);
          }
          if (corr != 1.0f) {
            float* ar = acc.data() + r * Dp;
#pragma omp simd
            for (int64_t e = 0; e < D; ++e) ar[e] *= corr;
          }
        }
        // acc += P . V_tile (sum over the tile's keys in order).
        small_gemm(acc.data(), Dp, S.data(), Bc, 1, vf.data() + j0 * Dp, Dp, nr, D, nc, true);
      }
      for (int64_t r = 0; r < nr; ++r) {
        const int64_t row = bh * Tq + i0 + r;
        float* ar = acc.data() + r * Dp;
        const float lr = l[r];
#pragma omp simd
        for (int64_t e = 0; e < D; ++e) ar[e] = ar[e] / lr;
        lse_p[row] = scalar::attention_lse(m[r], lr);
      }
      store_head_rows(out, d.H, bh, i0, acc.data(), Dp, nr, D, 1.0f);
    }
  }
}

void Kernels::attention_backward_impl(const AttentionProblem& d, const AttnOperand& dq, const AttnOperand& dk,
                                        const AttnOperand& dv, const AttnOperand& dout, const AttnOperand& out,
                                        const Tensor& lse) {
  const AttnLogitRules rules(d);
  constexpr int64_t Br = scalar::kAttnTileQ, Bc = scalar::kAttnTileK;
  const int64_t D = d.D, Tq = d.Tq, Tk = d.Tk, Dp = pad16(D), Tkp = pad16(Tk);
  // Rows padded to a multiple of 4 (the micro-kernel's row block).
  const int64_t Tq4 = (Tq + 3) / 4 * 4, Tk4 = (Tk + 3) / 4 * 4;
  const float* lse_p = static_cast<const float*>(lse.data);
#pragma omp parallel firstprivate(rules)
  {
    const size_t nq = static_cast<size_t>(Tq4 * Dp), nk = static_cast<size_t>(Tk4 * Dp);
    // qf, dof, dqa, of [Tq][Dp]; kf [Tk][Dp]; kt, vt [D][Tkp]; dka, dva [Bc][Dp]; P, dS [Br][Bc].
    std::vector<float> qf(nq, 0.0f), dof(nq, 0.0f), dqa(nq, 0.0f), di(static_cast<size_t>(Tq));
    std::vector<float> of(std::max(nq, nk), 0.0f);  // V (before the transpose), then O
    std::vector<float> kf(nk, 0.0f), kt(static_cast<size_t>(D * Tkp), 0.0f), vt(kt.size(), 0.0f);
    std::vector<float> dka(static_cast<size_t>(Bc * Dp), 0.0f), dva(dka.size(), 0.0f);
    std::vector<float> P(static_cast<size_t>(Br * Bc), 0.0f), dS(P.size(), 0.0f);
#pragma omp for schedule(dynamic)
    for (int64_t bh = 0; bh < d.B * d.H; ++bh) {
      const int32_t* kvb = rules.kv + (bh / d.H) * Tk;
      const float* lse_bh = lse_p + bh * Tq;
      load_head_rows(qf.data(), Dp, d.q, d.H, bh, 0, Tq, D);
      load_head_rows(dof.data(), Dp, dout, d.H, bh, 0, Tq, D);
      load_head_rows(kf.data(), Dp, d.k, d.H, bh, 0, Tk, D);
      transpose_f32(kt.data(), Tkp, kf.data(), Dp, Tk, D);
      load_head_rows(of.data(), Dp, d.v, d.H, bh, 0, Tk, D);  // of holds V until O is loaded below
      transpose_f32(vt.data(), Tkp, of.data(), Dp, Tk, D);
      // D_i = rowsum(dO_i * O_i), from the stored O.
      load_head_rows(of.data(), Dp, out, d.H, bh, 0, Tq, D);
      for (int64_t i = 0; i < Tq; ++i) {
        const float* a = dof.data() + i * Dp;
        const float* b = of.data() + i * Dp;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t e = 0; e < D; ++e) s += a[e] * b[e];
        di[static_cast<size_t>(i)] = s;
      }
      std::fill(dqa.begin(), dqa.end(), 0.0f);
      for (int64_t j0 = 0; j0 < Tk; j0 += Bc) {
        const int64_t nc = std::min(Bc, Tk - j0);
        std::fill(dka.begin(), dka.end(), 0.0f);
        std::fill(dva.begin(), dva.end(), 0.0f);
        for (int64_t i0 = 0; i0 < Tq; i0 += Br) {
          const int64_t nr = std::min(Br, Tq - i0);
          // P = exp(logits - lse) and dP = dO V^T (into dS), then dS = P * (dP - D_i).
          small_gemm(P.data(), Bc, qf.data() + i0 * Dp, Dp, 1, kt.data() + j0, Tkp, nr, nc, D, false);
          small_gemm(dS.data(), Bc, dof.data() + i0 * Dp, Dp, 1, vt.data() + j0, Tkp, nr, nc, D, false);
          for (int64_t r = 0; r < nr; ++r) {
            float* prow = P.data() + r * Bc;
            float* dsrow = dS.data() + r * Bc;
            const float li = lse_bh[i0 + r], dii = di[static_cast<size_t>(i0 + r)];
            const int64_t first = (bh * Tq + i0 + r) * Tk + j0;
            mask_row(prow, nc, kvb + j0, rules.scale, rules.mask);
            // With dropout O = drop(P) V: dP through the mask (the gradient
            // wrt P), and dV from drop(P); D_i = rowsum(dO * O) is still
            // sum_j P_ij dP_ij. One hash per element serves both masks.
            uint32_t bits[Bc];
            if (rules.dropping) {
              rules.drop.bits(bits, nc, first);
              rules.drop.apply(dsrow, bits, nc);
            }
#pragma omp simd
            for (int64_t c = 0; c < nc; ++c) {
              prow[c] = scalar::softmax_exp(prow[c], li);
              dsrow[c] = scalar::attention_ds(prow[c], dsrow[c], dii);
            }
            if (rules.dropping) rules.drop.apply(prow, bits, nc);
          }
          // dV_tile += P^T dO_tile, dK_tile += dS^T Q_tile (sums over the
          // query tile's rows in order), dQ_tile += dS K_tile (over its keys).
          small_gemm(dva.data(), Dp, P.data(), 1, Bc, dof.data() + i0 * Dp, Dp, nc, D, nr, true);
          small_gemm(dka.data(), Dp, dS.data(), 1, Bc, qf.data() + i0 * Dp, Dp, nc, D, nr, true);
          small_gemm(dqa.data() + i0 * Dp, Dp, dS.data(), Bc, 1, kf.data() + j0 * Dp, Dp, nr, D, nc, true);
        }
        store_head_rows(dk, d.H, bh, j0, dka.data(), Dp, nc, D, rules.scale);
        store_head_rows(dv, d.H, bh, j0, dva.data(), Dp, nc, D, 1.0f);
      }
      store_head_rows(dq, d.H, bh, 0, dqa.data(), Dp, Tq, D, rules.scale);
    }
  }
}

}  // namespace mpb::cpu::MPB_CPU_ISA_NS
