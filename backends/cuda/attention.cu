// Attention on the GPU: the unfused path's masked softmax (and its backward)
// over materialised scores, and fused flash-style attention (FlashAttention-2
// structure) that never materialises the [T,T] matrix. The mask rule, the
// online softmax and the backward formulas are the shared scalar cores of
// ops/attention.h, exactly as backends/cpu/kernels/attention.cpp uses them. Arguments
// arrive checked (core/device.h); this file checks only its own limits.
//
// Masked softmax / softmax backward: one warp per row (grid-stride over rows);
// the row max, the sum of exponentials and the backward's dot product are
// fp32 reductions (lanes in order, then a fixed butterfly), so the results are
// run-to-run reproducible and agree with the CPU to fp32-summation bounds. The
// logits themselves (masked_logit), the max and every exponential are the same
// fp32 operations as on the CPU.
//
// Fused attention. Tiles of kTileQ queries x kTileK keys, staged in shared
// memory as fp32 (whatever the storage dtype); 256 threads = kTileQ rows x
// kRowThreads threads, the kRowThreads threads of a row being consecutive lanes
// of one warp (row statistics are combined by shuffles among them). Head dim
// D <= kMaxHeadDim = 128 (each thread owns D / kRowThreads accumulator
// columns in registers); larger D is rejected with std::invalid_argument (a
// backend limit, with the grid limits in check_limits below).
//  forward  (grid: B*H x query tiles): Q tile loaded once; per key tile: K
//           into shared memory, S = Q K^T (every dot product summed over d in
//           order, as on the CPU), the mask rule, the online-softmax update
//           (running max m, running sum l, rescale of the accumulator), then V
//           into the same buffer and acc += P V. out = acc / l and
//           lse = m + log(l) (fp32 [B,H,Tq]) per query.
//  backward (no atomics, so deterministic):
//           1. D_i = rowsum(dO_i * O_i) from the stored O (fp32 [B,H,Tq] in a
//              device scratch buffer: O(T), not O(T^2)).
//           2. dQ (grid: B*H x query tiles): per key tile, P = exp(logit -
//              lse) recomputed, dP = dO V^T, dS = P (dP - D_i), dQ += dS K.
//           3. dK, dV (grid: B*H x key tiles): per query tile, the same P and
//              dS, dV += P^T dO, dK += dS^T Q.
//           dQ and dK are multiplied by `scale` once at the end, as on the CPU.
//           Every accumulation runs over keys (dQ) or queries (dK, dV) in
//           ascending order in fp32.
// Keys beyond Tk and queries beyond Tq in a partial tile contribute exactly
// nothing (probability 0), they are not masked; padded keys follow the mask
// rule. All shared-memory rows have an odd stride (bank-conflict-free column
// reads). Shared memory is dynamic, sized for the actual D; above 48 KiB the
// kernel opts in (cudaFuncAttributeMaxDynamicSharedMemorySize): at D = 128 the
// backward's dK/dV kernel uses 73 KiB, below every targeted GPU's opt-in limit
// (99 KiB on sm_86/sm_89, more on sm_80/sm_90); the limit is checked with a
// clear error anyway.
// Every operand is addressed through its HeadLayout (core/attention_layout.h):
// the contiguous heads of attention_forward/backward or the packed QKV and
// merged buffers of the packed ops; only the addresses differ, so both
// layouts give the same bits.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

#include "backends/cuda/attention_cudnn.h"
#include "core/attention_layout.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "ops/attention.h"
#include "ops/dropout.h"
#include "backends/cuda/kernel_util.cuh"
#include "ops/dtype_io.h"

