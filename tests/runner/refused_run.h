// Shared by the tests of the checks that refuse an experiment before it runs
// (measured window, memory fit): such a run exits kExitBadInput, as a dry run
// and as a real one, and writes nothing.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "runner/commands/run_experiment.h"

namespace mpb {
namespace config_test {

// Options for a quiet run into <the test temp dir>/<name>, removed first.
inline RunOptions quiet_run_into_fresh_dir(const std::string& name) {
  RunOptions opt;
  opt.out_dir = ::testing::TempDir() + name;
  opt.quiet = true;
  std::filesystem::remove_all(opt.out_dir);
  return opt;
}

// run_experiment(e, opt) as a dry run, then as a run: each exits kExitBadInput
// and leaves opt.out_dir unmade. opt.dry_run is false afterwards.
inline void expect_refused_writing_nothing(const ExperimentConfig& e, RunOptions& opt) {
  for (const bool dry_run : {true, false}) {
    opt.dry_run = dry_run;
    EXPECT_EQ(run_experiment(e, opt), kExitBadInput) << "dry_run " << dry_run;
    EXPECT_FALSE(std::filesystem::exists(opt.out_dir)) << "dry_run " << dry_run;
  }
}

}  // namespace config_test
}  // namespace mpb
