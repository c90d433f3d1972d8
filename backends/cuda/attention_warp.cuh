// Warp-level helpers of the attention kernels (attention_softmax.cu,
// attention_fused.cu): lane and warp indices, the warp-wide and tile-row
// fp32 reductions in a fixed order (so results are run-to-run reproducible),
// and the grid of the one-warp-per-row kernels.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backends/cuda/attention_tiles.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/kernel_util.cuh"

namespace mpb::cuda::attention_warp {

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

// Blocks for a one-warp-per-row kernel over `rows` rows (grid-stride beyond
// 32 blocks per SM).
inline unsigned row_warp_grid(const CudaDevice& dev, int64_t rows) {
  const int64_t blocks = (rows + kWarps - 1) / kWarps;
  const int64_t cap = static_cast<int64_t>(dev.sm_count()) * 32;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, cap)));
}

}  // namespace mpb::cuda::attention_warp