namespace mpb::cuda {

namespace {

using scalar::load_f32;
using scalar::store_f32;

constexpr int kTileQ = 32;
constexpr int kTileK = 32;
constexpr int kRowThreads = 8;  // threads per tile row (consecutive lanes)
constexpr int kMaxHeadDim = 128;
constexpr int kDimsPerThread = kMaxHeadDim / kRowThreads;  // accumulator columns per thread
constexpr int kColsPerThread = kTileK / kRowThreads;       // S-tile columns per thread
constexpr int kLdS = kTileK + 1;                           // row stride of the P / dS tiles
static_assert(kTileQ * kRowThreads == kThreads, "one tile row per kRowThreads threads");
static_assert(kTileK == kTileQ, "the dK/dV kernel maps keys onto the tile rows");
static_assert(32 % kRowThreads == 0, "a row's threads must lie in one warp");

__device__ inline unsigned lane_id() { return threadIdx.x & 31u; }
__device__ inline int64_t warp_global() { return (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; }
__device__ inline int64_t warps_in_grid() { return (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5; }

// Rows of a tile of `tile` starting at `start` that lie below `total`.
__device__ inline int tile_rows(int64_t total, int64_t start, int tile) {
  const int64_t left = total - start;
  return left < tile ? static_cast<int>(left) : tile;
}

// Warp-wide fp32 sum (butterfly: a fixed order) and max (a > b ? a : b, which
// skips NaN like the CPU's running max), then lane 0's value broadcast so
// every lane holds the same bits.
__device__ inline float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return __shfl_sync(0xffffffffu, v, 0);
}
__device__ inline float warp_max(float v) {
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = o > v ? o : v;
  }
  return __shfl_sync(0xffffffffu, v, 0);
}

// The same over the kRowThreads lanes of one tile row (all 32 lanes call it).
__device__ inline float row_sum(float v) {
  for (int off = kRowThreads / 2; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return __shfl_sync(0xffffffffu, v, static_cast<int>(lane_id() & ~static_cast<unsigned>(kRowThreads - 1)));
}
__device__ inline float row_max(float v) {
  for (int off = kRowThreads / 2; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = o > v ? o : v;
  }
  return __shfl_sync(0xffffffffu, v, static_cast<int>(lane_id() & ~static_cast<unsigned>(kRowThreads - 1)));
}

// ---- unfused softmax ---------------------------------------------------------------------
// probs = softmax(masked_logit(scores)) per row, one warp per row. Each lane
// reads and writes the same columns in every pass, so probs may alias scores.
__global__ void masked_softmax_kernel(void* probs, DType pt, const void* scores, DType st, const int32_t* key_valid,
                                      int64_t rows, int64_t rows_per_b, int64_t Tk, float scale, float mask) {
  const unsigned lane = lane_id();
  for (int64_t r = warp_global(); r < rows; r += warps_in_grid()) {
    const int32_t* kvb = key_valid + (r / rows_per_b) * Tk;
    const int64_t base = r * Tk;
    float mx = -INFINITY;
    for (int64_t j = lane; j < Tk; j += 32) {
      const float l = scalar::masked_logit(load_f32(scores, st, base + j), scale, kvb[j], mask);
      mx = l > mx ? l : mx;  // a NaN logit is skipped here but poisons the sum below (as on the CPU)
    }
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int64_t j = lane; j < Tk; j += 32)
      sum += scalar::softmax_exp(scalar::masked_logit(load_f32(scores, st, base + j), scale, kvb[j], mask), mx);
    sum = warp_sum(sum);
    for (int64_t j = lane; j < Tk; j += 32) {
      const float e =
          scalar::softmax_exp(scalar::masked_logit(load_f32(scores, st, base + j), scale, kvb[j], mask), mx);
      store_f32(probs, pt, base + j, e / sum);
    }
  }
}

// dscores = scale * p * (dp - sum_j p_j dp_j), one warp per row (may alias
// either input: each lane reads an element before it writes it).
__global__ void softmax_backward_kernel(void* ds, DType dst, const void* p, DType pt, const void* dp, DType dpt,
                                        int64_t rows, int64_t C, float scale) {
  const unsigned lane = lane_id();
  for (int64_t r = warp_global(); r < rows; r += warps_in_grid()) {
    const int64_t base = r * C;
    float dot = 0.0f;
    for (int64_t j = lane; j < C; j += 32) dot += load_f32(p, pt, base + j) * load_f32(dp, dpt, base + j);
    dot = warp_sum(dot);
    for (int64_t j = lane; j < C; j += 32)
      store_f32(ds, dst, base + j,
                scalar::softmax_grad(load_f32(p, pt, base + j), load_f32(dp, dpt, base + j), dot, scale));
  }
}

// ---- fused attention ------------------------------------------------------------------------
struct AttnArgs {
  const void* q;
  const void* k;
  const void* v;
  DType qt;  // q, k and v share it
  HeadLayout lq, lk, lv;
  const int32_t* key_valid;
  int64_t H, Tq, Tk;
  int D, ld;  // head dim, shared-memory row stride (odd)
  float scale, mask;  // mask: attention_mask_rounded(q's dtype, mask_value)
  // Dropout on the probabilities (ops/dropout.h; core/attention_layout.h).
  bool dropping;
  uint32_t drop_threshold;
  float drop_scale;
  uint64_t drop_seed;
};

// Dropout of element e of the [B,H,Tq,Tk] probabilities: attn_bits is its
// hash, attn_drop_bits puts x through the mask those bits give, attn_drop does
// both (x itself without dropout). The backward hashes once for P and dP.
__device__ inline float attn_drop_bits(const AttnArgs& a, float x, uint32_t bits) {
  return a.dropping ? scalar::dropout_apply(x, bits, a.drop_threshold, a.drop_scale) : x;
}
__device__ inline uint32_t attn_bits(const AttnArgs& a, int64_t e) {
  return a.dropping ? scalar::dropout_bits(a.drop_seed, static_cast<uint64_t>(e)) : 0u;
}
__device__ inline float attn_drop(const AttnArgs& a, float x, int64_t e) {
  return attn_drop_bits(a, x, attn_bits(a, e));
}

// dst[r * ld + d] = src[elem0 + r * src_row + d] as fp32 for r < valid, 0 for
// valid <= r < rows (the rest of a partial tile): rows t0.. of one head,
// elem0 = its layout's at(b, h, t0), src_row = its layout's row.
__device__ void load_tile(float* dst, int ld, const void* src, DType t, int64_t elem0, int64_t src_row, int valid,
                          int rows, int D) {
  const int n = rows * D;
  for (int idx = threadIdx.x; idx < n; idx += blockDim.x) {
    const int r = idx / D, d = idx - r * D;
    dst[r * ld + d] = r < valid ? load_f32(src, t, elem0 + r * src_row + d) : 0.0f;
  }
}

// kvs[j] = key_valid[b, j0 + j] for the nk keys of the tile starting at j0,
// 0 (masked) for the rest of a partial tile.
__device__ inline void load_key_valid(int* kvs, const AttnArgs& a, int64_t b, int64_t j0, int nk) {
  if (threadIdx.x < kTileK)
    kvs[threadIdx.x] = static_cast<int>(threadIdx.x) < nk ? a.key_valid[b * a.Tk + j0 + threadIdx.x] : 0;
}

// Sum over d of a[d] * b[d], d ascending from 0 (the CPU's order).
__device__ inline float dot_rows(const float* a, const float* b, int D) {
  float s = 0.0f;
  for (int d = 0; d < D; ++d) s += a[d] * b[d];
  return s;
}

// acc[k] += sum over c < n, ascending, of w[c] * rows[c * ld + d] for thread
// s's columns d = s + kRowThreads * k < D: one weight row times a tile (P . V
// in the forward kernel, dS . K in the dQ kernel). Force-inlined so acc stays
// in registers.
__device__ __forceinline__ void accumulate_weighted_rows(float (&acc)[kDimsPerThread], const float* w,
                                                         const float* rows, int n, int ld, int s, int D) {
  for (int c = 0; c < n; ++c) {
    const float wc = w[c];
    const float* r = rows + c * ld;
#pragma unroll
    for (int k = 0; k < kDimsPerThread; ++k) {
      const int d = s + kRowThreads * k;
      if (d < D) acc[k] += wc * r[d];
    }
  }
}

__global__ void attention_forward_kernel(AttnArgs a, void* out, DType ot, HeadLayout lo, float* lse) {
  extern __shared__ float smem[];
  float* Qs = smem;                 // [kTileQ][ld]
  float* KVs = Qs + kTileQ * a.ld;  // [kTileK][ld]: K, then V, of the current key tile
  float* Ps = KVs + kTileK * a.ld;  // [kTileQ][kLdS]
  int* kvs = reinterpret_cast<int*>(Ps + kTileQ * kLdS);  // [kTileK]
  const int64_t bh = blockIdx.x, b = bh / a.H, h = bh % a.H;
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kTileQ;
  const int nq = tile_rows(a.Tq, i0, kTileQ);
  const int g = static_cast<int>(threadIdx.x) / kRowThreads, s = static_cast<int>(threadIdx.x) % kRowThreads;
  const int D = a.D, ld = a.ld;

  load_tile(Qs, ld, a.q, a.qt, a.lq.at(b, h, i0), a.lq.row, nq, kTileQ, D);
  float m = -INFINITY, l = 0.0f;
  float acc[kDimsPerThread];
#pragma unroll
  for (int k = 0; k < kDimsPerThread; ++k) acc[k] = 0.0f;

  for (int64_t j0 = 0; j0 < a.Tk; j0 += kTileK) {
    const int nk = tile_rows(a.Tk, j0, kTileK);
    __syncthreads();  // the previous tile's readers of KVs, Ps and kvs are done
    load_tile(KVs, ld, a.k, a.qt, a.lk.at(b, h, j0), a.lk.row, nk, kTileK, D);
    load_key_valid(kvs, a, b, j0, nk);
    __syncthreads();

    float sv[kColsPerThread];
    float mt = m;
#pragma unroll
    for (int jj = 0; jj < kColsPerThread; ++jj) {
      const int c = s + kRowThreads * jj;
      sv[jj] = scalar::masked_logit(dot_rows(Qs + g * ld, KVs + c * ld, D), a.scale, kvs[c], a.mask);
      if (c < nk) mt = sv[jj] > mt ? sv[jj] : mt;
    }
    mt = row_max(mt);
    const float corr = scalar::online_rescale(m, mt);
    float rowsum = 0.0f;
#pragma unroll
    for (int jj = 0; jj < kColsPerThread; ++jj) {
      const int c = s + kRowThreads * jj;
      const float p = c < nk ? scalar::softmax_exp(sv[jj], mt) : 0.0f;
      // The undropped sum normalises; P V takes the dropped probabilities.
      Ps[g * kLdS + c] = attn_drop(a, p, (bh * a.Tq + i0 + g) * a.Tk + j0 + c);
      rowsum += p;
    }
    l = l * corr + row_sum(rowsum);
    m = mt;

    __syncthreads();  // every S dot product has read K
    load_tile(KVs, ld, a.v, a.qt, a.lv.at(b, h, j0), a.lv.row, nk, kTileK, D);
    __syncthreads();  // V and P visible
#pragma unroll
    for (int k = 0; k < kDimsPerThread; ++k) acc[k] *= corr;
    accumulate_weighted_rows(acc, Ps + g * kLdS, KVs, nk, ld, s, D);
  }
  if (g < nq) {
    const int64_t row = bh * a.Tq + i0 + g, o0 = lo.at(b, h, i0 + g);
#pragma unroll
    for (int k = 0; k < kDimsPerThread; ++k) {
      const int d = s + kRowThreads * k;
      if (d < D) store_f32(out, ot, o0 + d, acc[k] / l);
    }
    if (s == 0) lse[row] = scalar::attention_lse(m, l);
  }
}

// D_i = sum_d dO_id * O_id, one warp per row r = (b * H + h) * Tq + t.
__global__ void attention_di_kernel(const void* dout, DType dt, HeadLayout ldo, const void* out, DType ot,
                                    HeadLayout lo, float* di, int64_t rows, int64_t H, int64_t Tq, int D) {
  const unsigned lane = lane_id();
  for (int64_t r = warp_global(); r < rows; r += warps_in_grid()) {
    const int64_t bh = r / Tq, t = r - bh * Tq, b = bh / H, h = bh - b * H;
    const int64_t e_do = ldo.at(b, h, t), e_o = lo.at(b, h, t);
    float s = 0.0f;
    for (int d = static_cast<int>(lane); d < D; d += 32)
      s += load_f32(dout, dt, e_do + d) * load_f32(out, ot, e_o + d);
    s = warp_sum(s);
    if (lane == 0) di[r] = s;
  }
}

struct AttnGradIn {
  const void* dout;
  DType dt;
  HeadLayout ldo;
  const float* lse;
  const float* di;
};

// The backward kernels' query tile starting at row i0 (nq valid rows) of
// head bh: Q and dO into Qs and dOs, lse and D_i into lse_s and di_s (0 for
// the rest of a partial tile).
__device__ inline void load_query_tile(const AttnArgs& a, const AttnGradIn& gi, float* Qs, float* dOs, float* lse_s,
                                       float* di_s, int64_t bh, int64_t i0, int nq) {
  const int64_t b = bh / a.H, h = bh % a.H;
  load_tile(Qs, a.ld, a.q, a.qt, a.lq.at(b, h, i0), a.lq.row, nq, kTileQ, a.D);
  load_tile(dOs, a.ld, gi.dout, gi.dt, gi.ldo.at(b, h, i0), gi.ldo.row, nq, kTileQ, a.D);
  if (threadIdx.x < kTileQ) {
    const bool in = static_cast<int>(threadIdx.x) < nq;
    lse_s[threadIdx.x] = in ? gi.lse[bh * a.Tq + i0 + threadIdx.x] : 0.0f;
    di_s[threadIdx.x] = in ? gi.di[bh * a.Tq + i0 + threadIdx.x] : 0.0f;
  }
}

// The backward kernels' key tile starting at key j0 (nk valid keys) of head
// bh in batch b: K and V into Ks and Vs, key_valid into kvs.
__device__ inline void load_key_tile(const AttnArgs& a, float* Ks, float* Vs, int* kvs, int64_t bh, int64_t b,
                                     int64_t j0, int nk) {
  const int64_t h = bh % a.H;
  load_tile(Ks, a.ld, a.k, a.qt, a.lk.at(b, h, j0), a.lk.row, nk, kTileK, a.D);
  load_tile(Vs, a.ld, a.v, a.qt, a.lv.at(b, h, j0), a.lv.row, nk, kTileK, a.D);
  load_key_valid(kvs, a, b, j0, nk);
}

// P and dS of tile row g (a query) for the kColsPerThread columns of thread s:
// p = exp(logit - lse) recomputed, dp = dO . v, ds = p (dp - D_i); zero for
// queries or keys outside the tiles' valid ranges. With dropout (O = drop(P)
// V), dp goes through the mask and p_out is drop(p), for dV; `first` is the
// element index of the row's column 0 in the [B,H,Tq,Tk] probabilities.
__device__ inline void p_and_ds(const AttnArgs& a, const float* Qs, const float* dOs, const float* Ks,
                                const float* Vs, const int* kvs, float lse_g, float di_g, int g, int s, int nq, int nk,
                                int64_t first, float* p_out, float* ds_out) {
#pragma unroll
  for (int jj = 0; jj < kColsPerThread; ++jj) {
    const int c = s + kRowThreads * jj;
    const bool valid = g < nq && c < nk;
    const float logit = scalar::masked_logit(dot_rows(Qs + g * a.ld, Ks + c * a.ld, a.D), a.scale, kvs[c], a.mask);
    const uint32_t bits = attn_bits(a, first + c);  // one hash for both masks
    const float dp = attn_drop_bits(a, dot_rows(dOs + g * a.ld, Vs + c * a.ld, a.D), bits);
    const float p = valid ? scalar::softmax_exp(logit, lse_g) : 0.0f;
    p_out[jj] = attn_drop_bits(a, p, bits);
    ds_out[jj] = valid ? scalar::attention_ds(p, dp, di_g) : 0.0f;
  }
}

__global__ void attention_dq_kernel(AttnArgs a, AttnGradIn gi, void* dq, DType dqt, HeadLayout ldq) {
  extern __shared__ float smem[];
  const int ld = a.ld, D = a.D;
  float* Qs = smem;                  // [kTileQ][ld]
  float* dOs = Qs + kTileQ * ld;     // [kTileQ][ld]
  float* Ks = dOs + kTileQ * ld;     // [kTileK][ld]
  float* Vs = Ks + kTileK * ld;      // [kTileK][ld]
  float* dSs = Vs + kTileK * ld;     // [kTileQ][kLdS]
  float* lse_s = dSs + kTileQ * kLdS;  // [kTileQ]
  float* di_s = lse_s + kTileQ;        // [kTileQ]
  int* kvs = reinterpret_cast<int*>(di_s + kTileQ);  // [kTileK]
  const int64_t bh = blockIdx.x, b = bh / a.H;
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kTileQ;
  const int nq = tile_rows(a.Tq, i0, kTileQ);
  const int g = static_cast<int>(threadIdx.x) / kRowThreads, s = static_cast<int>(threadIdx.x) % kRowThreads;

  load_query_tile(a, gi, Qs, dOs, lse_s, di_s, bh, i0, nq);
  float acc[kDimsPerThread];
#pragma unroll
  for (int k = 0; k < kDimsPerThread; ++k) acc[k] = 0.0f;

  for (int64_t j0 = 0; j0 < a.Tk; j0 += kTileK) {
    const int nk = tile_rows(a.Tk, j0, kTileK);
    __syncthreads();  // the previous tile's readers are done (first pass: Q, dO, lse, D_i visible after the next)
    load_key_tile(a, Ks, Vs, kvs, bh, b, j0, nk);
    __syncthreads();
    float p[kColsPerThread], ds[kColsPerThread];
    p_and_ds(a, Qs, dOs, Ks, Vs, kvs, lse_s[g], di_s[g], g, s, nq, nk, (bh * a.Tq + i0 + g) * a.Tk + j0, p, ds);
#pragma unroll
    for (int jj = 0; jj < kColsPerThread; ++jj) dSs[g * kLdS + s + kRowThreads * jj] = ds[jj];
    __syncthreads();
    accumulate_weighted_rows(acc, dSs + g * kLdS, Ks, nk, ld, s, D);
  }
  if (g < nq) {
    const int64_t o0 = ldq.at(b, bh % a.H, i0 + g);
#pragma unroll
    for (int k = 0; k < kDimsPerThread; ++k) {
      const int d = s + kRowThreads * k;
      if (d < D) store_f32(dq, dqt, o0 + d, a.scale * acc[k]);
    }
  }
}

__global__ void attention_dkdv_kernel(AttnArgs a, AttnGradIn gi, void* dk, DType dkt, HeadLayout ldk, void* dv,
                                      DType dvt, HeadLayout ldv) {
  extern __shared__ float smem[];
  const int ld = a.ld, D = a.D;
  float* Ks = smem;                  // [kTileK][ld]
  float* Vs = Ks + kTileK * ld;      // [kTileK][ld]
  float* Qs = Vs + kTileK * ld;      // [kTileQ][ld]
  float* dOs = Qs + kTileQ * ld;     // [kTileQ][ld]
  float* Ps = dOs + kTileQ * ld;     // [kTileQ][kLdS]
  float* dSs = Ps + kTileQ * kLdS;   // [kTileQ][kLdS]
  float* lse_s = dSs + kTileQ * kLdS;  // [kTileQ]
  float* di_s = lse_s + kTileQ;        // [kTileQ]
  int* kvs = reinterpret_cast<int*>(di_s + kTileQ);  // [kTileK]
  const int64_t bh = blockIdx.x, b = bh / a.H;
  const int64_t j0 = static_cast<int64_t>(blockIdx.y) * kTileK;
  const int nk = tile_rows(a.Tk, j0, kTileK);
  const int g = static_cast<int>(threadIdx.x) / kRowThreads, s = static_cast<int>(threadIdx.x) % kRowThreads;

  load_key_tile(a, Ks, Vs, kvs, bh, b, j0, nk);
  // Thread (g, s) accumulates key g's dK and dV columns s, s + kRowThreads, ...
  float dk_acc[kDimsPerThread], dv_acc[kDimsPerThread];
#pragma unroll
  for (int k = 0; k < kDimsPerThread; ++k) dk_acc[k] = dv_acc[k] = 0.0f;

  for (int64_t i0 = 0; i0 < a.Tq; i0 += kTileQ) {
    const int nq = tile_rows(a.Tq, i0, kTileQ);
    __syncthreads();  // the previous tile's readers are done (first pass: K, V, kvs visible after the next)
    load_query_tile(a, gi, Qs, dOs, lse_s, di_s, bh, i0, nq);
    __syncthreads();
    // P and dS of the tile: here g is the query row.
    float p[kColsPerThread], ds[kColsPerThread];
    p_and_ds(a, Qs, dOs, Ks, Vs, kvs, lse_s[g], di_s[g], g, s, nq, nk, (bh * a.Tq + i0 + g) * a.Tk + j0, p, ds);
#pragma unroll
    for (int jj = 0; jj < kColsPerThread; ++jj) {
      Ps[g * kLdS + s + kRowThreads * jj] = p[jj];
      dSs[g * kLdS + s + kRowThreads * jj] = ds[jj];
    }
    __syncthreads();
    // Accumulate: here g is the key; queries in ascending order.
    for (int r = 0; r < nq; ++r) {
      const float pr = Ps[r * kLdS + g], dsr = dSs[r * kLdS + g];
      const float* dor = dOs + r * ld;
      const float* qr = Qs + r * ld;
#pragma unroll
      for (int k = 0; k < kDimsPerThread; ++k) {
        const int d = s + kRowThreads * k;
        if (d < D) {
          dv_acc[k] += pr * dor[d];
          dk_acc[k] += dsr * qr[d];
        }
      }
    }
  }
  if (g < nk) {
    const int64_t h = bh % a.H, ek = ldk.at(b, h, j0 + g), ev = ldv.at(b, h, j0 + g);
#pragma unroll
    for (int k = 0; k < kDimsPerThread; ++k) {
      const int d = s + kRowThreads * k;
      if (d < D) {
        store_f32(dk, dkt, ek + d, a.scale * dk_acc[k]);
        store_f32(dv, dvt, ev + d, 1.0f * dv_acc[k]);
      }
    }
  }
}

#ifdef MPB_HAVE_CUDNN_FRONTEND
// ---- cuDNN SDPA's padding bias ----------------------------------------------------------------
// bias[b, j] = attention_bias(key_valid[b, j], mask): 0, the rounded mask or
// NaN (ops/attention.h, the CPU's rule), stored in q's dtype, where each of
// those values is exact. Grid-stride over the B*Tk elements.
__global__ void attention_bias_kernel(void* bias, DType bt, const int32_t* __restrict__ kv, int64_t n, float mask) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) store_f32(bias, bt, i, scalar::attention_bias(kv[i], mask));
}
#endif

