// A temporary directory the /proc and /sys readers are pointed at instead of
// the machine's own, so their tests do not depend on the machine running them
// (a VM has no cpufreq; a laptop has it). Removed when the test ends.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace mpb::test {

class FixtureTree {
 public:
  FixtureTree() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = std::filesystem::temp_directory_path() /
            ("mpb_fixture_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~FixtureTree() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  FixtureTree(const FixtureTree&) = delete;
  FixtureTree& operator=(const FixtureTree&) = delete;

  // Writes root/rel (creating its directories) with `text`.
  void write(const std::string& rel, const std::string& text) const {
    const std::filesystem::path p = root_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  void mkdir(const std::string& rel) const { std::filesystem::create_directories(root_ / rel); }
  std::string root() const { return root_.string(); }
  std::string path(const std::string& rel) const { return (root_ / rel).string(); }

 private:
  std::filesystem::path root_;
};

}  // namespace mpb::test
