// FP8 operands of Device::gemm on CUDA (cuBLASLt's FP8 matmuls, sm_89 and
// newer): the check the CPU emulation passes (tests/core/gemm_fp8_check.h),
// with every storage of the operands, so the quantizing pass's transposes,
// the padding of k = 41 to 48, of n = 23 to 32 and of m = 19 to 32 (the
// scratch output, backends/cuda/fp8_gemm_layout.h) are all exercised, and an
// aligned shape (m = 32, n = 48, k = 64) that writes C directly. Skips, with
// the reason, without a GPU or on one without FP8 tensor cores.
//
// Tolerance: Hopper's FP8 tensor-core instructions accumulate with fewer
// bits than fp32 (about 14 significant bits, DeepSeek-V3 technical report,
// section 3.3.2). The forward case (E4M3 x E4M3) runs with FAST_ACCUM, which
// keeps the whole k-sum in that accumulator; the others promote the partial
// sums to fp32 periodically, which only helps. So the shared bound is taken
// with u = 2^-14 instead of fp32's 2^-24 for all of them (k <= 64 here).
// The bias epilogue: cuBLASLt adds a bf16 bias to an fp32 FP8 output, so the
// reference rounds the bias to bf16 (RNE, as Device::cast) and the check
// asserts that the unrounded bias would be outside the bound.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda/cuda_device.h"
#include "tests/core/gemm_fp8_check.h"

namespace mpb {
namespace {

using namespace fp8_gemm_test;

constexpr double kFp8TensorCoreU = 0x1p-14;

// A CUDA device with FP8 tensor cores, or the reason to skip.
std::unique_ptr<Device> fp8_device(std::string& skip) {
  if (const std::optional<std::string> reason = cuda_unavailable_reason()) {
    skip = *reason;
    return nullptr;
  }
  auto dev = make_cuda_device();
  const Support support = dev->supports(Feature::GemmFp8);
  if (!support.runs()) {
    skip = support.describe();
    return nullptr;
  }
  EXPECT_EQ(support.level, SupportLevel::Native) << support.describe();
  return dev;
}

// The tests that run on such a device (dev_), skipped with the reason elsewhere.
class Fp8Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string skip;
    dev_ = fp8_device(skip);
    if (!dev_) GTEST_SKIP() << skip;
  }
  std::unique_ptr<Device> dev_;
};

class CudaGemmFp8 : public Fp8Gpu, public ::testing::WithParamInterface<std::tuple<Case, bool, bool, Dims>> {};
using CudaGemmFp8Epilogue = Fp8Gpu;
using CudaGemmFp8Probe = Fp8Gpu;

TEST_P(CudaGemmFp8, MatchesFloat64OfQuantizedOperands) {
  Fp8Check opt;
  opt.dims = std::get<3>(GetParam());
  opt.accum_u = kFp8TensorCoreU;
  check_fp8_gemm(*dev_, std::get<0>(GetParam()), std::get<1>(GetParam()), std::get<2>(GetParam()), opt);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGemmFp8,
                         ::testing::Combine(::testing::ValuesIn(kFp8Cases), ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(kOddDims, kAlignedDims)));

// The fused bias epilogue on an fp32 output (bf16 bias, item 9 of issue 30),
// and accumulation into C (beta = 1, the weight gradient's micro-batches):
// through the padded scratch (odd n: C copied in, bias zero-padded) and
// directly (aligned). Neither takes the counted epilogue fallback any more.
TEST_F(CudaGemmFp8Epilogue, Bf16BiasAndBetaFusedWithoutFallback) {
  for (const Dims& dims : {kOddDims, kAlignedDims}) {
    SCOPED_TRACE(dims.n);
    Fp8Check bias, accumulate;  // (epilogues take beta == 0: the Device contract)
    bias.dims = accumulate.dims = dims;
    bias.accum_u = accumulate.accum_u = kFp8TensorCoreU;
    bias.epilogue = Epilogue::Bias;
    bias.bias_rounding = DType::BF16;
    accumulate.beta = 1.0f;
    for (const Fp8Check& opt : {bias, accumulate}) {
      check_fp8_gemm(*dev_, kFp8Cases[0], false, true, opt);  // a backward-like E4M3 x E5M2
      check_fp8_gemm(*dev_, kFp8Cases[3], false, true, opt);  // the forward E4M3 x E4M3, FAST_ACCUM
    }
  }
  EXPECT_TRUE(dev_->counters().gemm_fallbacks.empty())
      << "epilogue fallbacks: " << dev_->counters().gemm_fallbacks.begin()->first;
}