// ---- host side ---------------------------------------------------------------------------------
// Backend limits of the fused kernels (the shapes themselves were checked by
// the public ops): the head dim fits the per-thread accumulators, B*H and the
// tile count fit their grid dimensions.
void check_limits(const char* op, const AttentionProblem& d) {
  require(d.D <= kMaxHeadDim, op,
          ("head dim " + std::to_string(d.D) + " exceeds the CUDA kernels' maximum of " +
           std::to_string(kMaxHeadDim))
              .c_str());
  require(d.B * d.H <= 0x7FFFFFFF, op, "B * H exceeds one grid dimension");
  require((std::max(d.Tq, d.Tk) + kTileQ - 1) / kTileQ <= 65535, op, "sequence too long for the tile grid");
}

// Odd row stride >= D: column reads of 8 consecutive rows hit distinct banks.
int smem_ld(int64_t D) { return static_cast<int>(D % 2 == 0 ? D + 1 : D); }

size_t forward_smem(int ld) {
  return (static_cast<size_t>(kTileQ + kTileK) * ld + kTileQ * kLdS) * sizeof(float) + kTileK * sizeof(int);
}
size_t dq_smem(int ld) {
  return (static_cast<size_t>(2 * kTileQ + 2 * kTileK) * ld + kTileQ * kLdS + 2 * kTileQ) * sizeof(float) +
         kTileK * sizeof(int);
}
size_t dkdv_smem(int ld) {
  return (static_cast<size_t>(2 * kTileQ + 2 * kTileK) * ld + 2 * kTileQ * kLdS + 2 * kTileQ) * sizeof(float) +
         kTileK * sizeof(int);
}

