// The CUDA transformer ops that are not attention or embeddings: add,
// LayerNorm (forward, residual + forward, backward), the QKV/head layout
// shuffles and dropout. The per-element math is the CPU backend's
// (backends/cpu/kernels/transformer.cpp) through the shared scalar cores in
// ops/layernorm.h and ops/dropout.h. Arguments arrive checked (core/device.h).
//
// What agrees with the CPU bit for bit: add, the head shuffles and dropout
// (per-element math, no sums). LayerNorm's row sums (mean, variance, and the
// backward's two row sums) are fp32 reductions in a different order than the
// CPU's vectorised loops, so those results agree to fp32-summation bounds.
// dgamma/dbeta are reduced deterministically as on the CPU: partial sums per
// fixed chunk of kLnGradChunk rows (rows in order inside a chunk), then the
// chunk partials in chunk order: no atomics, the same bits on every run and
// every GPU.
//
// Kernels read and write every float dtype through scalar::load_f32 /
// store_f32 (a switch on a uniform runtime dtype), which keeps one
// instantiation per kernel: these ops are memory-bound shuffles and row
// reductions, where the switch costs nothing measurable.
#include <algorithm>
#include <cmath>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/kernel_util.cuh"
#include "ops/dropout.h"
#include "ops/dtype_io.h"
#include "backends/cuda/vec_io.cuh"
#include "ops/layernorm.h"

