// The tile geometry of the hand-written fused attention kernels
// (attention_fused.cu) and the host decisions that follow from it: the
// backend's shape limits, the shared-memory row stride and each kernel's
// dynamic shared memory. Pure host code (no CUDA headers), so
// tests/backends/cuda/test_attention_tiles.cpp proves them on the CPU: a
// wrong byte count shows on a GPU only as a launch failure or, worse, as a
// kernel reading past its shared memory.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

namespace mpb::cuda {

constexpr int kTileQ = 32;
constexpr int kTileK = 32;
constexpr int kRowThreads = 8;  // threads per tile row (consecutive lanes)
constexpr int kMaxHeadDim = 128;
constexpr int kDimsPerThread = kMaxHeadDim / kRowThreads;  // accumulator columns per thread
constexpr int kColsPerThread = kTileK / kRowThreads;       // S-tile columns per thread
constexpr int kLdS = kTileK + 1;                           // row stride of the P / dS tiles
static_assert(kTileK == kTileQ, "the dK/dV kernel maps keys onto the tile rows");
static_assert(32 % kRowThreads == 0, "a row's threads must lie in one warp");

// Backend limits of the fused kernels (the shapes themselves were checked by
// the public ops): the head dim fits the per-thread accumulators, B*H and the
// tile count fit their grid dimensions (x: 2^31 - 1, y: 65535). Empty when
// the shape fits, else what exceeds which limit.
inline std::string fused_attention_limit_error(int64_t D, int64_t BH, int64_t Tq, int64_t Tk) {
  if (D > kMaxHeadDim)
    return "head dim " + std::to_string(D) + " exceeds the CUDA kernels' maximum of " + std::to_string(kMaxHeadDim);
  if (BH > 0x7FFFFFFF) return "B * H exceeds one grid dimension";
  if ((std::max(Tq, Tk) + kTileQ - 1) / kTileQ > 65535) return "sequence too long for the tile grid";
  return {};
}

// Odd row stride >= D: column reads of 8 consecutive rows hit distinct banks.
inline int smem_ld(int64_t D) { return static_cast<int>(D % 2 == 0 ? D + 1 : D); }

// Dynamic shared memory of each kernel for row stride ld (the layouts are
// written out at the top of each kernel in attention_fused.cu).
//   forward: Q and K/V tiles, the P tile, the tile's key_valid.
inline size_t forward_smem(int ld) {
  return (static_cast<size_t>(kTileQ + kTileK) * ld + kTileQ * kLdS) * sizeof(float) + kTileK * sizeof(int);
}
//   dQ: Q, dO, K, V tiles, the dS tile, lse and D_i, key_valid.
inline size_t dq_smem(int ld) {
  return (static_cast<size_t>(2 * kTileQ + 2 * kTileK) * ld + kTileQ * kLdS + 2 * kTileQ) * sizeof(float) +
         kTileK * sizeof(int);
}
//   dK/dV: K, V, Q, dO tiles, the P and dS tiles, lse and D_i, key_valid.
inline size_t dkdv_smem(int ld) {
  return (static_cast<size_t>(2 * kTileQ + 2 * kTileK) * ld + 2 * kTileQ * kLdS + 2 * kTileQ) * sizeof(float) +
         kTileK * sizeof(int);
}

// Above this a kernel must opt in (cudaFuncAttributeMaxDynamicSharedMemorySize).
constexpr size_t kDefaultDynamicSmem = size_t{48} << 10;

}  // namespace mpb::cuda
