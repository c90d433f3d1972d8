// FP8 operands of Device::gemm on the CPU backend (emulated): the shared
// check (tests/core/gemm_fp8_check.h, which says what it proves and why its
// tolerance holds) with every storage of the operands, and the argument rules.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "backends/cpu/cpu_device.h"
#include "tests/core/gemm_fp8_check.h"

namespace {

using namespace mpb;
using namespace mpb::fp8_gemm_test;

class CpuGemmFp8 : public ::testing::TestWithParam<std::tuple<Case, bool, bool, Dims>> {};

TEST_P(CpuGemmFp8, MatchesFloat64OfQuantizedOperands) {
  auto dev = make_cpu_device();
  Fp8Check opt;
  opt.dims = std::get<3>(GetParam());
  check_fp8_gemm(*dev, std::get<0>(GetParam()), std::get<1>(GetParam()), std::get<2>(GetParam()), opt);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuGemmFp8,
                         ::testing::Combine(::testing::ValuesIn(kFp8Cases), ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(kOddDims, kAlignedDims)));

// The bias and bias+GELU epilogues, and accumulation into C: the CPU adds the fp32 bias
// unrounded (oneDNN gets it widened), so its reference keeps it as is.
TEST(CpuGemmFp8Epilogue, BiasGeluAndBetaWithTheBiasUnrounded) {
  auto dev = make_cpu_device();
  for (const Dims& dims : {kOddDims, kAlignedDims}) {
    Fp8Check bias, gelu, accumulate;  // (epilogues take beta == 0: the Device contract)
    bias.dims = gelu.dims = accumulate.dims = dims;
    bias.epilogue = Epilogue::Bias;
    gelu.epilogue = Epilogue::BiasGelu;
    accumulate.beta = 1.0f;
    for (const Fp8Check& opt : {bias, gelu, accumulate}) {
      check_fp8_gemm(*dev, kFp8Cases[0], false, true, opt);
      check_fp8_gemm(*dev, kFp8Cases[3], false, true, opt);
    }
  }
}

TEST(CpuGemmFp8Rules, NanReachesAmaxAndArgumentsAreChecked) {
  auto dev = make_cpu_device();
  DeviceBuffer a = dev->alloc(Shape{2, 2}, DType::F32, MemCategory::Activations);
  DeviceBuffer b = dev->alloc(Shape{2, 2}, DType::F32, MemCategory::Activations);
  DeviceBuffer c = dev->alloc(Shape{2, 2}, DType::F32, MemCategory::Activations);
  const float av[] = {1.0f, std::nanf(""), 2.0f, 3.0f}, bv[] = {1, 2, 3, 4};
  dev->upload(a, av);
  dev->upload(b, bv);
  Fp8Slot sa = make_slot(*dev, 1.0f, 0.0f), sb = make_slot(*dev, 1.0f, 5.0f);
  GemmArgs g;
  g.m = g.n = g.k = 2;
  g.a = a, g.b = b, g.c = c;
  g.fp8_a = operand(sa, Fp8Format::E4M3);
  g.fp8_b = operand(sb, Fp8Format::E4M3);
  dev->gemm(g);
  EXPECT_TRUE(std::isnan(read1(*dev, sa.amax)));
  EXPECT_EQ(read1(*dev, sb.amax), 5.0f);  // the larger earlier value stays
  EXPECT_EQ(dev->supports(Feature::GemmFp8).level, SupportLevel::Emulated);

  GemmArgs one = g;
  one.fp8_b = GemmFp8Operand{};
  EXPECT_THROW(dev->gemm(one), std::invalid_argument);
  GemmArgs no_scale = g;
  no_scale.fp8_a.scale = Tensor();
  EXPECT_THROW(dev->gemm(no_scale), std::invalid_argument);
  GemmArgs batched = g;
  batched.batch = 2;
  batched.stride_a = batched.stride_b = batched.stride_c = 4;
  EXPECT_THROW(dev->gemm(batched), std::invalid_argument);
}

}  // namespace