// Allows `kernel` `bytes` of dynamic shared memory (an opt-in above the
// default 48 KiB), with a clear error where the GPU has less.
template <typename Kernel>
void allow_smem(const CudaDevice& dev, Kernel kernel, size_t bytes, const char* op) {
  constexpr size_t kDefault = size_t{48} << 10;
  if (bytes <= kDefault) return;
  int optin = 0;
  MPB_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev.ordinal()));
  if (bytes > static_cast<size_t>(optin))
    throw DeviceError(std::string(op) + ": needs " + std::to_string(bytes) + " bytes of shared memory per block, " +
                      "the GPU allows " + std::to_string(optin));
  MPB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

unsigned row_warp_grid(const CudaDevice& dev, int64_t rows) {
  const int64_t blocks = (rows + kWarps - 1) / kWarps;
  const int64_t cap = static_cast<int64_t>(dev.sm_count()) * 32;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, cap)));
}

AttnArgs attn_args(const AttentionProblem& d) {
  AttnArgs a;
  a.q = d.q.t.data;
  a.k = d.k.t.data;
  a.v = d.v.t.data;
  a.qt = d.q.t.dtype;
  a.lq = d.q.at, a.lk = d.k.at, a.lv = d.v.at;
  a.key_valid = static_cast<const int32_t*>(d.key_valid.data);
  a.H = d.H;
  a.Tq = d.Tq;
  a.Tk = d.Tk;
  a.D = static_cast<int>(d.D);
  a.ld = smem_ld(d.D);
  a.scale = d.scale;
  a.mask = scalar::attention_mask_rounded(d.q.t.dtype, d.mask_value);  // step 1 of the mask rule, on the host
  a.dropping = d.dropout.p > 0.0f;
  a.drop_threshold = scalar::dropout_threshold(d.dropout.p);
  a.drop_scale = scalar::dropout_scale(d.dropout.p);
  a.drop_seed = d.dropout.seed;
  return a;
}

}  // namespace

