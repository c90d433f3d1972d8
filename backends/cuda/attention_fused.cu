// Fused attention on the GPU by hand-written kernels (FlashAttention-2
// structure) that never materialise the [T,T] matrix: the path for fp32/TF32
// attention, for every call cuDNN SDPA does not run (attention.cu decides),
// and for builds without cudnn_frontend. The mask rule, the online softmax
// and the backward formulas are the shared scalar cores of ops/attention.h,
// exactly as backends/cpu/kernels/attention.cpp uses them. Arguments arrive
// checked (core/device.h); this file checks only its own limits
// (attention_tiles.h, proven on the CPU).
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
#include "backends/cuda/attention_fused.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "backends/cuda/attention_tiles.h"
#include "backends/cuda/attention_warp.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/kernel_util.cuh"
#include "core/attention_layout.h"
#include "ops/attention.h"
#include "ops/dropout.h"
#include "ops/dtype_io.h"

namespace mpb::cuda {

namespace {

using attention_warp::lane_id;
using attention_warp::row_max;
using attention_warp::row_sum;
using attention_warp::row_warp_grid;
using attention_warp::tile_rows;
using attention_warp::warp_global;
using attention_warp::warp_sum;
using attention_warp::warps_in_grid;
using scalar::load_f32;
using scalar::store_f32;

static_assert(kTileQ * kRowThreads == kThreads, "one tile row per kRowThreads threads");

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

// ---- host side ---------------------------------------------------------------------------------
void check_limits(const char* op, const AttentionProblem& d) {
  const std::string error = fused_attention_limit_error(d.D, d.B * d.H, d.Tq, d.Tk);
  require(error.empty(), op, error.c_str());
}

// Allows `kernel` `bytes` of dynamic shared memory (an opt-in above the
// default 48 KiB), with a clear error where the GPU has less.
template <typename Kernel>
void allow_smem(const CudaDevice& dev, Kernel kernel, size_t bytes, const char* op) {
  if (bytes <= kDefaultDynamicSmem) return;
  int optin = 0;
  MPB_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev.ordinal()));
  if (bytes > static_cast<size_t>(optin))
    throw DeviceError(std::string(op) + ": needs " + std::to_string(bytes) + " bytes of shared memory per block, " +
                      "the GPU allows " + std::to_string(optin));
  MPB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
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

void fused_attention_forward(CudaDevice& dev, const AttentionProblem& p, const AttnOperand& out, const Tensor& lse) {
  const char* op = "attention_forward";
  check_limits(op, p);
  const AttnArgs a = attn_args(p);
  const size_t smem = forward_smem(a.ld);
  allow_smem(dev, attention_forward_kernel, smem, op);
  const dim3 grid(static_cast<unsigned>(p.B * p.H), static_cast<unsigned>((p.Tq + kTileQ - 1) / kTileQ));
  attention_forward_kernel<<<grid, kThreads, smem, dev.stream()>>>(a, out.t.data, out.t.dtype, out.at,
                                                               static_cast<float*>(lse.data));
  MPB_CHECK_LAUNCH("attention_forward_kernel");
}

void fused_attention_backward(CudaDevice& dev, const AttentionProblem& p, const AttnOperand& dq, const AttnOperand& dk,
                              const AttnOperand& dv, const AttnOperand& dout, const AttnOperand& out,
                              const Tensor& lse) {
  const char* op = "attention_backward";
  check_limits(op, p);
  const AttnArgs a = attn_args(p);

  // 1. D_i = rowsum(dO * O) from the stored O.
  const int64_t rows = p.B * p.H * p.Tq;
  auto* di = static_cast<float*>(dev.scratch(kScratchAttention, static_cast<size_t>(rows) * sizeof(float)));
  attention_di_kernel<<<row_warp_grid(dev, rows), kThreads, 0, dev.stream()>>>(
      dout.t.data, dout.t.dtype, dout.at, out.t.data, out.t.dtype, out.at, di, rows, p.H, p.Tq, a.D);
  MPB_CHECK_LAUNCH("attention_di_kernel");
  const AttnGradIn gi{dout.t.data, dout.t.dtype, dout.at, static_cast<const float*>(lse.data), di};

  // 2. dQ over query tiles.
  const size_t smem_q = dq_smem(a.ld);
  allow_smem(dev, attention_dq_kernel, smem_q, op);
  const dim3 grid_q(static_cast<unsigned>(p.B * p.H), static_cast<unsigned>((p.Tq + kTileQ - 1) / kTileQ));
  attention_dq_kernel<<<grid_q, kThreads, smem_q, dev.stream()>>>(a, gi, dq.t.data, dq.t.dtype, dq.at);
  MPB_CHECK_LAUNCH("attention_dq_kernel");

  // 3. dK, dV over key tiles.
  const size_t smem_kv = dkdv_smem(a.ld);
  allow_smem(dev, attention_dkdv_kernel, smem_kv, op);
  const dim3 grid_k(static_cast<unsigned>(p.B * p.H), static_cast<unsigned>((p.Tk + kTileK - 1) / kTileK));
  attention_dkdv_kernel<<<grid_k, kThreads, smem_kv, dev.stream()>>>(a, gi, dk.t.data, dk.t.dtype, dk.at, dv.t.data,
                                                                 dv.t.dtype, dv.at);
  MPB_CHECK_LAUNCH("attention_dkdv_kernel");
}

}  // namespace mpb::cuda
