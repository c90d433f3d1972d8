// core/host_memory.h: the host memory a cell may use is the smallest of
// MemAvailable, RLIMIT_AS's headroom and the cgroup's (issue 43 item 17), on
// planted /proc and cgroup text, and under a real `ulimit -v` in a child.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/host_memory.h"

namespace mpb {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

TEST(HostMemory, TheSmallestLimitWinsAndIsNamed) {
  HostMemory m = smallest_limit(8 * kMiB, 3 * kMiB, 5 * kMiB);
  EXPECT_EQ(m.available, 3 * kMiB);
  EXPECT_EQ(m.limited_by, "RLIMIT_AS (ulimit -v)");
  m = smallest_limit(8 * kMiB, std::nullopt, 5 * kMiB);
  EXPECT_EQ(m.limited_by, "cgroup memory.max");
  m = smallest_limit(8 * kMiB, std::nullopt, std::nullopt);
  EXPECT_EQ(m.available, 8 * kMiB);
  EXPECT_EQ(m.limited_by, "MemAvailable");
  EXPECT_FALSE(smallest_limit(std::nullopt, std::nullopt, std::nullopt).available);
}

TEST(HostMemory, ParsesProcAndCgroupText) {
  EXPECT_EQ(parse_kib_line("MemTotal:  100 kB\nMemAvailable:   2048 kB\n", "MemAvailable"), 2048u * 1024);
  EXPECT_EQ(parse_kib_line("VmPeak:\t  10 kB\nVmSize:\t   7 kB\n", "VmSize"), 7u * 1024);
  EXPECT_FALSE(parse_kib_line("MemFree: 1 kB\n", "MemAvailable"));
  EXPECT_EQ(parse_cgroup_v2_path("0::/user.slice/session-1.scope\n"), "/user.slice/session-1.scope");
  EXPECT_FALSE(parse_cgroup_v2_path("4:memory:/docker/abc\n"));
  EXPECT_EQ(parse_cgroup_v1_memory_path("5:cpu,cpuacct:/a\n4:memory:/docker/abc\n"), "/docker/abc");
  EXPECT_EQ(parse_cgroup_v1_memory_path("3:cpuset,memory:/b\n"), "/b");
  EXPECT_FALSE(parse_cgroup_v1_memory_path("0::/x\n"));
  EXPECT_EQ(cgroup_headroom("1000\n", "400\n"), 600u);
  EXPECT_EQ(cgroup_headroom("1000\n", "1400\n"), 0u);     // over its limit already: nothing left
  EXPECT_FALSE(cgroup_headroom("max\n", "400\n"));        // v2: no limit
  EXPECT_FALSE(cgroup_headroom("9223372036854771712\n", "400\n"));  // v1: no limit
}

#if defined(__SANITIZE_ADDRESS__)
#define MPB_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MPB_UNDER_ASAN 1
#endif
#endif

// In a child (a death test's process): RLIMIT_AS set 512 MiB above what the
// process maps now, and host_memory() must say about 512 MiB, by RLIMIT_AS.
TEST(HostMemory, AnAddressSpaceLimitIsSeen) {
#ifdef MPB_UNDER_ASAN
  GTEST_SKIP() << "ASan maps terabytes of shadow memory: an address-space limit cannot be set under it";
#else
  EXPECT_EXIT(
      {
        std::ifstream status("/proc/self/status");
        std::stringstream text;
        text << status.rdbuf();
        const std::optional<size_t> mapped = parse_kib_line(text.str(), "VmSize");
        struct rlimit limit {};
        if (!mapped || getrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(3);
        limit.rlim_cur = *mapped + 512 * kMiB;
        if (limit.rlim_max != RLIM_INFINITY && limit.rlim_cur > limit.rlim_max) std::_Exit(4);
        if (setrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(5);
        const HostMemory m = host_memory();
        // A little less than 512 MiB: reading the files maps a few pages more.
        const bool ok = m.available && *m.available <= 512 * kMiB && *m.available > 400 * kMiB &&
                        m.limited_by == "RLIMIT_AS (ulimit -v)";
        std::_Exit(ok ? 0 : 6);
      },
      ::testing::ExitedWithCode(0), "");
#endif
}

}  // namespace
}  // namespace mpb
