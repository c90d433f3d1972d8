// The capability types (core/device_capabilities.h): their text is what
// result files already hold (manifest.json's device.kind, a cell's
// device.emulated.gemm), so the words must not change; a device's supports()
// is what the public gemm op refuses by.
#include <gtest/gtest.h>

#include <string>

#include "core/device.h"
#include "core/device_capabilities.h"

namespace mpb {
namespace {

TEST(DeviceCapabilities, NamesAreTheWordsResultFilesHold) {
  EXPECT_STREQ(device_kind_name(DeviceKind::Cpu), "cpu");
  EXPECT_STREQ(device_kind_name(DeviceKind::Cuda), "cuda");
  EXPECT_STREQ(support_level_name(SupportLevel::Native), "native");
  EXPECT_STREQ(support_level_name(SupportLevel::Emulated), "emulated");
  EXPECT_STREQ(support_level_name(SupportLevel::Unsupported), "unsupported");
}

TEST(DeviceCapabilities, DescribeNamesTheReasonOnlyWhenUnsupported) {
  EXPECT_EQ(Support::native().describe(), "native");
  EXPECT_EQ(Support::emulated().describe(), "emulated");
  EXPECT_EQ(Support::unsupported("GPU X has compute capability 8.0").describe(),
            "unsupported: GPU X has compute capability 8.0");
  EXPECT_TRUE(Support::emulated().runs());
  EXPECT_FALSE(Support::unsupported("why").runs());
}

TEST(DeviceCapabilities, EachGemmModeAsksItsOwnFeature) {
  EXPECT_EQ(gemm_feature(GemmCompute::F32), Feature::GemmF32);
  EXPECT_EQ(gemm_feature(GemmCompute::TF32), Feature::GemmTf32);
  EXPECT_EQ(gemm_feature(GemmCompute::F16), Feature::GemmF16);
  EXPECT_EQ(gemm_feature(GemmCompute::BF16), Feature::GemmBf16);
  EXPECT_STREQ(feature_name(Feature::GemmFp8), "gemm fp8");
}

}  // namespace
}  // namespace mpb
