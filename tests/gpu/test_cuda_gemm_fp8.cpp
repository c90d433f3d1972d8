// FP8 operands of Device::gemm on CUDA (cuBLASLt's FP8 matmuls, sm_89 and
// newer): the check the CPU emulation passes (tests/core/gemm_fp8_check.h),
// with every storage of the operands, so the quantizing pass's transposes,
// the padding of k = 41 to 48 and of n = 23 to 32 (the scratch output,
// backends/cuda/fp8_gemm_layout.h) are all exercised, and an aligned shape
// (n = 48, k = 64) that writes C directly. Skips, with the reason, without a
// GPU or on one without FP8 tensor cores.
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
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

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

class CudaGemmFp8 : public ::testing::TestWithParam<std::tuple<Case, bool, bool, Dims>> {};

TEST_P(CudaGemmFp8, MatchesFloat64OfQuantizedOperands) {
  std::string skip;
  auto dev = fp8_device(skip);
  if (!dev) GTEST_SKIP() << skip;
  Fp8Check opt;
  opt.dims = std::get<3>(GetParam());
  opt.accum_u = kFp8TensorCoreU;
  check_fp8_gemm(*dev, std::get<0>(GetParam()), std::get<1>(GetParam()), std::get<2>(GetParam()), opt);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGemmFp8,
                         ::testing::Combine(::testing::ValuesIn(kFp8Cases), ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(kOddDims, kAlignedDims)));

// The fused bias epilogue on an fp32 output (bf16 bias, item 9 of issue 30),
// and accumulation into C (beta = 1, the weight gradient's micro-batches):
// through the padded scratch (odd n: C copied in, bias zero-padded) and
// directly (aligned). Neither takes the counted epilogue fallback any more.
TEST(CudaGemmFp8Epilogue, Bf16BiasAndBetaFusedWithoutFallback) {
  std::string skip;
  auto dev = fp8_device(skip);
  if (!dev) GTEST_SKIP() << skip;
  for (const Dims& dims : {kOddDims, kAlignedDims}) {
    SCOPED_TRACE(dims.n);
    Fp8Check bias, accumulate;  // (epilogues take beta == 0: the Device contract)
    bias.dims = accumulate.dims = dims;
    bias.accum_u = accumulate.accum_u = kFp8TensorCoreU;
    bias.epilogue = Epilogue::Bias;
    bias.bias_rounding = DType::BF16;
    accumulate.beta = 1.0f;
    for (const Fp8Check& opt : {bias, accumulate}) {
      check_fp8_gemm(*dev, kFp8Cases[0], false, true, opt);  // a backward-like E4M3 x E5M2
      check_fp8_gemm(*dev, kFp8Cases[3], false, true, opt);  // the forward E4M3 x E4M3, FAST_ACCUM
    }
  }
  EXPECT_TRUE(dev->counters().gemm_fallbacks.empty())
      << "epilogue fallbacks: " << dev->counters().gemm_fallbacks.begin()->first;
}

// BiasGelu with pre_act (GELU_AUX_BIAS; at n = 23 the aux goes through the
// padded pre_act scratch). Whether cuBLASLt's FP8 kernels take an fp32 aux
// is not documented clearly: a refusal runs the counted fallback, which this
// test prints (it is the answer to that question) rather than fails; the
// values are checked either way.
TEST(CudaGemmFp8Epilogue, Bf16BiasGeluWithPreAct) {
  std::string skip;
  auto dev = fp8_device(skip);
  if (!dev) GTEST_SKIP() << skip;
  for (const Dims& dims : {kOddDims, kAlignedDims}) {
    SCOPED_TRACE(dims.n);
    Fp8Check gelu;
    gelu.dims = dims;
    gelu.accum_u = kFp8TensorCoreU;
    gelu.epilogue = Epilogue::BiasGelu;
    gelu.bias_rounding = DType::BF16;
    check_fp8_gemm(*dev, kFp8Cases[0], false, true, gelu);
    check_fp8_gemm(*dev, kFp8Cases[3], false, true, gelu);
  }
  for (const auto& [epilogue, count] : dev->counters().gemm_fallbacks)
    std::printf("FP8 BiasGelu: cuBLASLt refused %s %lld times (counted fallback ran)\n", epilogue.c_str(),
                static_cast<long long>(count));
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
