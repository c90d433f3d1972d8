// The pure decisions of the cuBLASLt GEMM path (gemm_cublaslt.cu and its
// gemm_*.cpp parts): the alignment cuBLASLt may assume of a pointer or of
// every matrix of a strided batch, which output types a compute type takes,
// and whether a GELU aux can be read or written in place. Pure host code (no
// CUDA headers) so tests/backends/cuda/test_gemm_lt_rules.cpp proves them on
// the CPU: they decide what the cuBLASLt calls ask for, and a wrong answer
// shows up only on a GPU (a heuristic refusal or a misaligned vector load).
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"

namespace mpb::cuda {

// Largest power of two (<= 256) dividing the address: what cuBLASLt's
// MIN_ALIGNMENT_* preferences are about (it assumes 256 unless told).
inline uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 1;
  while (al < 256 && a % (2 * al) == 0) al *= 2;
  return al;
}

// The alignment every matrix of a strided batch has: the base pointer's and
// the stride's (in bytes), whichever is smaller (matrix i starts at element
// i * stride). batch == 1: the pointer's, the stride is ignored.
inline uint32_t batch_alignment(const void* p, int64_t batch, int64_t stride, DType t) {
  uint32_t al = alignment_of(p);
  if (batch > 1) {
    const uint64_t bytes = static_cast<uint64_t>(stride) * dtype_size(t);
    uint32_t sal = 1;
    while (sal < 256 && bytes % (2 * sal) == 0) sal *= 2;
    al = al < sal ? al : sal;
  }
  return al;
}

// cuBLASLt's C/D types per compute type (the table at the top of
// gemm_problem.h): fp32 and TF32 write fp32, fp16/bf16 operands write fp32
// or their own type.
inline bool d_type_allowed(GemmCompute c, DType d) {
  switch (c) {
    case GemmCompute::F32:
    case GemmCompute::TF32: return d == DType::F32;
    case GemmCompute::F16: return d == DType::F32 || d == DType::F16;
    case GemmCompute::BF16: return d == DType::F32 || d == DType::BF16;
  }
  return false;
}

// Whether pre_act can be the GELU epilogues' EPILOGUE_AUX_POINTER itself
// (GELU_AUX_BIAS writes it, DGELU/DGELU_BGRAD read it): the aux has D's type
// by default, EPILOGUE_AUX_LD = n must be divisible by 8, and the pointer
// 16-byte aligned. Otherwise the forward writes the aux into scratch with
// gelu_aux_scratch_ld(n) and copies it, and the backward runs its explicit
// fallback (gemm_epilogues.cpp).
inline bool gelu_aux_in_place(DType pre_act, DType d, int64_t n, uint32_t pre_act_alignment) {
  return pre_act == d && n % 8 == 0 && pre_act_alignment >= 16;
}

// Split-K reduction schemes (cublasLtReductionScheme_t's bits, cublasLt.h;
// gemm_plan_cache.cpp static_asserts the values). NONE (0, one dot product
// per element, no reduction) passes every mask.
//   INPLACE      "using the output buffer (and output data type)"
//   COMPUTE_TYPE "intermediate results are stored in compute type in the
//                workspace and reduced in a separate step"
//   OUTPUT_TYPE  "... stored in output type in the workspace ..."
constexpr uint32_t kLtReductionInplace = 1, kLtReductionComputeType = 2, kLtReductionOutputType = 4,
                   kLtReductionAll = 7;

// CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK for a GEMM writing D of type d.
// A 16-bit D: COMPUTE_TYPE only (fp32 partial sums). INPLACE and OUTPUT_TYPE
// store every split-K partial sum in the 16-bit type ("stored in output
// type") before the reduction step adds them, one more 16-bit rounding per
// split. With this mask the second H200 run (cuBLASLt 13.1) passed gemm
// 37x40x70 fp16 C, which the first run (default mask) failed. It does NOT
// make the output one rounding: cuBLASLt's epilogue still rounds alpha AB to
// D's type before it adds beta C and the bias, with or without split-K
// (bf16 C = round(round(alpha AB) + bias) bit for bit on both runs, plans
// with splitK 1 included); the opcheck bounds model that for CUDA
// (opcheck/cases_gemm.cpp, product_rounding). fp32 D: every scheme (an fp32
// partial is what COMPUTE_TYPE keeps anyway).
inline uint32_t reduction_scheme_mask(DType d) {
  return dtype_size(d) < 4 ? kLtReductionComputeType : kLtReductionAll;
}

// Whether the algorithm the heuristic returned honours the mask: no split
// (splits <= 1, or scheme NONE) or a scheme inside the mask. A violation is
// an error, not a silent change of the numerics (gemm_plan_cache.cpp).
inline bool reduction_honours_mask(uint32_t mask, int32_t splits, uint32_t scheme) {
  return splits <= 1 || scheme == 0 || (scheme & ~mask) == 0;
}

// The scratch aux's leading dimension: n rounded up to 8 ("divisible by 8
// and no less than the number of rows in the output matrix", cublasLt.h).
inline int64_t gelu_aux_scratch_ld(int64_t n) { return (n + 7) / 8 * 8; }

}  // namespace mpb::cuda
