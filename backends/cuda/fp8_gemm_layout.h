// How an FP8 GEMM is laid out for cuBLASLt: padded dimensions, whether the
// output goes through a scratch matrix, the bias type and the accumulation
// mode. Pure host code (no CUDA headers): gemm_cublaslt.cu and gemm_fp8.cpp act on it and
// tests/backends/cuda/test_fp8_gemm_layout.cpp proves every decision on the CPU.
//
// The rules (cuBLAS docs, cublasLtMatmul, "FP8" requirements, and what the
// callers of cuBLASLt's FP8 kernels enforce):
//   - operands in the "TN" layout with the reduction index contiguous and
//     every leading dimension a multiple of 16 bytes: k is padded to 16 codes
//     (the quantizing pass writes zero codes in the pad: exact zeros, the
//     sums do not change);
//   - n, the rows of cuBLASLt's column-major D [n, m] (the width of our
//     row-major C), a multiple of 16: PyTorch's _scaled_mm requires
//     n % 16 == 0, Transformer Engine pads N and K. 16 elements keep D's
//     leading dimension a multiple of 16 bytes for every output dtype (32 B
//     for bf16/fp16, 64 B for fp32) and our B's codes [n, kp] a whole number
//     of 16-row tiles;
//   - m, the columns of cuBLASLt's D and B (our A's rows): no rule. The
//     first GPU run (H200, cuBLASLt 13.1) saw every FP8 GEMM refused by
//     cublasLtMatmul (NOT_SUPPORTED), all with m = 19 and B's descale pointer
//     4-byte aligned; the second run's CudaGemmFp8Probe took the two apart:
//     m = 19 runs, the 4-byte-aligned descale pointer is refused. So m_padded
//     is m (the layout keeps the field, and the scratch its [m_padded,
//     n_padded] shape, so a cuBLASLt that wants m padded needs one line here);
//   - pointers 16-byte aligned, the two per-tensor descale factors included
//     (kFp8DescaleStride below).
// A C of width n % 16 != 0, or one not 16-byte aligned, is therefore
// written through a scratch [m_padded, n_padded] (C's m x n copied in first
// when beta != 0, the first m rows and n columns copied back after).
// Padding, not a dequantise-then-bf16 fallback: the FP8 tensor cores are what
// an FP8 cell measures; the price is one scratch and two strided copies
// (docs/PERFORMANCE.md).
//   - BIAS_DATA_TYPE (cublasLt.h): the bias has D's type except for FP8
//     kernels with an fp32 D, which take a bf16 bias;
//   - FAST_ACCUM in forward GEMMs only, as Transformer Engine does (its
//     fprop GEMM runs without split accumulation, dgrad and wgrad with it).
//     The models' recipe (models/fp8_linears.cpp) makes the forward GEMM the
//     one whose operands are both E4M3 (input x weight); both backward GEMMs
//     read the E5M2 output gradient. A recipe with E4M3 gradients would need
//     the pass said explicitly.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace mpb::cuda {

constexpr int64_t kFp8GemmDimMultiple = 16;

inline int64_t fp8_round_up(int64_t x) { return (x + kFp8GemmDimMultiple - 1) / kFp8GemmDimMultiple * kFp8GemmDimMultiple; }

// The reduction length of the quantized operands: k rounded up to 16.
inline int64_t fp8_padded_k(int64_t k) { return fp8_round_up(k); }

// The device floats holding 1 / scale of A and of B (CUBLASLT_MATMUL_DESC_
// A/B_SCALE_POINTER) lie in one scratch, this many floats apart: 16 bytes,
// so both pointers are 16-byte aligned like every other pointer an FP8
// kernel reads (they were 4 bytes apart, B's 4-byte aligned, when the first
// GPU run saw every FP8 matmul refused). The scratch holds 2 strides.
constexpr int64_t kFp8DescaleStride = 4;

// BIAS_DATA_TYPE (and the bias gradient's) of an FP8 GEMM writing `out`.
inline DType fp8_bias_dtype(DType out) { return out == DType::F32 ? DType::BF16 : out; }

struct Fp8GemmLayout {
  int64_t k_padded = 0;             // the codes' row length (zero codes beyond k)
  int64_t n_padded = 0;             // rows of cuBLASLt's D and of our B's codes (zero rows beyond n)
  int64_t m_padded = 0;             // columns of cuBLASLt's D, rows of our A's codes (zero rows beyond m)
  bool scratch_output = false;      // D is a scratch [m_padded, n_padded], its first m x n copied into C
  bool copy_c_in = false;           // scratch_output and beta != 0: C is copied into the scratch first
  size_t scratch_output_bytes = 0;  // m_padded * n_padded * sizeof(output dtype), 0 without scratch_output
  DType bias_dtype = DType::F32;    // CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE for a Bias* epilogue
  bool fast_accum = false;          // CUBLASLT_MATMUL_DESC_FAST_ACCUM
};

// c_alignment: the largest power of two (bytes) dividing C's address.
inline Fp8GemmLayout fp8_gemm_layout(int64_t m, int64_t n, int64_t k, DType out, float beta, uint32_t c_alignment,
                                     Fp8Format a, Fp8Format b) {
  Fp8GemmLayout l;
  l.k_padded = fp8_padded_k(k);
  l.n_padded = fp8_round_up(n);
  l.m_padded = m;  // no rule for m (the top of this file: the second GPU run's probe)
  l.scratch_output = l.n_padded != n || l.m_padded != m || c_alignment < 16;
  l.copy_c_in = l.scratch_output && beta != 0.0f;
  l.scratch_output_bytes = l.scratch_output ? static_cast<size_t>(l.m_padded * l.n_padded) * dtype_size(out) : 0;
  l.bias_dtype = fp8_bias_dtype(out);
  l.fast_accum = a == Fp8Format::E4M3 && b == Fp8Format::E4M3;
  return l;
}

}  // namespace mpb::cuda