// BiasGelu with pre_act (GELU_AUX_BIAS; at n = 23 the aux goes through the
// padded pre_act scratch). Whether cuBLASLt's FP8 kernels take an fp32 aux
// is not documented clearly: a refusal runs the counted fallback, which this
// test prints (it is the answer to that question) rather than fails; the
// values are checked either way.
TEST_F(CudaGemmFp8Epilogue, Bf16BiasGeluWithPreAct) {
  for (const Dims& dims : {kOddDims, kAlignedDims}) {
    SCOPED_TRACE(dims.n);
    Fp8Check gelu;
    gelu.dims = dims;
    gelu.accum_u = kFp8TensorCoreU;
    gelu.epilogue = Epilogue::BiasGelu;
    gelu.bias_rounding = DType::BF16;
    check_fp8_gemm(*dev_, kFp8Cases[0], false, true, gelu);
    check_fp8_gemm(*dev_, kFp8Cases[3], false, true, gelu);
  }
  for (const auto& [epilogue, count] : dev_->counters().gemm_fallbacks)
    std::printf("FP8 BiasGelu: cuBLASLt refused %s %lld times (counted fallback ran)\n", epilogue.c_str(),
                static_cast<long long>(count));
}

// Which suspect of the first GPU run cuBLASLt's FP8 matmul refuses (H200,
// cuBLASLt 13.1: every FP8 GEMM of the backend passed the heuristic, then
// cublasLtMatmul answered NOT_SUPPORTED; all had our m = 19, and B's
// descale pointer was 4-byte aligned). Raw cuBLASLt, no backend: E4M3 x
// E4M3 codes (all zero) into fp32, TN, cuBLASLt m = 32, k = 64, host alpha 1
// and beta 0, C = D in place with one layout (as the backend), per-tensor
// scale pointers. The layout the backend now asks for (cuBLASLt n = our m
// padded to 32, both scale pointers 16-byte aligned) must run; the variants
// that each put back one old rule (or change one more thing the backend
// does: C = D in place, an fp32 output) only print what cuBLASLt answers,
// which is the evidence a GPU run is for:
//   --gtest_filter=CudaGemmFp8Probe.* prints one line per variant.
struct LtFp8Answer {
  cublasStatus_t heuristic = CUBLAS_STATUS_NOT_INITIALIZED;
  int found = 0;
  cublasStatus_t matmul = CUBLAS_STATUS_NOT_INITIALIZED;  // NOT_INITIALIZED: not called (no algorithm)
};

#define MPB_LT_OK(call) ASSERT_EQ((call), CUBLAS_STATUS_SUCCESS) << #call
#define MPB_RT_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

void lt_fp8_matmul(cublasLtHandle_t lt, int64_t n_lt, const float* scale_a, const float* scale_b, const void* a,
                   const void* b, void* c, void* d, cudaDataType_t d_type, void* ws, size_t ws_bytes,
                   LtFp8Answer& out) {
  const int64_t m_lt = 32, k = 64;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  MPB_LT_OK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  MPB_LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  MPB_LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  MPB_LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_a, sizeof(scale_a)));
  MPB_LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_b, sizeof(scale_b)));
  MPB_LT_OK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m_lt, k));
  MPB_LT_OK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, n_lt, k));
  MPB_LT_OK(cublasLtMatrixLayoutCreate(&ld, d_type, m_lt, n_lt, m_lt));  // C's layout too
  MPB_LT_OK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t max_ws = ws_bytes;
  MPB_LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                                 sizeof(max_ws)));
  cublasLtMatmulHeuristicResult_t result{};
  out.heuristic = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &result, &out.found);
  if (out.heuristic == CUBLAS_STATUS_SUCCESS && out.found > 0) {
    const float alpha = 1.0f, beta = 0.0f;
    out.matmul = cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, c, ld, d, ld, &result.algo, ws, ws_bytes, nullptr);
    MPB_RT_OK(cudaDeviceSynchronize());
  }
  MPB_LT_OK(cublasLtMatmulPreferenceDestroy(pref));
  MPB_LT_OK(cublasLtMatrixLayoutDestroy(ld));
  MPB_LT_OK(cublasLtMatrixLayoutDestroy(lb));
  MPB_LT_OK(cublasLtMatrixLayoutDestroy(la));
  MPB_LT_OK(cublasLtMatmulDescDestroy(op));
}

