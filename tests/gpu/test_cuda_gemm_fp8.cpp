// FP8 operands of Device::gemm on CUDA (cuBLASLt's FP8 matmuls, sm_89 and
// newer): the check the CPU emulation passes (tests/core/gemm_fp8_check.h),
// with every storage of the operands, so the quantizing pass's transposes
// and the padding of k = 41 to 48 are all exercised. Skips, with the reason,
// without a GPU or on one without FP8 tensor cores.
//
// Tolerance: Hopper's FP8 tensor-core instructions accumulate with fewer
// bits than fp32 (about 14 significant bits, DeepSeek-V3 technical report,
// section 3.3.2; cuBLASLt's default, FAST_ACCUM off, promotes the partial
// sums to fp32 periodically, which only helps), so the shared bound is
// taken with u = 2^-14 instead of fp32's 2^-24.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>

#include "backends/cuda/cuda_device.h"
#include "tests/core/gemm_fp8_check.h"

namespace mpb {
namespace {

using namespace fp8_gemm_test;

constexpr double kFp8TensorCoreU = 0x1p-14;

class CudaGemmFp8 : public ::testing::TestWithParam<std::tuple<Case, bool, bool>> {};

TEST_P(CudaGemmFp8, MatchesFloat64OfQuantizedOperands) {
  if (const std::optional<std::string> reason = cuda_unavailable_reason()) GTEST_SKIP() << *reason;
  auto dev = make_cuda_device();
  const std::string support = dev->fp8_gemm_support();
  if (support.rfind("unsupported", 0) == 0) GTEST_SKIP() << support;
  EXPECT_EQ(support, "native");
  check_fp8_gemm(*dev, std::get<0>(GetParam()), std::get<1>(GetParam()), std::get<2>(GetParam()), kFp8TensorCoreU);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGemmFp8,
                         ::testing::Combine(::testing::ValuesIn(kFp8Cases), ::testing::Bool(), ::testing::Bool()));

// Below compute capability 8.9 an FP8 GEMM is refused, naming the capability.
TEST(CudaGemmFp8Rules, OlderGpusRefuseNamingTheirCapability) {
  if (const std::optional<std::string> reason = cuda_unavailable_reason()) GTEST_SKIP() << *reason;
  auto dev = make_cuda_device();
  const std::string support = dev->fp8_gemm_support();
  if (support == "native") GTEST_SKIP() << "this GPU has FP8 tensor cores";
  EXPECT_NE(support.find("compute capability"), std::string::npos) << support;
}

}  // namespace
}  // namespace mpb
