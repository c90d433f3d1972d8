// The FP8 GEMM layout decisions of the CUDA backend (backends/cuda/
// fp8_gemm_layout.h, pure host code): padded k, n and m, the scratch output
// and its C copy, the descale factors' spacing, the bias type per output
// dtype and fast accumulation per pass.
// Runs on the CPU: these decide what the never-run cuBLASLt path asks for.
#include <gtest/gtest.h>

#include "backends/cuda/fp8_gemm_layout.h"

namespace {

using mpb::DType;
using mpb::Fp8Format;
using mpb::cuda::fp8_gemm_layout;
using mpb::cuda::Fp8GemmLayout;
using mpb::cuda::kFp8DescaleStride;

constexpr DType kOutputs[] = {DType::F32, DType::BF16, DType::F16};

Fp8GemmLayout forward(int64_t m, int64_t n, int64_t k, DType out, float beta = 0.0f, uint32_t align = 256) {
  return fp8_gemm_layout(m, n, k, out, beta, align, Fp8Format::E4M3, Fp8Format::E4M3);
}

// The odd shape of the GPU tests (tests/core/gemm_fp8_check.h): 23 fp32
// columns are 92-byte rows, which cuBLASLt's FP8 kernels refuse; its 19
// rows stay 19 (no rule for m).
TEST(Fp8GemmLayout, OddShapePadsNAndKAndWritesThroughScratch) {
  for (DType out : kOutputs) {
    SCOPED_TRACE(mpb::dtype_name(out));
    const Fp8GemmLayout l = forward(19, 23, 41, out);
    EXPECT_EQ(l.k_padded, 48);
    EXPECT_EQ(l.n_padded, 32);
    EXPECT_EQ(l.m_padded, 19);
    EXPECT_TRUE(l.scratch_output);
    EXPECT_FALSE(l.copy_c_in);  // beta == 0: C is only written
    EXPECT_EQ(l.scratch_output_bytes, size_t{19} * 32 * mpb::dtype_size(out));
  }
}

TEST(Fp8GemmLayout, AlignedShapeWritesCDirectly) {
  for (DType out : kOutputs) {
    SCOPED_TRACE(mpb::dtype_name(out));
    const Fp8GemmLayout l = forward(32, 48, 64, out, /*beta=*/1.0f);
    EXPECT_EQ(l.k_padded, 64);
    EXPECT_EQ(l.n_padded, 48);
    EXPECT_EQ(l.m_padded, 32);
    EXPECT_FALSE(l.scratch_output);
    EXPECT_FALSE(l.copy_c_in);
    EXPECT_EQ(l.scratch_output_bytes, 0u);
  }
}

// The first GPU run (H200, cuBLASLt 13.1): every FP8 GEMM of the tests had
// m = 19 with n and k already multiples of 16 or padded, and every one
// passed the heuristic and was then refused by cublasLtMatmul. m (columns
// of cuBLASLt's D, its n) is padded like n: the old rule wrote C directly
// here. Every m off 16 goes through the scratch, for every output dtype.
// m has no rule (the second GPU run's CudaGemmFp8Probe: m = 19 runs; the
// first run's refusals were the descale pointer's): never padded, and an m
// off 16 alone takes no scratch.
TEST(Fp8GemmLayout, MIsNeverPadded) {
  for (DType out : kOutputs) {
    SCOPED_TRACE(mpb::dtype_name(out));
    for (int64_t m = 1; m <= 80; ++m) {
      const Fp8GemmLayout l = forward(m, 16, 16, out);
      EXPECT_EQ(l.m_padded, m) << m;
      EXPECT_EQ(l.n_padded, 16) << m;
      EXPECT_FALSE(l.scratch_output) << m;
      EXPECT_EQ(l.scratch_output_bytes, 0u) << m;
    }
    const Fp8GemmLayout odd = forward(19, 23, 41, out, /*beta=*/1.0f);  // tests/core/gemm_fp8_check.h's kOddDims
    EXPECT_TRUE(odd.scratch_output);
    EXPECT_EQ(odd.scratch_output_bytes, size_t{19} * 32 * mpb::dtype_size(out));
  }
  EXPECT_FALSE(forward(4096, 768, 768, DType::BF16).scratch_output);  // BERT tokens x hidden: never padded
}

// Every n that is not a multiple of 16 is padded, for every output dtype,
// even where its rows would already be 16-byte multiples (n = 4 fp32,
// n = 8 bf16).
TEST(Fp8GemmLayout, EveryNOffSixteenIsPaddedToTheNextMultiple) {
  for (DType out : kOutputs)
    for (int64_t n = 1; n <= 80; ++n) {
      const Fp8GemmLayout l = forward(16, n, 16, out);
      EXPECT_EQ(l.n_padded % 16, 0) << n;
      EXPECT_GE(l.n_padded, n) << n;
      EXPECT_LT(l.n_padded - n, 16) << n;
      EXPECT_EQ(l.scratch_output, n % 16 != 0) << n;
      EXPECT_EQ(l.k_padded, 16);
    }
  EXPECT_EQ(forward(4096, 30522, 768, DType::F32).n_padded, 30528);  // BERT's unpadded vocab
}

// A_SCALE_POINTER and B_SCALE_POINTER point into one scratch: 16 bytes
// apart, so both are 16-byte aligned (B's was descale + 1 float, 4-byte
// aligned, in the first GPU run), and a stride holds at least one float.
TEST(Fp8GemmLayout, DescaleFactorsAreSixteenBytesApart) {
  EXPECT_EQ(kFp8DescaleStride * sizeof(float) % 16, 0u);
  EXPECT_GE(kFp8DescaleStride, 1);
}

TEST(Fp8GemmLayout, AccumulatingIntoAScratchOutputCopiesCInFirst) {
  EXPECT_TRUE(forward(19, 23, 41, DType::F32, /*beta=*/1.0f).copy_c_in);
  EXPECT_TRUE(forward(19, 23, 41, DType::BF16, /*beta=*/0.5f).copy_c_in);
  EXPECT_FALSE(forward(32, 32, 41, DType::F32, /*beta=*/1.0f).copy_c_in);  // no scratch, nothing to copy
}

// A C view that is not 16-byte aligned (a slice of a packed arena) goes
// through the scratch too, even at an aligned width.
TEST(Fp8GemmLayout, MisalignedOutputGoesThroughScratch) {
  for (uint32_t align : {1u, 2u, 4u, 8u}) {
    const Fp8GemmLayout l = forward(16, 32, 32, DType::F32, 1.0f, align);
    EXPECT_TRUE(l.scratch_output) << align;
    EXPECT_TRUE(l.copy_c_in) << align;
    EXPECT_EQ(l.n_padded, 32);
    EXPECT_EQ(l.m_padded, 16);
  }
  EXPECT_FALSE(forward(16, 32, 32, DType::F32, 1.0f, 16).scratch_output);
}

// cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: D's type, except FP8
// kernels with an fp32 D, which take a bf16 bias.
TEST(Fp8GemmLayout, BiasTypeIsBf16ForAnFp32OutputElseTheOutputs) {
  EXPECT_EQ(forward(4, 16, 16, DType::F32).bias_dtype, DType::BF16);
  EXPECT_EQ(forward(4, 16, 16, DType::BF16).bias_dtype, DType::BF16);
  EXPECT_EQ(forward(4, 16, 16, DType::F16).bias_dtype, DType::F16);
}

// Forward (input x weight, both E4M3): fast accumulation. Either backward
// GEMM reads the E5M2 output gradient: promoted (split) accumulation.
TEST(Fp8GemmLayout, FastAccumulationOnlyInTheForwardGemm) {
  auto fast = [](Fp8Format a, Fp8Format b) {
    return fp8_gemm_layout(19, 23, 41, DType::F32, 0.0f, 256, a, b).fast_accum;
  };
  EXPECT_TRUE(fast(Fp8Format::E4M3, Fp8Format::E4M3));   // forward
  EXPECT_FALSE(fast(Fp8Format::E5M2, Fp8Format::E4M3));  // dgrad: dy x W, wgrad: dy^T x
  EXPECT_FALSE(fast(Fp8Format::E4M3, Fp8Format::E5M2));
}

}  // namespace
