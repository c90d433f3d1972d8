// The memory triple (runner/measure/memory_triple.h, issue 18): the allocator's peak,
// the process's peak (RSS high-water mark here on the CPU, restarted per
// repeat), the device's used peak (NVML; null with a reason on the CPU), and
// a cell's summary over its repeats.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "runner/measure/memory_triple.h"

namespace mpb {
namespace {

namespace fs = std::filesystem;

TEST(MemoryTriple, ReadsVmHwmInBytes) {
  const fs::path status = fs::path(::testing::TempDir()) / "mpb_status";
  std::ofstream(status) << "Name:\trunner\nVmPeak:\t  900 kB\nVmHWM:\t    1234 kB\nVmRSS:\t  1000 kB\n";
  std::string why;
  EXPECT_EQ(resident_peak_bytes(&why, status.string()), std::optional<uint64_t>(1234u * 1024u));
  std::ofstream(status) << "Name:\trunner\n";
  EXPECT_EQ(resident_peak_bytes(&why, status.string()), std::nullopt);
  EXPECT_NE(why.find("no VmHWM"), std::string::npos) << why;
}

TEST(MemoryTriple, UnwritableClearRefsIsACaveatNotAFailure) {
  std::string why;
  EXPECT_FALSE(reset_resident_peak(&why, "/nonexistent/clear_refs"));
  EXPECT_NE(why.find("peak since it started"), std::string::npos) << why;
}

// The real thing: 64 MiB touched raise the peak; after a restart, freed,
// the peak is back near the current RSS.
TEST(MemoryTriple, RestartedPeakForgetsWhatWasFreed) {
  std::string why;
  if (!reset_resident_peak(&why)) GTEST_SKIP() << why;
  const uint64_t start = resident_peak_bytes(&why).value_or(0);
  constexpr size_t kBytes = size_t{64} << 20;
  // mmap/munmap, not the heap: a sanitizer's allocator keeps freed heap
  // memory resident (ASan's quarantine), munmap returns it for sure.
  void* big = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(big, MAP_FAILED);
  std::memset(big, 1, kBytes);  // resident, not just reserved
  EXPECT_GE(resident_peak_bytes(&why).value_or(0), start + kBytes - (size_t{4} << 20));
  ASSERT_EQ(munmap(big, kBytes), 0);
  ASSERT_TRUE(reset_resident_peak(&why)) << why;
  EXPECT_LT(resident_peak_bytes(&why).value_or(0), start + kBytes / 2);
}

TEST(MemoryTriple, CpuRepeatHasRssAndSaysWhyNoDeviceFigure) {
  const std::unique_ptr<Device> cpu = make_cpu_device();
  MemorySnapshot tracked;
  tracked.peak_total = 4096;
  const nlohmann::json j = repeat_memory_json(*cpu, tracked, nullptr, "the CPU device has no GPU telemetry", "");
  EXPECT_EQ(j["allocator_peak_bytes"], 4096);
  EXPECT_EQ(j["process_peak_source"], "rss_high_water_mark");
  ASSERT_TRUE(j["process_peak_bytes"].is_number()) << j.dump();
  EXPECT_GT(j["process_peak_bytes"].get<uint64_t>(), 4096u);
  EXPECT_TRUE(j["process_peak_why"].is_null());
  EXPECT_TRUE(j["device_used_peak_bytes"].is_null());
  EXPECT_NE(j["device_used_why"].get<std::string>().find("process_peak_bytes is the figure"), std::string::npos);
}

TEST(MemoryTriple, SummaryTakesEachFiguresLargestRepeat) {
  MemoryTripleInputs a, b;
  a.allocator_peak_bytes = 100;
  a.process_peak_bytes = 500;
  a.process_source = b.process_source = "cudaMalloc";
  a.device_used_peak_bytes = 9000;
  b.allocator_peak_bytes = 120;
  b.process_peak_bytes = 450;
  b.device_used_why = "NVML gave no memory reading";
  const std::vector<nlohmann::json> repeats = {{{"memory", memory_triple_json(a)}},
                                               {{"memory", memory_triple_json(b)}},
                                               {{"repeat", 2}}};  // written before the triple: skipped
  const nlohmann::json s = summarize_memory_triples(repeats);
  EXPECT_EQ(s["allocator_peak_bytes"], 120);
  EXPECT_EQ(s["process_peak_bytes"], 500);
  EXPECT_EQ(s["process_peak_source"], "cudaMalloc");
  EXPECT_EQ(s["device_used_peak_bytes"], 9000);
  EXPECT_EQ(s["device_used_why"], "NVML gave no memory reading");
  EXPECT_TRUE(summarize_memory_triples({})["process_peak_bytes"].is_null());
}

}  // namespace
}  // namespace mpb