namespace mpb::cuda {

namespace {

using scalar::load_f32;
using scalar::store_f32;

using scalar::kLnGradChunk;  // rows per partial dgamma/dbeta sum, the CPU's (ops/layernorm.h)

// Sum over the 32 lanes of a warp by a butterfly (xor) tree: a fixed order,
// and every lane ends with the same bits (each step adds the same two values,
// and fp32 addition is commutative).
__device__ inline float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ inline unsigned lane_id() { return threadIdx.x & 31u; }
__device__ inline int64_t warp_global() { return (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; }
__device__ inline int64_t warps_in_grid() { return (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5; }

// ---- add ------------------------------------------------------------------------------
// out = a + b in fp32, rounded to out's dtype: the CPU's expression.
// 16-byte accesses where every pointer is aligned (backends/cuda/vec_io.cuh).
__global__ void add_kernel(void* out, DType ot, const void* a, DType at, const void* b, DType bt, int64_t n,
                           bool vec) {
  map2(out, ot, a, at, b, bt, n, vec, [](float x, float y) { return x + y; });
}

// ---- LayerNorm ------------------------------------------------------------------------
struct LnParams {
  const void* gamma;
  DType gt;
  const void* beta;
  DType bt;
  float eps;
};

// LayerNorm of row r (cols C) of x into out by one warp; mean and rstd saved.
// Two passes for the statistics (ops/layernorm.h), a third for the output.
// Each lane reads and writes the same columns in every pass, so out may alias x.
__device__ void layernorm_row(void* out, DType ot, const void* x, DType xt, const LnParams& p, float* mean,
                              float* rstd, int64_t r, int64_t C) {
  const unsigned lane = lane_id();
  const int64_t base = r * C;
  float s = 0.0f;
  for (int64_t c = lane; c < C; c += 32) s += load_f32(x, xt, base + c);
  const float mu = scalar::layernorm_mean(warp_sum(s), C);
  float ss = 0.0f;
  for (int64_t c = lane; c < C; c += 32) {
    const float d = load_f32(x, xt, base + c) - mu;
    ss += d * d;
  }
  const float rs = scalar::layernorm_rstd(warp_sum(ss), C, p.eps);
  for (int64_t c = lane; c < C; c += 32)
    store_f32(out, ot, base + c,
              scalar::layernorm_out(load_f32(x, xt, base + c), mu, rs, load_f32(p.gamma, p.gt, c),
                                    load_f32(p.beta, p.bt, c)));
  if (lane == 0) {
    mean[r] = mu;
    rstd[r] = rs;
  }
}

// One warp per row (grid-stride over rows).
__global__ void layernorm_forward_kernel(void* out, DType ot, const void* x, DType xt, LnParams p, float* mean,
                                         float* rstd, int64_t rows, int64_t C) {
  for (int64_t r = warp_global(); r < rows; r += warps_in_grid()) layernorm_row(out, ot, x, xt, p, mean, rstd, r, C);
}

// sum = a + b (stored, rounded to sum's dtype), then the LayerNorm of the
// stored row: what add() followed by layernorm_forward() computes, bit for bit.
__global__ void residual_layernorm_kernel(void* out, DType ot, void* sum, DType st, const void* a, DType at,
                                          const void* b, DType bt, LnParams p, float* mean, float* rstd,
                                          int64_t rows, int64_t C) {
  for (int64_t r = warp_global(); r < rows; r += warps_in_grid()) {
    const int64_t base = r * C;
    for (int64_t c = lane_id(); c < C; c += 32)
      store_f32(sum, st, base + c, load_f32(a, at, base + c) + load_f32(b, bt, base + c));
    __syncwarp();  // (each lane re-reads only what it wrote; the fence makes that explicit)
    layernorm_row(out, ot, sum, st, p, mean, rstd, r, C);
  }
}

struct LnBackwardArgs {
  void* dx;
  DType dxt;
  const void* dy;
  DType dyt;
  const void* x;
  DType xt;
  const float* mean;
  const float* rstd;
  const void* gamma;
  DType gt;
  int64_t rows, C;
  bool accumulate;
  float* part_g;  // [chunks, C]
  float* part_b;
};

// Two kernels, so that each has many blocks (one block per 32-row chunk for
// both passes gave 128 blocks at BERT-base's 4096 rows, under one per SM of
// an H100); the second starts after the first has read dout, so dx may alias
// it. Every value is computed as before: the same bits.
// Pass 1: each chunk's partial dgamma and dbeta. Block (chunk, column tile),
// threads over columns, the chunk's rows in order (the CPU's per-chunk sums).
__global__ void layernorm_param_partials_kernel(LnBackwardArgs a) {
  const int64_t chunk = blockIdx.x;
  const int64_t r0 = chunk * kLnGradChunk;
  const int64_t r1 = r0 + kLnGradChunk < a.rows ? r0 + kLnGradChunk : a.rows;
  const int64_t C = a.C;
  for (int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; c < C;
       c += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    float pg = 0.0f, pb = 0.0f;
    for (int64_t r = r0; r < r1; ++r) {
      const float dy = load_f32(a.dy, a.dyt, r * C + c);
      const float xh = scalar::layernorm_xhat(load_f32(a.x, a.xt, r * C + c), a.mean[r], a.rstd[r]);
      pg += dy * xh;
      pb += dy;
    }
    a.part_g[chunk * C + c] = pg;
    a.part_b[chunk * C + c] = pb;
  }
}

// Pass 2: dx, one warp per row.
__global__ void layernorm_dx_kernel(LnBackwardArgs a) {
  const int64_t C = a.C;
  const unsigned lane = lane_id();
  for (int64_t r = warp_global(); r < a.rows; r += warps_in_grid()) {
    const int64_t base = r * C;
    const float m = a.mean[r], s = a.rstd[r];
    float sg = 0.0f, sgx = 0.0f;
    for (int64_t c = lane; c < C; c += 32) {
      const float xh = scalar::layernorm_xhat(load_f32(a.x, a.xt, base + c), m, s);
      const float g = load_f32(a.dy, a.dyt, base + c) * load_f32(a.gamma, a.gt, c);
      sg += g;
      sgx += g * xh;
    }
    const float mean_g = scalar::layernorm_mean(warp_sum(sg), C);
    const float mean_gx = scalar::layernorm_mean(warp_sum(sgx), C);
    for (int64_t c = lane; c < C; c += 32) {
      const float dy = load_f32(a.dy, a.dyt, base + c);
      const float xh = scalar::layernorm_xhat(load_f32(a.x, a.xt, base + c), m, s);
      const float d = scalar::layernorm_dx(dy * load_f32(a.gamma, a.gt, c), xh, mean_g, mean_gx, s);
      store_f32(a.dx, a.dxt, base + c, a.accumulate ? load_f32(a.dx, a.dxt, base + c) + d : d);
    }
  }
}

// dgamma[c] = (accumulate ? dgamma[c] : 0) + sum over chunks (in order) of the
// partials; the same for dbeta. The CPU's expression.
__global__ void layernorm_param_grad_kernel(const float* part_g, const float* part_b, int64_t chunks, int64_t C,
                                            void* dgamma, DType dgt, void* dbeta, DType dbt, bool accumulate) {
  for (int64_t c = global_thread(); c < C; c += grid_threads()) {
    float sg = 0.0f, sb = 0.0f;
    for (int64_t ch = 0; ch < chunks; ++ch) {
      sg += part_g[ch * C + c];
      sb += part_b[ch * C + c];
    }
    store_f32(dgamma, dgt, c, (accumulate ? load_f32(dgamma, dgt, c) : 0.0f) + sg);
    store_f32(dbeta, dbt, c, (accumulate ? load_f32(dbeta, dbt, c) : 0.0f) + sb);
  }
}

// ---- head layouts ----------------------------------------------------------------------
// Copies between the packed layout [B, T, parts, H, D] and `parts` per-head
// tensors [B, H, T, D] (heads[part]); to_heads picks the direction. One thread
// per packed element (coalesced on the packed side, D-element runs on the other).
struct HeadPtrs {
  void* p[3];
};

__global__ void shuffle_heads_kernel(void* packed, DType pt, HeadPtrs heads, DType ht, int64_t T, int64_t H,
                                     int64_t D, int parts, bool to_heads, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t e = i % D;
    const int64_t rest = i / D;
    const int64_t h = rest % H;
    const int64_t rest2 = rest / H;
    const int part = static_cast<int>(rest2 % parts);
    const int64_t bt = rest2 / parts;
    const int64_t b = bt / T, t = bt - b * T;
    const int64_t hi = ((b * H + h) * T + t) * D + e;
    if (to_heads)
      store_f32(heads.p[part], ht, hi, load_f32(packed, pt, i));
    else
      store_f32(packed, pt, i, load_f32(heads.p[part], ht, hi));
  }
}

struct HeadDims {
  int64_t B, H, T, D;
};

// [B,H,T,D] as the shuffle sees it (the public ops checked the packed shapes).
HeadDims head_dims(const Tensor& heads) {
  return HeadDims{heads.shape[0], heads.shape[1], heads.shape[2], heads.shape[3]};
}

// ---- dropout ------------------------------------------------------------------------------
// Element i (the flat index, as on the CPU) is kept iff dropout_bits(seed, i)
// >= threshold; threshold and scale come from the host (ops/dropout.h), the
// same numbers the CPU computes.
// 16-byte accesses where both pointers are aligned (backends/cuda/vec_io.cuh).
__global__ void dropout_kernel(void* out, DType ot, const void* in, DType it, int64_t n, uint64_t seed,
                               uint32_t threshold, float scale, bool vec) {
  map1(out, ot, in, it, n, vec, [=](float x, int64_t i) {
    return scalar::dropout_apply(x, scalar::dropout_bits(seed, static_cast<uint64_t>(i)), threshold, scale);
  });
}

// Grid for one warp per row: enough blocks for every row, capped (grid-stride beyond).
unsigned row_warp_grid(const CudaDevice& dev, int64_t rows) {
  const int64_t blocks = (rows + kWarps - 1) / kWarps;
  const int64_t cap = static_cast<int64_t>(dev.sm_count()) * 32;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, cap)));
}

}  // namespace

