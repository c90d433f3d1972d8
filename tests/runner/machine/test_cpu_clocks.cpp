// runner/machine/cpu_clocks.h on fixture /sys and /proc trees: a tuned machine, one
// with mixed governors, a VM without cpufreq, and a root with nothing at all.
#include <gtest/gtest.h>

#include "runner/machine/cpu_clocks.h"
#include "tests/runner/fixture_tree.h"

namespace mpb {
namespace {

using test::FixtureTree;

const char* kCpuinfoVm =
    "processor\t: 0\n"
    "model name\t: AMD EPYC 7B13\n"
    "cpu MHz\t\t: 2596.144\n"
    "flags\t\t: fpu vme avx2 hypervisor f16c\n"
    "\n"
    "processor\t: 1\n"
    "cpu MHz\t\t: 2400.000\n"
    "flags\t\t: fpu vme avx2 hypervisor f16c\n";

void cpu(const FixtureTree& t, int n, const std::string& governor, const std::string& khz) {
  const std::string dir = "sys/devices/system/cpu/cpu" + std::to_string(n) + "/cpufreq/";
  if (!governor.empty()) t.write(dir + "scaling_governor", governor + "\n");
  if (!khz.empty()) t.write(dir + "scaling_cur_freq", khz + "\n");
}

TEST(CpuClocks, ParsesCpuinfoMhzLines) {
  EXPECT_EQ(parse_cpuinfo_mhz(kCpuinfoVm), (std::vector<double>{2596.144, 2400.0}));
  EXPECT_TRUE(parse_cpuinfo_mhz("processor : 0\nflags : fpu\n").empty());
  EXPECT_TRUE(parse_cpuinfo_mhz("cpu MHz : n/a\n").empty());
}

TEST(CpuClocks, ParsesCpufreqKilohertz) {
  EXPECT_DOUBLE_EQ(*parse_cpufreq_khz("3700000\n"), 3700.0);
  EXPECT_FALSE(parse_cpufreq_khz("<unknown>\n"));
  EXPECT_FALSE(parse_cpufreq_khz(""));
  EXPECT_FALSE(parse_cpufreq_khz("0"));
}

TEST(CpuClocks, SeesTheHypervisorFlag) {
  EXPECT_TRUE(cpuinfo_has_hypervisor_flag(kCpuinfoVm));
  EXPECT_FALSE(cpuinfo_has_hypervisor_flag("flags\t\t: fpu vme avx2\n"));
  EXPECT_FALSE(cpuinfo_has_hypervisor_flag("flags : hypervisorish\n"));
}

TEST(CpuClocks, PerformanceGovernorAndCurrentFrequency) {
  FixtureTree t;
  cpu(t, 0, "performance", "3700000");
  cpu(t, 1, "performance", "3500000");
  t.mkdir("sys/devices/system/cpu/cpufreq/policy0");  // not a CPU
  t.mkdir("sys/devices/system/cpu/cpuidle");          // not a CPU
  t.write("proc/cpuinfo", "cpu MHz : 1000.0\n");      // cpufreq wins over cpuinfo
  const CpuClocks c = read_cpu_clocks(t.root());
  EXPECT_EQ(c.cpus, 2);
  ASSERT_TRUE(c.governor);
  EXPECT_EQ(*c.governor, "performance");
  EXPECT_TRUE(c.performance());
  EXPECT_DOUBLE_EQ(*c.mhz, 3600.0);
  EXPECT_DOUBLE_EQ(*c.mhz_min, 3500.0);
  EXPECT_DOUBLE_EQ(*c.mhz_max, 3700.0);
  EXPECT_EQ(c.mhz_source, "cpufreq scaling_cur_freq");
  const nlohmann::json j = c.to_json();
  EXPECT_EQ(j["governor"], "performance");
  EXPECT_EQ(j["governors"]["performance"], 2);
  EXPECT_TRUE(j["why"].is_null());
}

TEST(CpuClocks, MixedGovernorsHaveNoSingleGovernor) {
  FixtureTree t;
  cpu(t, 0, "performance", "");
  cpu(t, 1, "powersave", "");
  cpu(t, 2, "powersave", "");
  t.write("proc/cpuinfo", kCpuinfoVm);
  const CpuClocks c = read_cpu_clocks(t.root());
  EXPECT_FALSE(c.governor);
  EXPECT_FALSE(c.performance());
  EXPECT_EQ(c.governors.at("powersave"), 2);
  EXPECT_NE(c.governor_why.find("performance on 1"), std::string::npos) << c.governor_why;
  EXPECT_NE(c.governor_why.find("powersave on 2"), std::string::npos) << c.governor_why;
  EXPECT_EQ(c.mhz_source, "/proc/cpuinfo cpu MHz");  // no scaling_cur_freq anywhere
}

TEST(CpuClocks, VmWithoutCpufreqSaysWhy) {
  FixtureTree t;
  t.mkdir("sys/devices/system/cpu/cpu0");
  t.mkdir("sys/devices/system/cpu/cpu1");
  t.mkdir("sys/devices/system/cpu/cpufreq");  // present but empty, as on this kind of VM
  t.write("proc/cpuinfo", kCpuinfoVm);
  const CpuClocks c = read_cpu_clocks(t.root());
  EXPECT_EQ(c.cpus, 2);
  EXPECT_TRUE(c.hypervisor);
  EXPECT_FALSE(c.governor);
  EXPECT_NE(c.governor_why.find("no cpufreq in this VM"), std::string::npos) << c.governor_why;
  ASSERT_TRUE(c.mhz);
  EXPECT_NEAR(*c.mhz, (2596.144 + 2400.0) / 2, 1e-9);
  EXPECT_EQ(c.mhz_cpus, 2);
  const nlohmann::json j = c.to_json();
  EXPECT_TRUE(j["governor"].is_null());
  ASSERT_TRUE(j["why"].is_string());
  EXPECT_NE(j["why"].get<std::string>().find("no cpufreq"), std::string::npos);
}

TEST(CpuClocks, NothingReadableGivesNullsWithReasons) {
  FixtureTree t;
  const CpuClocks c = read_cpu_clocks(t.root());
  EXPECT_EQ(c.cpus, 0);
  EXPECT_FALSE(c.governor);
  EXPECT_FALSE(c.mhz);
  EXPECT_FALSE(c.governor_why.empty());
  EXPECT_FALSE(c.mhz_why.empty());
  const nlohmann::json j = c.to_json();
  EXPECT_TRUE(j["mhz"].is_null());
  EXPECT_TRUE(j["mhz_source"].is_null());
  EXPECT_TRUE(j["why"].is_string());
}

TEST(CpuClocks, EveryNumberedCpuIsRead) {
  FixtureTree t;
  for (int n : {10, 2, 0}) cpu(t, n, "schedutil", std::to_string(1000000 * (n + 1)));
  const CpuClocks c = read_cpu_clocks(t.root());
  EXPECT_EQ(c.cpus, 3);
  EXPECT_EQ(*c.governor, "schedutil");
  EXPECT_DOUBLE_EQ(*c.mhz_min, 1000.0);
  EXPECT_DOUBLE_EQ(*c.mhz_max, 11000.0);
}

}  // namespace
}  // namespace mpb
