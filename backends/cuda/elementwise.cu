// Element-wise CUDA kernels. Every element is read and written through
// ops/dtype_io.h (scalar::load_f32/store_f32, or the typed scalar::Elem<T>
// where a kernel is instantiated per dtype) and computed with the scalar
// cores in ops/*.h, the same functions the CPU backend runs, so the CPU tests
// prove this math. The map kernels (fill, cast, scale, activations) move
// eight elements per 16-byte access where every pointer is aligned
// (backends/cuda/vec_io.cuh: the same conversions, so the same bits).
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "ops/activation.h"
#include "backends/cuda/kernel_util.cuh"
#include "ops/dtype_io.h"
#include "backends/cuda/vec_io.cuh"

namespace mpb::cuda {

namespace {

using scalar::load_f32;
using scalar::store_f32;

__global__ void fill_kernel(void* p, DType t, int64_t n, float value, bool vec) {
  const VecSplit v(n, vec);
  for (int64_t g = global_thread(); g < v.groups; g += grid_threads()) {
    float x[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) x[k] = value;
    store8(p, t, g * kVec, x);
  }
  for (int64_t i = v.tail + global_thread(); i < n; i += grid_threads()) store_f32(p, t, i, value);
}

__global__ void cast_kernel(void* dst, DType dt, const void* src, DType st, int64_t n, bool vec) {
  map1(dst, dt, src, st, n, vec, [](float x, int64_t) { return x; });
}

__global__ void scale_kernel(void* p, DType t, int64_t n, float factor, bool vec) {
  map1(p, t, p, t, n, vec, [factor](float x, int64_t) { return x * factor; });
}

// y[r, c] = y[r, c] + bias[c] in fp32, stored in y's dtype: the CPU
// backend's expression (backends/cpu/kernels/elementwise.cpp), for every pair of dtypes.
template <DType T, DType B>
__global__ void add_bias_kernel(void* y, int64_t n, int64_t cols, const void* bias) {
  using EY = scalar::Elem<T>;
  using EB = scalar::Elem<B>;
  // The column advances by a constant per grid stride: no 64-bit division per element.
  const int64_t stride = grid_threads();
  const int64_t step = stride % cols;
  int64_t i = global_thread();
  int64_t c = i % cols;
  for (; i < n; i += stride) {
    EY::store(y, i, EY::load(y, i) + EB::load(bias, c));
    c += step;
    if (c >= cols) c -= cols;
  }
}

__device__ inline float activation(Activation act, float x) {
  return act == Activation::Gelu ? scalar::gelu(x) : scalar::relu(x);
}
__device__ inline float activation_grad(Activation act, float x, float dy) {
  return dy * (act == Activation::Gelu ? scalar::gelu_grad(x) : scalar::relu_grad(x));
}

__global__ void activation_forward_kernel(Activation act, void* out, DType ot, const void* in, DType it, int64_t n,
                                          bool vec) {
  map1(out, ot, in, it, n, vec, [act](float x, int64_t) { return activation(act, x); });
}

__global__ void activation_backward_kernel(Activation act, void* din, DType dt, const void* dout, DType ot,
                                           const void* pre, DType pt, int64_t n, bool vec) {
  map2(din, dt, pre, pt, dout, ot, n, vec, [act](float x, float dy) { return activation_grad(act, x, dy); });
}

// bias_grad, stage 1: block (32 columns x 8 row lanes) sums a chunk of rows
// for 32 adjacent columns (coalesced row reads). Each row lane sums its rows
// in order, then a fixed tree adds the 8 lanes: deterministic.
constexpr int kBgCols = 32;
constexpr int kBgLanes = kThreads / kBgCols;  // 8
constexpr int64_t kBgMinRowsPerChunk = 256;

template <DType T>
__global__ void bias_grad_partial_kernel(const void* dy, int64_t rows, int64_t cols, int64_t rows_per_chunk,
                                         float* partial) {
  using E = scalar::Elem<T>;
  __shared__ float s[kBgLanes][kBgCols + 1];
  const int tx = static_cast<int>(threadIdx.x) % kBgCols;
  const int ty = static_cast<int>(threadIdx.x) / kBgCols;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kBgCols + tx;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  float acc = 0.0f;
  if (c < cols)
    for (int64_t r = r0 + ty; r < r1; r += kBgLanes) acc += E::load(dy, r * cols + c);
  s[ty][tx] = acc;
  __syncthreads();
  for (int h = kBgLanes / 2; h > 0; h >>= 1) {
    if (ty < h) s[ty][tx] += s[ty + h][tx];
    __syncthreads();
  }
  if (ty == 0 && c < cols) partial[static_cast<int64_t>(blockIdx.y) * cols + c] = s[0][tx];
}

// Stage 2: each column adds its chunk partials in chunk order (fp32); then
// db = (accumulate ? db : 0) + sum in fp32, loaded and stored in db's dtype:
// the CPU backend's expression.
template <DType D>
__global__ void bias_grad_finish_kernel(const float* partial, int64_t chunks, int64_t cols, void* db,
                                        bool accumulate) {
  using ED = scalar::Elem<D>;
  for (int64_t c = global_thread(); c < cols; c += grid_threads()) {
    float sum = 0.0f;
    for (int64_t ch = 0; ch < chunks; ++ch) sum += partial[ch * cols + c];
    ED::store(db, c, (accumulate ? ED::load(db, c) : 0.0f) + sum);
  }
}

}  // namespace

void CudaDevice::fill_impl(const Tensor& t, float value) {
  const int64_t n = t.numel();
  if (n == 0) return;
  fill_kernel<<<elementwise_grid(n), kThreads, 0, stream()>>>(t.data, t.dtype, n, value, vec_aligned({t.data}));
  MPB_CHECK_LAUNCH("fill_kernel");
}

void CudaDevice::cast_impl(const Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (dst.dtype == src.dtype) {  // a bit copy (the round trip through fp32 is exact anyway)
    copy(dst, src);
    return;
  }
  cast_kernel<<<elementwise_grid(n), kThreads, 0, stream()>>>(dst.data, dst.dtype, src.data, src.dtype, n,
                                                              vec_aligned({dst.data, src.data}));
  MPB_CHECK_LAUNCH("cast_kernel");
}

void CudaDevice::scale_impl(const Tensor& t, float factor) {
  const int64_t n = t.numel();
  if (n == 0) return;
  scale_kernel<<<elementwise_grid(n), kThreads, 0, stream()>>>(t.data, t.dtype, n, factor, vec_aligned({t.data}));
  MPB_CHECK_LAUNCH("scale_kernel");
}

void CudaDevice::add_bias_impl(const Tensor& y, const Tensor& bias) {
  const int64_t n = y.numel();
  if (n == 0) return;
  const int64_t cols = y.cols();
  const unsigned grid = elementwise_grid(n);
  dispatch_float2(y.dtype, bias.dtype, "add_bias", [&](auto T, auto B) {
    add_bias_kernel<decltype(T)::value, decltype(B)::value><<<grid, kThreads, 0, stream()>>>(y.data, n, cols,
                                                                                           bias.data);
  });
  MPB_CHECK_LAUNCH("add_bias_kernel");
}

void CudaDevice::activation_forward_impl(Activation act, const Tensor& out, const Tensor& in) {
  const int64_t n = in.numel();
  if (n == 0) return;
  activation_forward_kernel<<<elementwise_grid(n), kThreads, 0, stream()>>>(act, out.data, out.dtype, in.data,
                                                                            in.dtype, n, vec_aligned({out.data, in.data}));
  MPB_CHECK_LAUNCH("activation_forward_kernel");
}

void CudaDevice::activation_backward_impl(Activation act, const Tensor& din, const Tensor& dout,
                                          const Tensor& pre_act) {
  const int64_t n = din.numel();
  if (n == 0) return;
  activation_backward_kernel<<<elementwise_grid(n), kThreads, 0, stream()>>>(
      act, din.data, din.dtype, dout.data, dout.dtype, pre_act.data, pre_act.dtype, n,
      vec_aligned({din.data, dout.data, pre_act.data}));
  MPB_CHECK_LAUNCH("activation_backward_kernel");
}

void CudaDevice::bias_grad_impl(const Tensor& db, const Tensor& dy, GradMode mode) {
  const int64_t rows = dy.rows(), cols = dy.cols();
  if (cols == 0) return;
  if (rows == 0) {  // an empty sum: overwrite with 0, accumulate adds nothing
    if (mode == GradMode::Overwrite) fill(db, 0.0f);
    return;
  }
  // Chunks of rows: fixed by the shape alone (gridDim.y <= 65535).
  const int64_t rows_per_chunk = std::max<int64_t>(kBgMinRowsPerChunk, (rows + 65534) / 65535);
  const int64_t chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  const int64_t col_blocks = (cols + kBgCols - 1) / kBgCols;
  require(col_blocks <= 0x7FFFFFFF, "bias_grad", "too many columns");  // backend limit: gridDim.x
  auto* partial = static_cast<float*>(scratch(kScratchReduce, static_cast<size_t>(chunks * cols) * sizeof(float)));
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(chunks));
  dispatch_float(dy.dtype, "bias_grad", [&](auto T) {
    bias_grad_partial_kernel<decltype(T)::value><<<grid, kThreads, 0, stream()>>>(dy.data, rows, cols,
                                                                                  rows_per_chunk, partial);
  });
  MPB_CHECK_LAUNCH("bias_grad_partial_kernel");
  const unsigned finish_grid = elementwise_grid(cols);
  const bool accumulate = mode == GradMode::Accumulate;
  dispatch_float(db.dtype, "bias_grad", [&](auto D) {
    bias_grad_finish_kernel<decltype(D)::value><<<finish_grid, kThreads, 0, stream()>>>(partial, chunks, cols,
                                                                                        db.data, accumulate);
  });
  MPB_CHECK_LAUNCH("bias_grad_finish_kernel");
}

}  // namespace mpb::cuda
