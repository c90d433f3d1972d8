// The pure decisions of the cuBLASLt GEMM path (backends/cuda/gemm_lt_rules.h):
// the alignment cuBLASLt is told it may assume (MIN_ALIGNMENT_*, and a part
// of every plan key), the output types per compute type, and whether the
// GELU aux goes in place or through scratch, the split-K reduction schemes
// a 16-bit output allows. Runs on the CPU: these decide
// what the cuBLASLt calls ask for, and a wrong answer shows only on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "backends/cuda/gemm_lt_rules.h"

namespace {

using mpb::DType;
using mpb::GemmCompute;
using mpb::cuda::alignment_of;
using mpb::cuda::batch_alignment;
using mpb::cuda::d_type_allowed;
using mpb::cuda::gelu_aux_in_place;
using mpb::cuda::gelu_aux_scratch_ld;
using mpb::cuda::kLtReductionAll;
using mpb::cuda::kLtReductionComputeType;
using mpb::cuda::kLtReductionInplace;
using mpb::cuda::kLtReductionOutputType;
using mpb::cuda::reduction_honours_mask;
using mpb::cuda::reduction_scheme_mask;

const void* address(uintptr_t a) { return reinterpret_cast<const void*>(a); }

// The reference: the lowest set bit of the address (two's complement), capped
// at 256 (cuBLASLt's default assumption, so larger alignments say nothing
// more); address 0 counts as 256-aligned.
uint32_t lowest_bit_capped(uint64_t a) {
  if (a == 0) return 256;
  return static_cast<uint32_t>(std::min<uint64_t>(256, a & (~a + 1)));
}

TEST(GemmLtRules, AlignmentIsTheLowestSetBitCappedAt256) {
  for (uint64_t a = 0; a < 4096; ++a) ASSERT_EQ(alignment_of(address(a)), lowest_bit_capped(a)) << "address " << a;
  // The device allocator's pointers (256-byte aligned) and views into them.
  EXPECT_EQ(alignment_of(address(0x7f0000000000)), 256u);
  EXPECT_EQ(alignment_of(address(0x7f0000000000 + 2 * 3)), 2u);  // a bf16 view at element 3
  EXPECT_EQ(alignment_of(address(0x7f0000000000 + 4 * 4)), 16u);  // an fp32 view at element 4
}

TEST(GemmLtRules, BatchAlignmentIsTheSmallerOfPointerAndStrideBytes) {
  const uintptr_t base = 0x7f0000000000;  // 256-byte aligned
  // batch == 1: the stride is ignored (it is not read on the CPU either).
  EXPECT_EQ(batch_alignment(address(base), 1, 3, DType::BF16), 256u);
  // A stride of 3 bf16 elements (6 bytes) puts matrix 1 at a 2-byte boundary.
  EXPECT_EQ(batch_alignment(address(base), 2, 3, DType::BF16), 2u);
  // The attention products' strides: T * D elements.
  EXPECT_EQ(batch_alignment(address(base), 12, 128 * 64, DType::F16), 256u);
  EXPECT_EQ(batch_alignment(address(base), 12, 24, DType::F32), 32u);  // 96 bytes
  // The pointer's alignment bounds it even when the stride is generous.
  EXPECT_EQ(batch_alignment(address(base + 8), 4, 1024, DType::F32), 8u);
  for (int64_t stride = 1; stride < 600; ++stride) {
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
      const uint64_t bytes = static_cast<uint64_t>(stride) * mpb::dtype_size(t);
      ASSERT_EQ(batch_alignment(address(base + 4), 3, stride, t), std::min(4u, lowest_bit_capped(bytes)))
          << "stride " << stride << " " << mpb::dtype_name(t);
    }
  }
}