void CudaDevice::masked_softmax_forward_impl(const Tensor& probs, const Tensor& scores, const Tensor& key_valid,
                                             float scale, float mask_value) {
  const int64_t Tk = scores.shape[3];
  const int64_t rows_per_b = scores.shape[1] * scores.shape[2];
  const auto* kv = static_cast<const int32_t*>(key_valid.data);
  const int64_t rows = scores.rows();
  if (rows == 0 || Tk == 0) return;
  const float mask = scalar::attention_mask_rounded(scores.dtype, mask_value);
  masked_softmax_kernel<<<row_warp_grid(*this, rows), kThreads, 0, stream()>>>(
      probs.data, probs.dtype, scores.data, scores.dtype, kv, rows, rows_per_b, Tk, scale, mask);
  MPB_CHECK_LAUNCH("masked_softmax_kernel");
}

void CudaDevice::softmax_backward_impl(const Tensor& dscores, const Tensor& probs, const Tensor& dprobs,
                                       float scale) {
  const int64_t rows = probs.rows(), C = probs.cols();
  softmax_backward_kernel<<<row_warp_grid(*this, rows), kThreads, 0, stream()>>>(
      dscores.data, dscores.dtype, probs.data, probs.dtype, dprobs.data, dprobs.dtype, rows, C, scale);
  MPB_CHECK_LAUNCH("softmax_backward_kernel");
}

