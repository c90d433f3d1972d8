// One cuBLASLt GEMM as cuBLASLt sees it (GemmProblem: shapes after the operand
// swap, types, epilogue, bias and aux buffers, batch strides, FP8 settings)
// and the key its cached plan is found by (gemm_plan_cache.cpp). Internal to
// the CUDA backend's GEMM (gemm_cublaslt.cu and its gemm_*.cpp parts).
//
// Row-major to column-major. cuBLASLt is column-major; a row-major [r,c]
// matrix is the column-major [c,r] matrix with ld = c, i.e. its transpose.
// So the row-major C[m,n] = op(A) op(B) is computed as the column-major
//   C^T[n,m] = op(B)^T op(A)^T
// with cuBLASLt's "A" = our B and "B" = our A:
//   - B stored [k,n] (no trans_b) is column-major [n,k], ld n: op N.
//     B stored [n,k] (trans_b)    is column-major [k,n], ld k: op T.
//   - A stored [m,k] (no trans_a) is column-major [k,m], ld k: op N.
//     A stored [k,m] (trans_a)    is column-major [m,k], ld m: op T.
//   - C/D: column-major [n,m], ld n.
// The bias vector (one value per column of row-major C) is one value per ROW
// of C^T, which is what cuBLASLt's bias epilogues broadcast (length = rows of
// D = n). The GELU aux output has D's shape: column-major [n,m] with its own
// ld, i.e. row-major [m, ld] in our terms.
//
// Types (cuBLASLt's supported combinations, all with fp32 scale type):
//   F32  : CUBLAS_COMPUTE_32F,           A/B/C/D CUDA_R_32F
//   TF32 : CUBLAS_COMPUTE_32F_FAST_TF32, A/B/C/D CUDA_R_32F
//   F16  : CUBLAS_COMPUTE_32F,           A/B CUDA_R_16F,  C/D CUDA_R_16F or CUDA_R_32F
//   BF16 : CUBLAS_COMPUTE_32F,           A/B CUDA_R_16BF, C/D CUDA_R_16BF or CUDA_R_32F
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "backends/cuda/gemm_lt_rules.h"
#include "backends/cuda/plan_key.h"
#include "core/device.h"

namespace mpb::cuda {

inline cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: throw std::invalid_argument("gemm: integer tensors are not GEMM operands");
  }
}

