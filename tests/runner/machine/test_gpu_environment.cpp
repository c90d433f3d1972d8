// The GPU's fixed facts and --lock-clocks (runner/machine/gpu_environment.h) against
// a fake libnvidia-ml (tests/runner/fake_nvml.c) with NVML's ABI, so they run
// on machines without a GPU.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "runner/machine/gpu_environment.h"

namespace mpb {
namespace {

// NVML opened on the fake, and the fake's own view of the locked clock.
struct FakeNvml {
  std::unique_ptr<NvmlLibrary> nvml;
  void* self = nullptr;
  unsigned (*locked_mhz)() = nullptr;
  FakeNvml() {
    setenv("MPB_NVML_LIBRARY", MPB_FAKE_NVML_PATH, 1);
    std::string why;
    nvml = NvmlLibrary::open("00000000:3B:00.0", &why);
    unsetenv("MPB_NVML_LIBRARY");
    EXPECT_NE(nvml, nullptr) << why;
    self = dlopen(MPB_FAKE_NVML_PATH, RTLD_NOW | RTLD_NOLOAD);  // the same copy NVML loaded
    if (self) locked_mhz = reinterpret_cast<unsigned (*)()>(dlsym(self, "fake_nvml_locked_mhz"));
    EXPECT_NE(locked_mhz, nullptr);
  }
  ~FakeNvml() {
    if (self) dlclose(self);
  }
};

TEST(GpuEnvironment, RecordsTheCardItsModesClocksAndLinks) {
  FakeNvml fake;
  ASSERT_NE(fake.nvml, nullptr);
  const nlohmann::json j = gpu_environment_json(*fake.nvml);
  EXPECT_EQ(j["uuid"], "GPU-12345678-abcd-ef01-2345-6789abcdef01");
  EXPECT_EQ(j["vbios"], "96.00.99.00.01");
  EXPECT_EQ(j["ecc"], (nlohmann::json{{"current", "enabled"}, {"pending", "enabled"}}));
  EXPECT_EQ(j["mig"]["current"], "disabled");
  EXPECT_EQ(j["persistence_mode"], "enabled");
  EXPECT_EQ(j["applications_clocks_mhz"], (nlohmann::json{{"sm", 1755}, {"mem", 2619}}));
  EXPECT_EQ(j["max_clocks_mhz"]["sm"], 1980);
  EXPECT_EQ(j["pcie"]["generation"], 5);
  EXPECT_EQ(j["pcie"]["width"], 16);
  EXPECT_TRUE(j["pcie"]["max_width"].is_null()) << "an entry point the driver lacks reads as null";
  EXPECT_EQ(j["nvlink_active_links"], 4);
}

TEST(GpuEnvironment, ParsesLockClocksValues) {
  std::string error;
  EXPECT_TRUE(parse_clock_lock("base", &error)->base);
  EXPECT_EQ(parse_clock_lock("1410", &error)->mhz, 1410u);
  for (const char* bad : {"", "max", "-5", "50", "20000", "1410MHz", "1.5"}) {
    EXPECT_FALSE(parse_clock_lock(bad, &error).has_value()) << bad;
    EXPECT_NE(error.find("expected 'base' or an SM clock in MHz"), std::string::npos) << error;
  }
}

TEST(GpuEnvironment, LockHoldsTheClockAndReleasesIt) {
  FakeNvml fake;
  ASSERT_NE(fake.nvml, nullptr);
  ASSERT_NE(fake.locked_mhz, nullptr);
  {
    ClockLockRequest base;
    base.base = true;
    GpuClockLock lock(*fake.nvml, base);
    EXPECT_EQ(fake.locked_mhz(), 1590u);
    EXPECT_EQ(lock.to_json(),
              (nlohmann::json{{"requested", "base"}, {"applied", true}, {"sm_clock_mhz_after_lock", 1590.0}}));
  }
  EXPECT_EQ(fake.locked_mhz(), 0u) << "released at the end";
  ClockLockRequest mhz;
  mhz.mhz = 1200;
  GpuClockLock lock(*fake.nvml, mhz);
  EXPECT_EQ(fake.locked_mhz(), 1200u);
  EXPECT_EQ(lock.to_json()["requested"], "1200 MHz");
}

TEST(GpuEnvironment, RefusedLockIsAnErrorWithTheReason) {
  FakeNvml fake;
  ASSERT_NE(fake.nvml, nullptr);
  setenv("FAKE_NVML_DENY_LOCK", "1", 1);
  ClockLockRequest base;
  base.base = true;
  try {
    GpuClockLock lock(*fake.nvml, base);
    ADD_FAILURE() << "a refused lock must throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("NVML error 4 (no permission)"), std::string::npos) << e.what();
  }
  unsetenv("FAKE_NVML_DENY_LOCK");
  EXPECT_EQ(fake.locked_mhz(), 0u);
}

}  // namespace
}  // namespace mpb