#ifdef MPB_HAVE_CUDNN_FRONTEND
namespace {

// An operand's element (b, h, t) = (0, 0, 0): where cuDNN's pointer points.
const void* first_element(const AttnOperand& x) {
  return static_cast<const char*>(x.t.data) + static_cast<size_t>(x.at.offset) * dtype_size(x.t.dtype);
}
void* first_element_mut(const AttnOperand& x) { return const_cast<void*>(first_element(x)); }

// cuDNN SDPA dispatch: the plan when cuDNN runs the call, else null (with the
// kernel call's label where cuDNN's failure is the reason). fp16/bf16 only, every operand in q's
// dtype (the graph has one I/O dtype; fp32/TF32 attention stays on the
// hand-written kernel: cuDNN's SDPA has no fp32 path). Every operand's first
// element and its strides 16-byte aligned (cuDNN's vector loads; the device
// allocator's pointers are 256-byte aligned, so only an odd slice, an odd
// head dim or hidden size misses that). Then the shape is cuDNN's to accept or
// refuse (CudnnSdpa::prepare: the graph's validate, heuristics, check_support
// and build_plans in either bias form, cached per shape and GPU for the
// process, a refusal printed once with cuDNN's reasons; a GPU whose cuDNN
// handle cannot be made runs the kernel, said once). Every call cuDNN does not run is counted as a
// "cuda_kernel..." label in the device's attention_impls (core/device_counters.h), so none is silent.
SdpaChoice cudnn_plan(CudnnSdpa& sdpa, const SdpaKey& key, std::initializer_list<const AttnOperand*> operands) {
  if (key.dtype != DType::F16 && key.dtype != DType::BF16) return {};
  const auto aligned = [](int64_t bytes) { return bytes % 16 == 0; };
  for (const AttnOperand* x : operands) {
    const int64_t e = static_cast<int64_t>(dtype_size(x->t.dtype));
    if (x->t.dtype != key.dtype || reinterpret_cast<uintptr_t>(first_element(*x)) % 16 != 0 ||
        !aligned(x->at.batch * e) || !aligned(x->at.head * e) || !aligned(x->at.row * e))
      return {};
  }
  return sdpa.prepare(key);
}

// The plan's workspace in its scratch slot (null when it needs none).
void* cudnn_workspace(CudaDevice& dev, const SdpaPlan& plan) {
  const size_t ws = CudnnSdpa::workspace_bytes(plan);
  return ws > 0 ? dev.scratch(kScratchCudnnWorkspace, ws) : nullptr;
}

// A layout's strides (the key's; the offsets go into the pointers).
HeadLayout strides_of(const HeadLayout& l) { return HeadLayout{0, l.batch, l.head, l.row}; }

SdpaKey sdpa_key(const AttentionProblem& p, const HeadLayout& out, bool backward) {
  SdpaKey key;
  key.dtype = p.q.t.dtype;
  key.B = p.B, key.H = p.H, key.Tq = p.Tq, key.Tk = p.Tk, key.D = p.D;
  key.q_at = strides_of(p.q.at), key.k_at = strides_of(p.k.at), key.v_at = strides_of(p.v.at);
  key.o_at = strides_of(out);
  key.scale = p.scale;
  key.dropout = p.dropout.p;
  key.backward = backward;
  return key;
}

// With dropout, a forward and its backward must draw the same mask, so they
// must run the same implementation: cuDNN (its Philox stream) for both, or
// the hand-written kernels (ops/dropout.h's hash) for both. The forward's
// plan, or null where it runs the kernel: cuDNN runs a dropout forward only
// when it also accepts the backward's graph (else the backward's reason is
// the forward's label).
SdpaChoice forward_plan(CudnnSdpa& sdpa, const AttentionProblem& p, const AttnOperand& out) {
  const SdpaChoice choice = cudnn_plan(sdpa, sdpa_key(p, out.at, false), {&out, &p.q, &p.k, &p.v});
  if (choice.plan && p.dropout.p > 0.0f) {
    const SdpaChoice backward = sdpa.prepare(sdpa_key(p, out.at, true));
    if (!backward.plan) return backward;
  }
  return choice;
}

// A call the kernel runs because of cuDNN says why (null: the device's own
// "cuda_kernel" count).
void note_kernel_reason(CudaDevice& dev, const SdpaChoice& c) {
  if (!c.plan && c.kernel_label) dev.note_attention_impl(c.kernel_label);
}

}  // namespace

