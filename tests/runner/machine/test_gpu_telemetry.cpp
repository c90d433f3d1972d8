// GPU telemetry (runner/machine/gpu_telemetry.h): the summary of samples, and the
// NVML loader and sampler against a fake libnvidia-ml (tests/runner/fake_nvml.c)
// with NVML's ABI, so both run on machines without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "runner/machine/gpu_telemetry.h"

namespace mpb {
namespace {

TEST(GpuTelemetry, SummaryFlagsEverySlowingReasonAndKeepsAllSamples) {
  std::vector<GpuSample> s(10);
  for (int i = 0; i < 10; ++i) {
    s[size_t(i)].sm_mhz = 1980 - i;
    s[size_t(i)].temperature_c = 60 + i;
    s[size_t(i)].memory_used_bytes = 1e9 + i;
    s[size_t(i)].power_limit_w = 700;
  }
  s[3].reasons = nvml_reason::kHwThermal;
  s[7].reasons = nvml_reason::kGpuIdle;  // idle is not slowing this work down
  const auto j = summarize_gpu_samples(s, 100.0);
  EXPECT_EQ(j["samples"], 10);
  EXPECT_EQ(j["sm_clock_mhz"]["min"], 1971.0);
  EXPECT_EQ(j["sm_clock_mhz"]["max"], 1980.0);
  EXPECT_EQ(j["temperature_c"]["max"], 69.0);
  EXPECT_EQ(j["memory_used_peak_bytes"], 1e9 + 9);
  EXPECT_EQ(j["power_limit_w"], 700.0);
  EXPECT_TRUE(j["power_w"].is_null()) << "never read: null, not 0";
  EXPECT_DOUBLE_EQ(j["throttled_fraction"].get<double>(), 0.1);
  EXPECT_TRUE(j["throttled"].get<bool>());
  EXPECT_EQ(j["throttle_reasons"], (nlohmann::json{"gpu_idle", "hw_thermal_slowdown"}));
  s[3].reasons = 0;
  EXPECT_FALSE(summarize_gpu_samples(s, 100.0)["throttled"].get<bool>());
}

TEST(GpuTelemetry, NoNvmlIsAReasonNotAFailure) {
  setenv("MPB_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  std::string why;
  EXPECT_EQ(GpuTelemetry::open("00000000:3B:00.0", &why), nullptr);
  EXPECT_NE(why.find("NVML not available"), std::string::npos) << why;
  unsetenv("MPB_NVML_LIBRARY");
}

TEST(GpuTelemetry, SamplesAFakeNvmlByBusId) {
  setenv("MPB_NVML_LIBRARY", MPB_FAKE_NVML_PATH, 1);
  std::string why;
  EXPECT_EQ(GpuTelemetry::open("00000000:AA:00.0", &why), nullptr) << "another GPU's bus id";
  EXPECT_NE(why.find("no device at PCI bus id"), std::string::npos) << why;
  auto t = GpuTelemetry::open("00000000:3B:00.0", &why);
  ASSERT_NE(t, nullptr) << why;
  t->begin(10.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto j = t->end();
  unsetenv("MPB_NVML_LIBRARY");
  const int n = j["samples"].get<int>();
  EXPECT_GE(n, 3);
  EXPECT_EQ(j["sm_clock_mhz"]["max"], 1980.0);
  EXPECT_EQ(j["sm_clock_mhz"]["min"], 1980.0 - (n - 1));
  EXPECT_EQ(j["mem_clock_mhz"]["median"], 2619.0);
  EXPECT_EQ(j["power_w"]["max"], 500.0);
  EXPECT_EQ(j["power_limit_w"], 700.0);
  EXPECT_EQ(j["throttle_reasons"], (nlohmann::json{"sw_power_cap"}));
  EXPECT_TRUE(j["throttled"].get<bool>());
  EXPECT_NEAR(j["throttled_fraction"].get<double>(), 0.5, 0.5 / n + 1e-9);
}

}  // namespace
}  // namespace mpb