// cuBLASLt's table (gemm_problem.h): fp32/TF32 write fp32; fp16 and bf16
// operands write fp32 or their own type, never the other 16-bit type.
TEST(GemmLtRules, OutputTypesPerCompute) {
  EXPECT_TRUE(d_type_allowed(GemmCompute::F32, DType::F32));
  EXPECT_FALSE(d_type_allowed(GemmCompute::F32, DType::F16));
  EXPECT_FALSE(d_type_allowed(GemmCompute::F32, DType::BF16));
  EXPECT_TRUE(d_type_allowed(GemmCompute::TF32, DType::F32));
  EXPECT_FALSE(d_type_allowed(GemmCompute::TF32, DType::BF16));
  EXPECT_TRUE(d_type_allowed(GemmCompute::F16, DType::F32));
  EXPECT_TRUE(d_type_allowed(GemmCompute::F16, DType::F16));
  EXPECT_FALSE(d_type_allowed(GemmCompute::F16, DType::BF16));
  EXPECT_TRUE(d_type_allowed(GemmCompute::BF16, DType::F32));
  EXPECT_TRUE(d_type_allowed(GemmCompute::BF16, DType::BF16));
  EXPECT_FALSE(d_type_allowed(GemmCompute::BF16, DType::F16));
  EXPECT_FALSE(d_type_allowed(GemmCompute::F32, DType::I32));  // integer tensors are never GEMM outputs
}

TEST(GemmLtRules, GeluAuxInPlaceNeedsDsTypeNMultipleOf8And16ByteAlignment) {
  EXPECT_TRUE(gelu_aux_in_place(DType::BF16, DType::BF16, 3072, 256));  // BERT-base's FFN
  EXPECT_FALSE(gelu_aux_in_place(DType::F32, DType::BF16, 3072, 256));  // the aux takes D's type
  EXPECT_FALSE(gelu_aux_in_place(DType::BF16, DType::BF16, 3076, 256));  // ld % 8 != 0
  EXPECT_FALSE(gelu_aux_in_place(DType::BF16, DType::BF16, 3072, 8));   // vector loads need 16 bytes
  EXPECT_TRUE(gelu_aux_in_place(DType::F32, DType::F32, 8, 16));
}

TEST(GemmLtRules, ScratchAuxLdIsNRoundedUpTo8) {
  EXPECT_EQ(gelu_aux_scratch_ld(1), 8);
  EXPECT_EQ(gelu_aux_scratch_ld(8), 8);
  EXPECT_EQ(gelu_aux_scratch_ld(9), 16);
  EXPECT_EQ(gelu_aux_scratch_ld(3076), 3080);
  for (int64_t n = 1; n < 200; ++n) {
    const int64_t ld = gelu_aux_scratch_ld(n);
    ASSERT_EQ(ld % 8, 0) << n;  // "divisible by 8"
    ASSERT_GE(ld, n) << n;      // "no less than the number of rows"
    ASSERT_LT(ld - n, 8) << n;  // and no wider than that needs
  }
}

TEST(GemmLtRules, SixteenBitOutputsKeepSplitKPartialsInFp32) {
  // bf16/fp16 D: only fp32 (compute type) partial sums; INPLACE and
  // OUTPUT_TYPE would round each partial to 16 bits before the bias/beta C.
  EXPECT_EQ(reduction_scheme_mask(DType::BF16), kLtReductionComputeType);
  EXPECT_EQ(reduction_scheme_mask(DType::F16), kLtReductionComputeType);
  EXPECT_EQ(reduction_scheme_mask(DType::BF16) & (kLtReductionInplace | kLtReductionOutputType), 0u);
  EXPECT_EQ(reduction_scheme_mask(DType::F32), kLtReductionAll);
}

TEST(GemmLtRules, AnAlgorithmOutsideTheReductionMaskIsCaught) {
  const uint32_t m16 = reduction_scheme_mask(DType::BF16);
  EXPECT_TRUE(reduction_honours_mask(m16, 1, 0));                         // no split
  EXPECT_TRUE(reduction_honours_mask(m16, 4, kLtReductionComputeType));  // fp32 partials
  EXPECT_FALSE(reduction_honours_mask(m16, 4, kLtReductionOutputType));  // 16-bit partials
  EXPECT_FALSE(reduction_honours_mask(m16, 2, kLtReductionInplace));
  EXPECT_TRUE(reduction_honours_mask(m16, 1, kLtReductionOutputType));   // one split: nothing reduced
  EXPECT_TRUE(reduction_honours_mask(reduction_scheme_mask(DType::F32), 4, kLtReductionOutputType));
}

}  // namespace