void CudaDevice::add_impl(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t n = out.numel();
  if (n == 0) return;
  add_kernel<<<elementwise_grid(n), kThreads, 0, stream()>>>(out.data, out.dtype, a.data, a.dtype, b.data, b.dtype,
                                                             n, vec_aligned({out.data, a.data, b.data}));
  MPB_CHECK_LAUNCH("add_kernel");
}

void CudaDevice::layernorm_forward_impl(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                                        const Tensor& gamma, const Tensor& beta, float eps) {
  const LnParams p{gamma.data, gamma.dtype, beta.data, beta.dtype, eps};
  const int64_t rows = x.rows(), C = x.cols();
  layernorm_forward_kernel<<<row_warp_grid(*this, rows), kThreads, 0, stream()>>>(
      out.data, out.dtype, x.data, x.dtype, p, static_cast<float*>(mean.data), static_cast<float*>(rstd.data), rows,
      C);
  MPB_CHECK_LAUNCH("layernorm_forward_kernel");
}

void CudaDevice::residual_layernorm_forward_impl(const Tensor& out, const Tensor& sum, const Tensor& mean,
                                                 const Tensor& rstd, const Tensor& a, const Tensor& b,
                                                 const Tensor& gamma, const Tensor& beta, float eps) {
  const LnParams p{gamma.data, gamma.dtype, beta.data, beta.dtype, eps};
  const int64_t rows = sum.rows(), C = sum.cols();
  residual_layernorm_kernel<<<row_warp_grid(*this, rows), kThreads, 0, stream()>>>(
      out.data, out.dtype, sum.data, sum.dtype, a.data, a.dtype, b.data, b.dtype, p, static_cast<float*>(mean.data),
      static_cast<float*>(rstd.data), rows, C);
  MPB_CHECK_LAUNCH("residual_layernorm_kernel");
}

