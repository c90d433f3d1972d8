// runner/machine/system_resources.h: /proc/meminfo text and free disk space of a
// results directory that does not exist yet.
#include <gtest/gtest.h>

#include "runner/machine/system_resources.h"
#include "tests/runner/fixture_tree.h"

namespace mpb {
namespace {

using test::FixtureTree;

const char* kMeminfo =
    "MemTotal:        8039424 kB\n"
    "MemFree:          301000 kB\n"
    "MemAvailable:    5242880 kB\n"
    "HugePages_Total:       0\n";

TEST(SystemResources, ParsesMeminfoInBytes) {
  EXPECT_EQ(*parse_meminfo_bytes(kMeminfo, "MemAvailable"), 5242880ull * 1024);
  EXPECT_EQ(*parse_meminfo_bytes(kMeminfo, "MemTotal"), 8039424ull * 1024);
  EXPECT_EQ(*parse_meminfo_bytes(kMeminfo, "HugePages_Total"), 0u);
  EXPECT_FALSE(parse_meminfo_bytes(kMeminfo, "Mem"));        // a prefix is not a key
  EXPECT_FALSE(parse_meminfo_bytes(kMeminfo, "SwapTotal"));  // absent
}

TEST(SystemResources, ReadsAvailableMemory) {
  FixtureTree t;
  t.write("meminfo", kMeminfo);
  const MemoryInfo m = read_memory_info(t.path("meminfo"));
  EXPECT_EQ(*m.available_bytes, 5ull << 30);
  EXPECT_TRUE(m.why.empty());
}

TEST(SystemResources, OldKernelWithoutMemAvailableSaysSo) {
  FixtureTree t;
  t.write("meminfo", "MemTotal: 1000 kB\nMemFree: 10 kB\n");
  const MemoryInfo m = read_memory_info(t.path("meminfo"));
  EXPECT_FALSE(m.available_bytes);
  EXPECT_NE(m.why.find("MemAvailable"), std::string::npos);
}

TEST(SystemResources, UnreadableMeminfoNamesTheFile) {
  FixtureTree t;
  const MemoryInfo m = read_memory_info(t.path("missing"));
  EXPECT_FALSE(m.available_bytes);
  EXPECT_NE(m.why.find("missing"), std::string::npos) << m.why;
}

TEST(SystemResources, DiskSpaceOfADirectoryNotMadeYet) {
  FixtureTree t;
  const DiskSpace d = free_disk_space(t.path("results/not/yet"));
  ASSERT_TRUE(d.free_bytes) << d.why;
  EXPECT_EQ(d.checked, t.root());  // its nearest existing ancestor
  EXPECT_GT(*d.total_bytes, 0u);
  EXPECT_LE(*d.free_bytes, *d.total_bytes);
}

}  // namespace
}  // namespace mpb