inline cudaDataType_t fp8_cuda_type(Fp8Format f) { return f == Fp8Format::E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

inline cublasComputeType_t compute_type(GemmCompute c) {
  return c == GemmCompute::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

inline const char* epilogue_name(cublasLtEpilogue_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return "DEFAULT";
    case CUBLASLT_EPILOGUE_BIAS: return "BIAS";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "RELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "GELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "GELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_DGELU: return "DGELU";
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return "DGELU_BGRAD";
    default: return "?";
  }
}

using GemmPlanKey = PlanKeyWords<20>;

// One call's resolved problem (after choosing output, bias and aux buffers).
struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  GemmCompute compute = GemmCompute::F32;
  DType ab = DType::F32;
  const void* a = nullptr;  // our A (cuBLASLt's B)
  const void* b = nullptr;  // our B (cuBLASLt's A)
  void* d = nullptr;        // C = D
  DType d_dtype = DType::F32;
  float alpha = 1.0f, beta = 0.0f;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;  // in bias_dtype when set
  DType bias_dtype = DType::F32;  // D's, or for FP8 fp8_bias_dtype(D's): BIAS_DATA_TYPE
  void* aux = nullptr;
  int64_t aux_ld = 0;
  // Strided batch: 1, or > 1 with the element strides of our A, B and C.
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  // FP8 codes in a and b (gemm_fp8.cpp): their formats and the
  // device floats holding 1 / scale of each.
  bool fp8 = false;
  Fp8Format fp8_a = Fp8Format::E4M3, fp8_b = Fp8Format::E4M3;
  const float* descale_a = nullptr;
  const float* descale_b = nullptr;
  bool fast_accum = false;  // CUBLASLT_MATMUL_DESC_FAST_ACCUM (FP8 forward GEMMs: fp8_gemm_layout.h)

  bool has_bias() const { return bias != nullptr; }
  cudaDataType_t a_type() const { return fp8 ? fp8_cuda_type(fp8_a) : cuda_type(ab); }
  cudaDataType_t b_type() const { return fp8 ? fp8_cuda_type(fp8_b) : cuda_type(ab); }
  bool batched() const { return batch > 1; }
  // The alignments cuBLASLt may assume (of every matrix of a batch).
  uint32_t align_a() const { return batch_alignment(a, batch, stride_a, ab); }
  uint32_t align_b() const { return batch_alignment(b, batch, stride_b, ab); }
  uint32_t align_d() const { return batch_alignment(d, batch, stride_c, d_dtype); }
  GemmPlanKey key() const {
    return GemmPlanKey{m,
                       n,
                       k,
                       (trans_a ? 1 : 0) | (trans_b ? 2 : 0),
                       static_cast<int64_t>(compute),
                       static_cast<int64_t>(ab),
                       static_cast<int64_t>(d_dtype),
                       static_cast<int64_t>(epilogue),
                       has_bias() ? 1 + static_cast<int64_t>(bias_dtype) : 0,
                       aux_ld,
                       align_a(),
                       align_b(),
                       align_d(),
                       has_bias() ? alignment_of(bias) : 0,
                       aux ? alignment_of(aux) : 0,
                       fp8 ? 1 + static_cast<int64_t>(fp8_a) * 2 + static_cast<int64_t>(fp8_b) + (fast_accum ? 4 : 0) : 0,
                       batched() ? batch : 1,
                       batched() ? stride_a : 0,
                       batched() ? stride_b : 0,
                       batched() ? stride_c : 0};
  }
  std::string describe() const {
    std::ostringstream s;
    s << "m=" << m << " n=" << n << " k=" << k << " trans_a=" << trans_a << " trans_b=" << trans_b
      << " compute=" << gemm_compute_name(compute) << " A/B=" << dtype_name(ab) << " C=" << dtype_name(d_dtype)
      << " epilogue=" << epilogue_name(epilogue) << " aux_ld=" << aux_ld << " align(A,B,C)=" << align_a() << ","
      << align_b() << "," << align_d();
    if (batched())
      s << " batch=" << batch << " strides(A,B,C)=" << stride_a << "," << stride_b << "," << stride_c;
    if (fp8)
      s << " FP8 codes A=" << (fp8_a == Fp8Format::E4M3 ? "E4M3" : "E5M2")
        << " B=" << (fp8_b == Fp8Format::E4M3 ? "E4M3" : "E5M2") << " (k padded to 16)"
        << (fast_accum ? " FAST_ACCUM" : "") << " descale align(A,B)=" << alignment_of(descale_a) << ","
        << alignment_of(descale_b);
    if (has_bias()) s << " bias=" << dtype_name(bias_dtype) << " bias align=" << alignment_of(bias);
    if (aux != nullptr) s << " aux align=" << alignment_of(aux);
    return s.str();
  }
  // Everything cuBLASLt is given, in its own (column-major, operand-swapped)
  // terms: what a refusal is about. Set on the descriptor (plan()): TRANSA/B,
  // EPILOGUE, BIAS_DATA_TYPE (with a bias), FAST_ACCUM (when set),
  // EPILOGUE_AUX_LD (with an aux), the BIAS/AUX/A_SCALE/B_SCALE pointers; on
  // the preference: MAX_WORKSPACE_BYTES and MIN_ALIGNMENT_A/B/C/D_BYTES.
  std::string describe_lt() const {
    std::ostringstream s;
    const int64_t a_rows = trans_b ? k : n, a_cols = trans_b ? n : k;  // cuBLASLt's A is our B
    const int64_t b_rows = trans_a ? m : k, b_cols = trans_a ? k : m;  // cuBLASLt's B is our A
    s << "cuBLASLt m=" << n << " n=" << m << " k=" << k << " compute="
      << (compute_type(compute) == CUBLAS_COMPUTE_32F_FAST_TF32 ? "32F_FAST_TF32" : "32F") << " scale=32F"
      << " TRANSA=" << (trans_b ? "T" : "N") << " TRANSB=" << (trans_a ? "T" : "N") << "; A " << type_name(b_type())
      << " " << a_rows << "x" << a_cols << " ld " << a_rows << " align " << align_b() << "; B " << type_name(a_type())
      << " " << b_rows << "x" << b_cols << " ld " << b_rows << " align " << align_a() << "; C = D (in place, one layout) "
      << dtype_name(d_dtype) << " " << n << "x" << m << " ld " << n << " align " << align_d() << "; alpha=" << alpha
      << " beta=" << beta << " (host)";
    if (batched()) s << "; batch " << batch;
    s << "; EPILOGUE=" << epilogue_name(epilogue);
    if (has_bias()) s << " BIAS_DATA_TYPE=" << dtype_name(bias_dtype) << " bias align " << alignment_of(bias);
    if (aux != nullptr) s << " AUX_LD=" << aux_ld << " aux align " << alignment_of(aux);
    if (fp8)
      s << "; A_SCALE_POINTER align " << alignment_of(descale_b) << " B_SCALE_POINTER align " << alignment_of(descale_a)
        << " (scale mode default: scalar fp32)" << (fast_accum ? " FAST_ACCUM=1" : " FAST_ACCUM unset");
    return s.str();
  }
  static const char* type_name(cudaDataType_t t) {
    switch (t) {
      case CUDA_R_32F: return "32F";
      case CUDA_R_16F: return "16F";
      case CUDA_R_16BF: return "16BF";
      case CUDA_R_8F_E4M3: return "8F_E4M3";
      case CUDA_R_8F_E5M2: return "8F_E5M2";
      default: return "?";
    }
  }
};

}  // namespace mpb::cuda
