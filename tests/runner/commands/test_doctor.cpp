// `runner doctor`: how each machine check grades what it read (fed fixture
// values, not this machine's), and the real binary's JSON and exit code.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "opcheck/opcheck.h"
#include "runner/commands/doctor_checks.h"

namespace fs = std::filesystem;

namespace mpb {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

TEST(DoctorChecks, TooLittleMemoryOrDiskIsABlocker) {
  MemoryInfo m;
  m.available_bytes = kGiB / 2;
  m.total_bytes = 8 * kGiB;
  EXPECT_EQ(doctor::check_memory(m).status, CheckStatus::Fail);
  m.available_bytes = 4 * kGiB;
  EXPECT_EQ(doctor::check_memory(m).status, CheckStatus::Ok);
  m.available_bytes.reset();
  m.why = "no MemAvailable";
  EXPECT_EQ(doctor::check_memory(m).status, CheckStatus::Warn);  // unknown is not a blocker

  DiskSpace d;
  d.dir = d.checked = "results";
  d.free_bytes = 100ull << 20;
  d.total_bytes = 10 * kGiB;
  const DoctorCheck low = doctor::check_disk(d);
  EXPECT_EQ(low.status, CheckStatus::Fail);
  EXPECT_NE(low.finding.find("100.0 MiB free"), std::string::npos) << low.finding;
  d.free_bytes = 2 * kGiB;
  EXPECT_EQ(doctor::check_disk(d).status, CheckStatus::Ok);
}

TEST(DoctorChecks, GovernorOtherThanPerformanceWarns) {
  CpuClocks c;
  c.cpus = 2;
  c.governors = {{"performance", 2}};
  c.governor = "performance";
  EXPECT_EQ(doctor::check_cpu_governor(c).status, CheckStatus::Ok);
  c.governors = {{"powersave", 2}};
  c.governor = "powersave";
  const DoctorCheck ps = doctor::check_cpu_governor(c);
  EXPECT_EQ(ps.status, CheckStatus::Warn);
  EXPECT_NE(ps.meaning.find("performance"), std::string::npos);
  c.governors.clear();
  c.governor.reset();
  c.governor_why = "no cpufreq in this VM";
  const DoctorCheck vm = doctor::check_cpu_governor(c);
  EXPECT_EQ(vm.status, CheckStatus::Warn);  // not a blocker
  EXPECT_NE(vm.finding.find("not readable"), std::string::npos) << vm.finding;
  EXPECT_TRUE(vm.data["governor"].is_null());
}

TEST(DoctorChecks, BusyMachineWarnsAndNamesTheProcesses) {
  LoadWindow w;
  w.seconds = 1.0;
  w.other_cpu = 0.6;
  w.steal = 0.0;
  w.loadavg = {2.0, 1.5, 1.0};
  const DoctorCheck busy = doctor::check_machine_load(w, {{4242, "cc1plus", 0.95}});
  EXPECT_EQ(busy.status, CheckStatus::Warn);
  EXPECT_NE(busy.finding.find("cc1plus (pid 4242) 0.95 cores"), std::string::npos) << busy.finding;
  EXPECT_EQ(busy.data["busiest_processes"][0]["name"], "cc1plus");
  w.other_cpu = 0.02;
  EXPECT_EQ(doctor::check_machine_load(w, {}).status, CheckStatus::Ok);
  w.other_cpu.reset();
  EXPECT_EQ(doctor::check_machine_load(w, {}).status, CheckStatus::Warn);
}

TEST(DoctorChecks, EnvironmentOverridesWarn) {
  EXPECT_EQ(doctor::check_environment({}).status, CheckStatus::Ok);
  const DoctorCheck c = doctor::check_environment(find_overrides({"NVIDIA_TF32_OVERRIDE=0"}));
  EXPECT_EQ(c.status, CheckStatus::Warn);
  EXPECT_NE(c.finding.find("NVIDIA_TF32_OVERRIDE=0"), std::string::npos);
  EXPECT_EQ(c.data["overrides"]["NVIDIA_TF32_OVERRIDE"], "0");
}

TEST(DoctorChecks, LineSaysStatusNameFindingAndMeaning) {
  DoctorCheck c;
  c.name = "disk";
  c.status = CheckStatus::Fail;
  c.finding = "0.5 GiB free";
  c.meaning = "results could not be written";
  EXPECT_EQ(doctor_line(c), "FAIL  disk          0.5 GiB free — results could not be written");
}

// ---- the binary ----

struct DoctorRun {
  int exit_code = -1;
  std::string output;
  nlohmann::json json;
};

// runner doctor ARGS --json <tmp>: its exit code, output and JSON.
DoctorRun run_doctor_binary(const std::string& args) {
  const fs::path dir = fs::temp_directory_path() /
                       ("mpb_doctor_" + std::to_string(::getpid()) + "_" +
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path json = dir / "doctor.json", out = dir / "out.txt";
  DoctorRun r;
  if (!fs::exists(MPB_RUNNER_PATH)) {
    ADD_FAILURE() << MPB_RUNNER_PATH << " does not exist: build the runner target before these tests";
    return r;
  }
  const std::string cmd = std::string(MPB_RUNNER_PATH) + " doctor " + args + " --json " + json.string() + " >" +
                          out.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream o(out);
  r.output.assign(std::istreambuf_iterator<char>(o), {});
  if (fs::exists(json)) r.json = nlohmann::json::parse(std::ifstream(json));
  fs::remove_all(dir);
  return r;
}

const nlohmann::json* find_check(const nlohmann::json& report, const std::string& name) {
  for (const auto& c : report["checks"])
    if (c["name"] == name) return &c;
  return nullptr;
}

TEST(DoctorBinary, CpuRunWritesEveryCheckAndExitsByItsBlockers) {
  // Short windows: the checks, not their precision, are under test.
  const DoctorRun r = run_doctor_binary("--device cpu --selftest-seconds 3 --load-seconds 0.2 --gemm-size 256");
  ASSERT_TRUE(r.json.is_object()) << r.output;
  EXPECT_EQ(r.json["schema"], "mpbench.doctor/1");
  std::set<std::string> names;
  int fails = 0, warns = 0;
  for (const auto& c : r.json["checks"]) {
    names.insert(c["name"].get<std::string>());
    const std::string status = c["status"];
    EXPECT_TRUE(status == "ok" || status == "warn" || status == "FAIL") << c.dump();
    EXPECT_FALSE(c["finding"].get<std::string>().empty()) << c.dump();
    fails += status == "FAIL";
    warns += status == "warn";
    // Every check is one printed line.
    EXPECT_NE(r.output.find(c["finding"].get<std::string>()), std::string::npos) << c["name"];
  }
  for (const char* n : {"machine load", "build", "cpu governor", "cpu clock", "memory", "disk", "environment", "gpu",
                        "device", "gemm fp32", "gemm tf32", "gemm fp16", "gemm bf16", "energy", "selftest"})
    EXPECT_TRUE(names.count(n)) << "no check named " << n << "\n" << r.output;
  EXPECT_EQ(r.json["blockers"], fails);
  EXPECT_EQ(r.json["warnings"], warns);
  EXPECT_EQ(r.json["exit_code"], fails ? 1 : 0);
  EXPECT_EQ(r.exit_code, fails ? 1 : 0) << r.output;

  const nlohmann::json* device = find_check(r.json, "device");
  ASSERT_TRUE(device);
  EXPECT_EQ((*device)["status"], "ok");
  EXPECT_EQ((*device)["data"]["kind"], "cpu");
  EXPECT_EQ((*find_check(r.json, "gpu"))["status"], "ok") << "a GPU is never needed for --device cpu";
  const nlohmann::json* fp32 = find_check(r.json, "gemm fp32");
  EXPECT_GT((*fp32)["data"]["gflops"].get<double>(), 0.0);
  EXPECT_EQ((*fp32)["data"]["support"], "native");
  const nlohmann::json& self = (*find_check(r.json, "selftest"))["data"];
  EXPECT_GE(self["ran"].get<int>(), 1);
  EXPECT_EQ(self["failed"], 0) << self.dump();
  EXPECT_EQ(self["cases"][0]["case"].get<std::string>().rfind("gemm/", 0), 0u) << "GEMM cases run first";
  // The budget is checked before each case: at most one case past it.
  EXPECT_LT(self["seconds"].get<double>(), 3.0 + 5.0);
}

TEST(DoctorBinary, UnusableCudaDeviceIsABlocker) {
  if (!opcheck::backend_unavailable("cuda"))
    GTEST_SKIP() << "a usable GPU is present: --device cuda is not a blocker here";
  const DoctorRun r = run_doctor_binary("--device cuda --selftest-seconds 1 --load-seconds 0.1");
  ASSERT_TRUE(r.json.is_object()) << r.output;
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.json["exit_code"], 1);
  EXPECT_EQ((*find_check(r.json, "device"))["status"], "FAIL");
  EXPECT_EQ((*find_check(r.json, "gpu"))["status"], "FAIL");
  EXPECT_NE(r.output.find("FAIL  device"), std::string::npos) << r.output;
}

TEST(DoctorBinary, BadCommandLineExitsTwo) {
  const DoctorRun r = run_doctor_binary("--device tpu");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(r.json.is_null()) << "nothing is checked on a bad command line";
}

}  // namespace
}  // namespace mpb