// Dropout's Philox seed and offset for cuDNN, written on the device's stream
// (kernel arguments, so no host copy to wait for).
__global__ void attention_seed_kernel(int64_t* seed_offset, int64_t seed) {
  seed_offset[0] = seed;
  seed_offset[1] = 0;
}

static const int64_t* upload_dropout_seed(CudaDevice& dev, const AttentionProblem& p) {
  if (p.dropout.p <= 0.0f) return nullptr;
  auto* so = static_cast<int64_t*>(dev.scratch(kScratchAttnSeed, 2 * sizeof(int64_t)));
  int64_t seed = 0;
  std::memcpy(&seed, &p.dropout.seed, sizeof seed);  // the same 64 bits, as cuDNN's int64
  attention_seed_kernel<<<1, 1, 0, dev.stream()>>>(so, seed);
  MPB_CHECK_LAUNCH("attention_seed_kernel");
  return so;
}

// The bias's B*Tk values in q's dtype from key_valid, into its scratch slot
// (the graph declares them [B,1,1,Tk] or [B,1,Tq,Tk] with stride 0 on Tq:
// the same memory either way, sdpa_policy.h).
static void* build_attention_bias(CudaDevice& dev, const AttentionProblem& p) {
  const DType t = p.q.t.dtype;
  const int64_t n = p.key_valid.numel();
  void* bias = dev.scratch(kScratchAttnBias, static_cast<size_t>(n) * dtype_size(t));
  const float mask = scalar::attention_mask_rounded(t, p.mask_value);  // step 1 of the mask rule
  attention_bias_kernel<<<dev.elementwise_grid(n), kThreads, 0, dev.stream()>>>(
      bias, t, static_cast<const int32_t*>(p.key_valid.data), n, mask);
  MPB_CHECK_LAUNCH("attention_bias_kernel");
  return bias;
}
#endif

