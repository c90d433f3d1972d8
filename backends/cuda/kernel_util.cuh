// Helpers shared by the CUDA kernels: grid-stride indexing and deterministic
// block reductions. Every kernel in the backend runs kThreads-thread blocks.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "backends/cuda/cuda_device_impl.h"
#include "core/dtype.h"

namespace mpb::cuda {

static_assert(kThreads % 32 == 0 && kThreads <= 1024, "block size must be whole warps");
constexpr int kWarps = kThreads / 32;

__device__ inline int64_t global_thread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
// fmaxf ignores NaN operands, like std::fmax in the CPU backend.
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Reduces `v` over the block (blockDim.x == kThreads) and returns the result
// to every thread. The combination order is fixed (a shuffle tree inside each
// warp, then the same tree over the warp results), so the result is
// bit-reproducible run to run. `smem` must hold kWarps values; it is free for
// reuse when this returns.
template <typename T, typename Op>
__device__ T block_reduce(T v, T identity, Op op, T* smem) {
  const unsigned lane = threadIdx.x & 31u;
  const unsigned warp = threadIdx.x >> 5;
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, off));
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<unsigned>(kWarps) ? smem[lane] : identity;
    for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, off));
    if (lane == 0) smem[0] = v;
  }
  __syncthreads();
  const T result = smem[0];
  __syncthreads();
  return result;
}

// Blocks for a reduction over n elements. Depends on n only (not on the GPU),
// so a reduction's summation order, and hence its result, is the same on
// every device.
inline unsigned reduction_grid(int64_t n, int64_t per_block, unsigned max_blocks) {
  const int64_t blocks = (n + per_block - 1) / per_block;
  if (blocks < 1) return 1;
  return blocks > static_cast<int64_t>(max_blocks) ? max_blocks : static_cast<unsigned>(blocks);
}

// Host-side dtype dispatch, as backends/cpu/kernels/dispatch.h does for the CPU loops:
// calls f with the float dtype as a compile-time constant, so a kernel is
// instantiated per storage type and reads/writes through scalar::Elem<T>
// (ops/dtype_io.h) without a per-element switch. Non-float dtypes throw
// std::invalid_argument naming the op (the CPU backend throws the same type).
template <DType T>
using DTypeTag = std::integral_constant<DType, T>;

template <typename F>
void dispatch_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::F32: f(DTypeTag<DType::F32>{}); return;
    case DType::F16: f(DTypeTag<DType::F16>{}); return;
    case DType::BF16: f(DTypeTag<DType::BF16>{}); return;
    default: throw std::invalid_argument(std::string(op) + ": expected a float tensor, got " + dtype_name(t));
  }
}

// Two dtypes (for example a tensor and its bias, or a parameter and its gradient).
template <typename F>
void dispatch_float2(DType a, DType b, const char* op, F&& f) {
  dispatch_float(a, op, [&](auto A) { dispatch_float(b, op, [&](auto B) { f(A, B); }); });
}

// Mark a device-detected error for CudaDevice::sync_and_check (a plain store
// into mapped host memory; all writers store the same value).
__device__ inline void raise_flag(int* flags, int which) {
  *static_cast<volatile int*>(flags + which) = 1;
  __threadfence_system();
}

}  // namespace mpb::cuda
