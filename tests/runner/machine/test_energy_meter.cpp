// Energy per step (runner/machine/energy_meter.h): RAPL's package counters summed and
// unwrapped, read from a made-up /sys/class/powercap tree; NVML's total-energy
// counter through the fake libnvidia-ml (tests/runner/fake_nvml.c: 2.5 J per
// read); and the per-step figures from a window.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "runner/machine/energy_meter.h"

namespace mpb {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text << "\n";
}

struct PowercapTree {
  fs::path root = fs::temp_directory_path() / ("mpb-powercap-" + std::to_string(::getpid()));
  PowercapTree() {
    fs::remove_all(root);
    // Two packages and a core sub-zone, which must not be counted twice.
    write(root / "intel-rapl:0/name", "package-0");
    write(root / "intel-rapl:0/energy_uj", "1000000");
    write(root / "intel-rapl:0/max_energy_range_uj", "262143328850");
    write(root / "intel-rapl:1/name", "package-1");
    write(root / "intel-rapl:1/energy_uj", "262143000000");
    write(root / "intel-rapl:1/max_energy_range_uj", "262143328850");
    write(root / "intel-rapl:0:0/name", "core");
    write(root / "intel-rapl:0:0/energy_uj", "5");
    write(root / "intel-rapl:0:0/max_energy_range_uj", "262143328850");
  }
  ~PowercapTree() { fs::remove_all(root); }
};

TEST(EnergyMeter, RaplSumsPackagesAndUndoesTheWrap) {
  PowercapTree t;
  std::string why;
  std::unique_ptr<EnergyMeter> m = open_rapl_meter(t.root.string(), &why);
  ASSERT_TRUE(m) << why;
  EXPECT_EQ(m->source(), "rapl (package-0, package-1)");
  const std::optional<double> j0 = m->joules(&why);
  ASSERT_TRUE(j0) << why;
  // Package 0 gains 3 J; package 1 wraps: 328850 uJ to its range, then 2,000,000 past 0.
  write(t.root / "intel-rapl:0/energy_uj", "4000000");
  write(t.root / "intel-rapl:1/energy_uj", "2000000");
  write(t.root / "intel-rapl:0:0/energy_uj", "999999999");
  const std::optional<double> j1 = m->joules(&why);
  ASSERT_TRUE(j1) << why;
  EXPECT_NEAR(*j1 - *j0, 3.0 + 0.32885 + 2.0, 1e-9);
}

TEST(EnergyMeter, RaplMissingOrUnreadableSaysWhy) {
  std::string why;
  EXPECT_FALSE(open_rapl_meter("/nonexistent/powercap", &why));
  EXPECT_NE(why.find("no /nonexistent/powercap"), std::string::npos) << why;
  PowercapTree t;
  fs::remove(t.root / "intel-rapl:1/energy_uj");
  EXPECT_FALSE(open_rapl_meter(t.root.string(), &why));
  EXPECT_NE(why.find("intel-rapl:1/energy_uj is not readable"), std::string::npos) << why;
  fs::remove_all(t.root / "intel-rapl:0");
  fs::remove_all(t.root / "intel-rapl:1");
  EXPECT_FALSE(open_rapl_meter(t.root.string(), &why));
  EXPECT_NE(why.find("no RAPL package zone"), std::string::npos) << why;
}

TEST(EnergyMeter, NvmlTotalEnergyCounter) {
  setenv("MPB_NVML_LIBRARY", MPB_FAKE_NVML_PATH, 1);
  std::string why;
  std::unique_ptr<NvmlLibrary> nvml = NvmlLibrary::open("00000000:3B:00.0", &why);
  unsetenv("MPB_NVML_LIBRARY");
  ASSERT_TRUE(nvml) << why;
  std::unique_ptr<EnergyMeter> m = open_nvml_energy_meter(*nvml, &why);
  ASSERT_TRUE(m) << why;
  EXPECT_EQ(m->source(), "nvml_total_energy");
  const std::optional<double> a = m->joules(&why), b = m->joules(&why);
  ASSERT_TRUE(a && b) << why;
  EXPECT_NEAR(*b - *a, 2.5, 1e-9);  // the fake's counter gains 2500 mJ per read
  nvml->total_energy = nullptr;    // a driver without the entry point
  EXPECT_FALSE(open_nvml_energy_meter(*nvml, &why));
  EXPECT_NE(why.find("nvmlDeviceGetTotalEnergyConsumption"), std::string::npos) << why;
}

TEST(EnergyMeter, PerStepFiguresFromTheWindow) {
  EnergyWindow w;
  w.first_step = 5, w.last_step = 25;
  w.joules_begin = 100.0, w.joules_end = 110.0;  // 10 J
  w.seconds_begin = 3.0, w.seconds_end = 5.0;    // over 2 s: 5 W
  const nlohmann::json j = energy_json("rapl (package-0)", w, /*median_step_ms=*/100.0, /*batch_size=*/32);
  EXPECT_EQ(j["steps"], nlohmann::json({6, 25}));
  EXPECT_DOUBLE_EQ(j["mean_power_w"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(j["j_per_step"].get<double>(), 0.5);         // 5 W x 0.1 s
  EXPECT_DOUBLE_EQ(j["samples_per_joule"].get<double>(), 64.0);  // 32 samples / 0.5 J
  w.seconds_end = w.seconds_begin;  // no time: nothing to divide by
  EXPECT_TRUE(energy_json("x", w, 100.0, 32)["j_per_step"].is_null());
}

}  // namespace
}  // namespace mpb
