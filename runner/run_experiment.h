// Runs every cell of an experiment and writes its result files.
#pragma once

#include <atomic>
#include <string>

#include "runner/config.h"

namespace mpb {

struct RunOptions {
  std::string out_dir = "results";  // results/<experiment name>/
  std::string device;               // overrides the file's device when not empty
  std::string filter;               // --filter
  bool dry_run = false;
  bool resume = false;
  bool quiet = false;
};

// Set by the SIGINT handler; checked between steps.
extern std::atomic<bool> g_interrupted;

// Returns the process exit code: 0 done, 1 device/runtime failure, 130 interrupted.
int run_experiment(const ExperimentConfig& exp, const RunOptions& opt);

}  // namespace mpb