TEST_F(CudaGemmFp8Probe, BackendLayoutRunsAndOldRulesAreReported) {
  constexpr size_t kWs = size_t{32} << 20;
  void *codes = nullptr, *c = nullptr, *d = nullptr, *ws = nullptr;
  float* scales = nullptr;
  MPB_RT_OK(cudaMalloc(&codes, 64 * 32));  // the most either operand holds: k x 32 codes
  MPB_RT_OK(cudaMalloc(&c, 32 * 32 * sizeof(float)));
  MPB_RT_OK(cudaMalloc(&d, 32 * 32 * sizeof(float)));
  MPB_RT_OK(cudaMemset(c, 0, 32 * 32 * sizeof(float)));
  MPB_RT_OK(cudaMalloc(&ws, kWs));
  MPB_RT_OK(cudaMalloc(reinterpret_cast<void**>(&scales), 64 * sizeof(float)));  // cudaMalloc: 256-byte aligned
  MPB_RT_OK(cudaMemset(codes, 0, 64 * 32));
  const std::vector<float> ones(64, 1.0f);
  MPB_RT_OK(cudaMemcpy(scales, ones.data(), 64 * sizeof(float), cudaMemcpyHostToDevice));
  cublasLtHandle_t lt = nullptr;
  MPB_LT_OK(cublasLtCreate(&lt));
  struct Variant {
    const char* name;
    int64_t n_lt;
    const float* scale_b;
    bool in_place;
    cudaDataType_t d_type;
  };
  const Variant variants[] = {
      {"backend now: n 32, scale pointers 16-byte aligned", 32, scales + 4, true, CUDA_R_32F},
      {"old m rule: n 19 (our m unpadded)", 19, scales + 4, true, CUDA_R_32F},
      {"old descale: B scale pointer 4-byte aligned", 32, scales + 1, true, CUDA_R_32F},
      {"first GPU run: both", 19, scales + 1, true, CUDA_R_32F},
      {"backend now, but C != D (out of place)", 32, scales + 4, false, CUDA_R_32F},
      {"backend now, but bf16 C = D", 32, scales + 4, true, CUDA_R_16BF},
  };
  std::printf("FP8 probe, cuBLASLt %zu, E4M3 x E4M3, TN, m 32, k 64, fp32 C = D in place unless said:\n",
              cublasLtGetVersion());
  LtFp8Answer now;
  for (const Variant& v : variants) {
    LtFp8Answer ans;
    lt_fp8_matmul(lt, v.n_lt, scales, v.scale_b, codes, codes, v.in_place ? d : c, d, v.d_type, ws, kWs, ans);
    std::printf("  %-52s heuristic %s (%d found), matmul %s\n", v.name, cublasLtGetStatusName(ans.heuristic), ans.found,
                ans.found > 0 ? cublasLtGetStatusName(ans.matmul) : "not called");
    if (&v == &variants[0]) now = ans;
  }
  MPB_LT_OK(cublasLtDestroy(lt));
  MPB_RT_OK(cudaFree(scales));
  MPB_RT_OK(cudaFree(ws));
  MPB_RT_OK(cudaFree(d));
  MPB_RT_OK(cudaFree(c));
  MPB_RT_OK(cudaFree(codes));
  EXPECT_EQ(now.heuristic, CUBLAS_STATUS_SUCCESS);
  EXPECT_GT(now.found, 0);
  EXPECT_EQ(now.matmul, CUBLAS_STATUS_SUCCESS) << cublasLtGetStatusName(now.matmul);
}

// Below compute capability 8.9 an FP8 GEMM is refused, naming the capability.
TEST(CudaGemmFp8Rules, OlderGpusRefuseNamingTheirCapability) {
  if (const std::optional<std::string> reason = cuda_unavailable_reason()) GTEST_SKIP() << *reason;
  auto dev = make_cuda_device();
  const Support support = dev->supports(Feature::GemmFp8);
  if (support.level == SupportLevel::Native) GTEST_SKIP() << "this GPU has FP8 tensor cores";
  EXPECT_EQ(support.level, SupportLevel::Unsupported);
  EXPECT_NE(support.reason.find("compute capability"), std::string::npos) << support.reason;
}

}  // namespace
}  // namespace mpb
