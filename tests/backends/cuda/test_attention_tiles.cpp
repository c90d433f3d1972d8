// The host decisions of the CUDA backend's hand-written fused attention
// (backends/cuda/attention_tiles.h): the shape limits it refuses with a clear
// error, the odd shared-memory row stride, and each kernel's dynamic shared
// memory (what the launch asks for and the opt-in is sized by). Runs on the
// CPU; a byte count that is too small shows on a GPU only as a kernel reading
// past its shared memory.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/cuda/attention_tiles.h"

namespace {

using mpb::cuda::dkdv_smem;
using mpb::cuda::dq_smem;
using mpb::cuda::forward_smem;
using mpb::cuda::fused_attention_limit_error;
using mpb::cuda::smem_ld;

// The reference: the buffers each kernel carves out of its dynamic shared
// memory, counted one by one from the kernels' layouts (attention_fused.cu):
// a [32][ld] float tile per Q, K, V, dO; a [32][33] float tile per P, dS; 32
// floats per lse, D_i; 32 ints of key_valid.
size_t tiles(int n_row_tiles, int ld, int n_prob_tiles, int n_row_vectors) {
  return n_row_tiles * 32 * ld * sizeof(float) + n_prob_tiles * 32 * 33 * sizeof(float) +
         n_row_vectors * 32 * sizeof(float) + 32 * sizeof(int32_t);
}

TEST(AttentionTiles, SharedMemoryRowStrideIsOddAndHoldsTheHeadDim) {
  for (int64_t D = 1; D <= mpb::cuda::kMaxHeadDim; ++D) {
    const int ld = smem_ld(D);
    ASSERT_EQ(ld % 2, 1) << D;  // odd: column reads of consecutive rows hit distinct banks
    ASSERT_GE(ld, D) << D;
    ASSERT_LE(ld, D + 1) << D;
  }
}

TEST(AttentionTiles, EachKernelsSharedMemoryIsItsBuffers) {
  for (int64_t D : {1, 16, 31, 64, 80, 96, 128}) {
    const int ld = smem_ld(D);
    EXPECT_EQ(forward_smem(ld), tiles(2, ld, 1, 0)) << D;  // Q, K/V; P
    EXPECT_EQ(dq_smem(ld), tiles(4, ld, 1, 2)) << D;       // Q, dO, K, V; dS; lse, D_i
    EXPECT_EQ(dkdv_smem(ld), tiles(4, ld, 2, 2)) << D;     // K, V, Q, dO; P, dS; lse, D_i
  }
}

// ARCHITECTURE.md and attention_fused.cu: at D = 128 the dK/dV kernel needs
// 73 KiB, above the 48 KiB default (so it opts in) and below the 99 KiB
// opt-in limit of sm_86/sm_89, the smallest of the targeted GPUs.
TEST(AttentionTiles, HeadDim128FitsEveryTargetedGpuAfterOptIn) {
  const int ld = smem_ld(128);
  EXPECT_EQ(dkdv_smem(ld), size_t{74880});  // 73.1 KiB
  EXPECT_GT(dkdv_smem(ld), mpb::cuda::kDefaultDynamicSmem);
  EXPECT_LE(dkdv_smem(ld), size_t{99} << 10);
  EXPECT_LE(dq_smem(ld), size_t{99} << 10);
  EXPECT_LE(forward_smem(ld), mpb::cuda::kDefaultDynamicSmem);  // the forward never needs the opt-in
}

TEST(AttentionTiles, LimitsNameWhatExceedsWhich) {
  EXPECT_EQ(fused_attention_limit_error(128, 12 * 32, 512, 512), "");
  EXPECT_EQ(fused_attention_limit_error(129, 1, 8, 8), "head dim 129 exceeds the CUDA kernels' maximum of 128");
  EXPECT_EQ(fused_attention_limit_error(64, int64_t{1} << 31, 8, 8), "B * H exceeds one grid dimension");
  EXPECT_EQ(fused_attention_limit_error(64, 0x7FFFFFFF, 8, 8), "");  // the grid's x limit itself fits
  // 65535 query (or key) tiles of 32 fit the grid's y dimension; one more row does not.
  EXPECT_EQ(fused_attention_limit_error(64, 1, int64_t{65535} * 32, 8), "");
  EXPECT_EQ(fused_attention_limit_error(64, 1, 8, int64_t{65535} * 32 + 1), "sequence too long for the tile grid");
}

}  // namespace
