// Runs every cell of an experiment and writes its result files.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "runner/experiment/config.h"
#include "runner/machine/gpu_environment.h"
#include "runner/experiment/run_plan.h"
#include "runner/experiment/shard.h"
#include "runner/results/watchdog.h"

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
  bool fail_on_divergence = false;  // exit kExitDiverged when a cell's loss went non-finite
  WatchdogLimits watchdog;           // --stall-timeout, --cell-timeout
  // Testing only: cells matching this --filter expression hang after step 3
  // of every repeat (a planted hang for the watchdog's test; in the manifest).
  std::string inject_hang;
  // --assume-gpu NAME: the GPU whose dense peaks the time estimate uses
  // (runner/measure/cost_estimate.h); empty: the device's own.
  std::string assume_gpu;
  // --lock-clocks: the SM clock held for the run (runner/machine/gpu_environment.h).
  std::optional<ClockLockRequest> lock_clocks;
  // --shard i/N: only this share of the cells (runner/experiment/shard.h), in
  // <out>/<name>.shard-<i>-of-<N>/, recorded in manifest.shard.
  std::optional<ShardSpec> shard;
  // --max-minutes: no repeat starts once this much wall time has passed since
  // the run began (the one running finishes, so a run can overrun by one
  // repeat; at least one repeat runs, so every slice makes progress); the run
  // then ends with kExitTimeBudget and --resume continues it. 0: no limit.
  double max_minutes = 0.0;
};

// The runner's exit codes (docs/RESULTS.md).
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,       // the device or a run failed, or a cell hung; finished cells are kept
  kExitBadInput = 2,      // bad experiment file or command line; nothing written
  kExitDiverged = 3,      // --fail-on-divergence and a cell diverged; every result written
  kExitBusy = 4,          // another runner is writing the same results directory; nothing written
  kExitTimeBudget = 5,    // --max-minutes passed; finished cells and repeats kept (--resume continues)
  kExitInterrupted = 130  // Ctrl-C / SIGTERM; finished cells and repeats kept (--resume)
};

// Set by the SIGINT handler; checked between steps.
extern std::atomic<bool> g_interrupted;

// Returns the process exit code (ExitCode). Throws DeviceError, ResultDirBusy.
int run_experiment(const ExperimentConfig& exp, const RunOptions& opt);

}  // namespace mpb
