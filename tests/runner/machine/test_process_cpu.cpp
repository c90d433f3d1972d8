// runner/machine/process_cpu.h: /proc/[pid]/stat lines (command names with spaces and
// parentheses), fixture /proc trees, and who used the CPU between two tables.
#include <gtest/gtest.h>

#include "runner/machine/process_cpu.h"
#include "tests/runner/fixture_tree.h"

namespace mpb {
namespace {

using test::FixtureTree;

// Fields after the command: state ppid pgrp session tty_nr tpgid flags minflt
// cminflt majflt cmajflt utime stime cutime cstime priority nice num_threads
// itrealvalue starttime vsize ...
std::string stat_line(int pid, const std::string& comm, int utime, int stime, int start) {
  return std::to_string(pid) + " (" + comm + ") R 1 1 1 0 -1 4194560 100 0 0 0 " + std::to_string(utime) + " " +
         std::to_string(stime) + " 0 0 20 0 4 0 " + std::to_string(start) + " 123456 789 18446744073709551615\n";
}

TEST(ProcessCpu, ParsesAStatLine) {
  const auto s = parse_proc_pid_stat(stat_line(4242, "cc1plus", 300, 50, 777));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->pid, 4242);
  EXPECT_EQ(s->comm, "cc1plus");
  EXPECT_EQ(s->cpu_ticks, 350u);
  EXPECT_EQ(s->start_ticks, 777u);
}

TEST(ProcessCpu, CommandNamesMayHoldSpacesAndParentheses) {
  const auto s = parse_proc_pid_stat(stat_line(7, "my (odd) name", 1, 2, 3));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->comm, "my (odd) name");
  EXPECT_EQ(s->cpu_ticks, 3u);
}

TEST(ProcessCpu, RejectsTruncatedOrGarbledLines) {
  EXPECT_FALSE(parse_proc_pid_stat(""));
  EXPECT_FALSE(parse_proc_pid_stat("12 (x) R 1 1"));
  EXPECT_FALSE(parse_proc_pid_stat("abc (x) R 1 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5 0 0"));
  EXPECT_FALSE(parse_proc_pid_stat("12 (x) R 1 1 1 0 -1 0 0 0 0 0 -1 1 0 0 20 0 1 0 5 0 0"));  // negative utime
}

TEST(ProcessCpu, ReadsOnlyNumberedDirectories) {
  FixtureTree t;
  t.write("proc/12/stat", stat_line(12, "a", 1, 1, 1));
  t.write("proc/345/stat", stat_line(345, "b c", 2, 2, 2));
  t.write("proc/self/stat", stat_line(12, "a", 1, 1, 1));  // a link on a real /proc: not a process
  t.write("proc/99/stat", "garbage");
  t.mkdir("proc/100");  // exited between the listing and the read: no stat file
  const auto table = read_process_table(t.path("proc"));
  ASSERT_EQ(table.size(), 2u);
  EXPECT_EQ(table.at(345).comm, "b c");
}

TEST(ProcessCpu, BusiestProcessesOverAWindow) {
  std::map<int, ProcStat> before, after;
  before[1] = {1, "idle", 100, 5};
  after[1] = {1, "idle", 100, 5};        // used nothing
  before[2] = {2, "hog", 1000, 6};
  after[2] = {2, "hog", 1200, 6};        // 200 ticks over 2 s at 100 Hz: one core
  before[3] = {3, "self", 0, 7};
  after[3] = {3, "self", 500, 7};        // the caller: left out
  after[4] = {4, "new", 50, 900};        // started inside the window: counts from zero
  before[5] = {5, "old", 5000, 8};
  after[5] = {5, "reused", 30, 950};     // PID reused by a new process (other start time)
  before[6] = {6, "tiny", 0, 9};
  after[6] = {6, "tiny", 1, 9};          // 0.005 cores: under min_cores
  const auto top = busiest_processes(before, after, 2.0, 100.0, /*exclude_pid=*/3, /*top=*/10, 0.01);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].name, "hog");
  EXPECT_DOUBLE_EQ(top[0].cores, 1.0);
  EXPECT_EQ(top[1].name, "new");
  EXPECT_DOUBLE_EQ(top[1].cores, 0.25);
  EXPECT_EQ(top[2].name, "reused");
  EXPECT_DOUBLE_EQ(top[2].cores, 0.15);
  EXPECT_EQ(busiest_processes(before, after, 2.0, 100.0, 3, 1).size(), 1u);
  EXPECT_TRUE(busiest_processes(before, after, 0.0, 100.0, 3, 10).empty());
}

}  // namespace
}  // namespace mpb
