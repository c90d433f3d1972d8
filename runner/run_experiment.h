// Runs every cell of an experiment and writes its result files.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "runner/config.h"
#include "runner/run_plan.h"

namespace mpb {

struct RunOptions {
  std::string out_dir = "results";  // results/<experiment name>/
  std::string device;               // overrides the file's device when not empty
  std::string filter;               // --filter
  bool dry_run = false;
  bool resume = false;
  bool quiet = false;
  RunOrder order = RunOrder::Interleaved;  // --order
  std::optional<uint64_t> order_seed;      // --order-seed; default: from the experiment's config hash
  // Testing only: a planted slowdown in every timed step, recorded in the
  // manifest (testing.inject_step_delay_ms) and warned about.
  double inject_step_delay_ms = 0.0;
};

// Set by the SIGINT handler; checked between steps.
extern std::atomic<bool> g_interrupted;

// Returns the process exit code: 0 done, 1 device/runtime failure, 130 interrupted.
int run_experiment(const ExperimentConfig& exp, const RunOptions& opt);

}  // namespace mpb