void CudaDevice::attention_forward_impl(const AttentionProblem& p, const AttnOperand& out, const Tensor& lse) {
  const char* op = "attention_forward";
#ifdef MPB_HAVE_CUDNN_FRONTEND
  {
    const SdpaChoice choice = forward_plan(*sdpa_, p, out);
    if (SdpaPlan* plan = choice.plan) {
      SdpaForwardArgs a;
      a.out = first_element_mut(out);
      a.lse = static_cast<float*>(lse.data);
      a.q = first_element(p.q), a.k = first_element(p.k), a.v = first_element(p.v);
      a.bias = build_attention_bias(*this, p);
      a.seed_offset = upload_dropout_seed(*this, p);
      sdpa_->forward(*plan, a, cudnn_workspace(*this, *plan));
      note_attention_impl(CudnnSdpa::impl_label(*plan));
      return;
    }
    note_kernel_reason(*this, choice);
  }
#endif
  check_limits(op, p);
  const AttnArgs a = attn_args(p);
  const size_t smem = forward_smem(a.ld);
  allow_smem(*this, attention_forward_kernel, smem, op);
  const dim3 grid(static_cast<unsigned>(p.B * p.H), static_cast<unsigned>((p.Tq + kTileQ - 1) / kTileQ));
  attention_forward_kernel<<<grid, kThreads, smem, stream()>>>(a, out.t.data, out.t.dtype, out.at,
                                                               static_cast<float*>(lse.data));
  MPB_CHECK_LAUNCH("attention_forward_kernel");
}

void CudaDevice::attention_backward_impl(const AttentionProblem& p, const AttnOperand& dq, const AttnOperand& dk,
                                         const AttnOperand& dv, const AttnOperand& dout, const AttnOperand& out,
                                         const Tensor& lse) {
  const char* op = "attention_backward";
#ifdef MPB_HAVE_CUDNN_FRONTEND
  {
    // Independent of the forward's choice: lse means the same on both paths.
    // The graph gives each gradient its operand's strides (SdpaKey).
    const bool same_strides = strides_of(dq.at) == strides_of(p.q.at) && strides_of(dk.at) == strides_of(p.k.at) &&
                              strides_of(dv.at) == strides_of(p.v.at) && strides_of(dout.at) == strides_of(out.at);
    const SdpaChoice choice = same_strides ? cudnn_plan(*sdpa_, sdpa_key(p, out.at, true),
                                                        {&dq, &dk, &dv, &dout, &out, &p.q, &p.k, &p.v})
                                           : SdpaChoice{};
    SdpaPlan* plan = choice.plan;
    // With dropout the forward chose the implementation (forward_plan): a
    // backward that cannot follow it would apply another mask.
    if (p.dropout.p > 0.0f && (forward_plan(*sdpa_, p, out).plan != nullptr) != (plan != nullptr))
      throw DeviceError(std::string(op) + ": with dropout, the forward of this call ran " +
                        (plan ? "the hand-written kernel" : "cuDNN SDPA") + " but the backward's gradients (dtype, " +
                        "strides or alignment) take the other, whose dropout mask differs");
    if (plan) {
      SdpaBackwardArgs a;
      a.dq = first_element_mut(dq), a.dk = first_element_mut(dk), a.dv = first_element_mut(dv);
      a.dout = first_element(dout), a.out = first_element(out);
      a.q = first_element(p.q), a.k = first_element(p.k), a.v = first_element(p.v);
      a.lse = static_cast<const float*>(lse.data);
      a.bias = build_attention_bias(*this, p);
      a.seed_offset = upload_dropout_seed(*this, p);
      sdpa_->backward(*plan, a, cudnn_workspace(*this, *plan));
      note_attention_impl(CudnnSdpa::impl_label(*plan));
      return;
    }
    note_kernel_reason(*this, choice);
  }
#endif
  check_limits(op, p);
  const AttnArgs a = attn_args(p);

  // 1. D_i = rowsum(dO * O) from the stored O.
  const int64_t rows = p.B * p.H * p.Tq;
  auto* di = static_cast<float*>(scratch(kScratchAttention, static_cast<size_t>(rows) * sizeof(float)));
  attention_di_kernel<<<row_warp_grid(*this, rows), kThreads, 0, stream()>>>(
      dout.t.data, dout.t.dtype, dout.at, out.t.data, out.t.dtype, out.at, di, rows, p.H, p.Tq, a.D);
  MPB_CHECK_LAUNCH("attention_di_kernel");
  const AttnGradIn gi{dout.t.data, dout.t.dtype, dout.at, static_cast<const float*>(lse.data), di};

  // 2. dQ over query tiles.
  const size_t smem_q = dq_smem(a.ld);
  allow_smem(*this, attention_dq_kernel, smem_q, op);
  const dim3 grid_q(static_cast<unsigned>(p.B * p.H), static_cast<unsigned>((p.Tq + kTileQ - 1) / kTileQ));
  attention_dq_kernel<<<grid_q, kThreads, smem_q, stream()>>>(a, gi, dq.t.data, dq.t.dtype, dq.at);
  MPB_CHECK_LAUNCH("attention_dq_kernel");

  // 3. dK, dV over key tiles.
  const size_t smem_kv = dkdv_smem(a.ld);
  allow_smem(*this, attention_dkdv_kernel, smem_kv, op);
  const dim3 grid_k(static_cast<unsigned>(p.B * p.H), static_cast<unsigned>((p.Tk + kTileK - 1) / kTileK));
  attention_dkdv_kernel<<<grid_k, kThreads, smem_kv, stream()>>>(a, gi, dk.t.data, dk.t.dtype, dk.at, dv.t.data,
                                                                 dv.t.dtype, dv.at);
  MPB_CHECK_LAUNCH("attention_dkdv_kernel");
}

}  // namespace mpb::cuda