void CudaDevice::layernorm_backward_impl(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                                         const Tensor& dout, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                         const Tensor& gamma, GradMode dx_mode, GradMode param_mode) {
  const int64_t rows = x.rows(), C = x.cols();
  const int64_t chunks = (rows + kLnGradChunk - 1) / kLnGradChunk;
  // Backend limit: one block row per chunk of rows (gridDim.x).
  require(chunks <= 0x7FFFFFFF, "layernorm_backward", "too many rows for one grid");
  const int64_t column_tiles = std::min<int64_t>((C + kThreads - 1) / kThreads, 65535);  // gridDim.y
  auto* part = static_cast<float*>(scratch(kScratchLayerNorm, static_cast<size_t>(2 * chunks * C) * sizeof(float)));
  LnBackwardArgs a{dx.data,
                   dx.dtype,
                   dout.data,
                   dout.dtype,
                   x.data,
                   x.dtype,
                   static_cast<const float*>(mean.data),
                   static_cast<const float*>(rstd.data),
                   gamma.data,
                   gamma.dtype,
                   rows,
                   C,
                   dx_mode == GradMode::Accumulate,
                   part,
                   part + chunks * C};
  const dim3 partials_grid(static_cast<unsigned>(chunks), static_cast<unsigned>(column_tiles));
  layernorm_param_partials_kernel<<<partials_grid, kThreads, 0, stream()>>>(a);
  MPB_CHECK_LAUNCH("layernorm_param_partials_kernel");
  layernorm_dx_kernel<<<row_warp_grid(*this, rows), kThreads, 0, stream()>>>(a);
  MPB_CHECK_LAUNCH("layernorm_dx_kernel");
  layernorm_param_grad_kernel<<<elementwise_grid(C), kThreads, 0, stream()>>>(
      a.part_g, a.part_b, chunks, C, dgamma.data, dgamma.dtype, dbeta.data, dbeta.dtype,
      param_mode == GradMode::Accumulate);
  MPB_CHECK_LAUNCH("layernorm_param_grad_kernel");
}

namespace {

// Launches the shuffle between `packed` and up to three per-head tensors.
void shuffle_heads(CudaDevice& dev, const Tensor& packed, const Tensor* heads, const HeadDims& d, int parts,
                   bool to_heads) {
  const int64_t n = packed.numel();
  if (n == 0) return;
  HeadPtrs hp{{heads[0].data, parts > 1 ? heads[1].data : nullptr, parts > 2 ? heads[2].data : nullptr}};
  shuffle_heads_kernel<<<dev.elementwise_grid(n), kThreads, 0, dev.stream()>>>(
      packed.data, packed.dtype, hp, heads[0].dtype, d.T, d.H, d.D, parts, to_heads, n);
  MPB_CHECK_LAUNCH("shuffle_heads_kernel");
}

}  // namespace

void CudaDevice::split_heads_impl(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv) {
  const HeadDims d = head_dims(q);
  const Tensor heads[3] = {q, k, v};
  shuffle_heads(*this, qkv, heads, d, 3, true);
}

void CudaDevice::merge_qkv_grads_impl(const Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const HeadDims d = head_dims(dq);
  const Tensor heads[3] = {dq, dk, dv};
  shuffle_heads(*this, dqkv, heads, d, 3, false);
}

void CudaDevice::merge_heads_impl(const Tensor& out, const Tensor& in) {
  const HeadDims d = head_dims(in);
  shuffle_heads(*this, out, &in, d, 1, false);
}

void CudaDevice::split_heads_grad_impl(const Tensor& din, const Tensor& dout) {
  const HeadDims d = head_dims(din);
  shuffle_heads(*this, dout, &din, d, 1, true);
}

void CudaDevice::dropout_impl(const Tensor& out, const Tensor& in, float p, uint64_t seed) {
  const int64_t n = in.numel();
  if (n == 0) return;
  if (p == 0.0f) {  // identity (a cast when the dtypes differ), as on the CPU
    if (out.data != in.data) cast(out, in);
    return;
  }
  const uint32_t threshold = scalar::dropout_threshold(p);
  const float sc = scalar::dropout_scale(p);
  dropout_kernel<<<elementwise_grid(n), kThreads, 0, stream()>>>(out.data, out.dtype, in.data, in.dtype, n, seed,
                                                                 threshold, sc, vec_aligned({out.data, in.data}));
  MPB_CHECK_LAUNCH("dropout_kernel");
}

}  // namespace mpb::cuda
