// run_experiment()'s phases as the methods of one object (issue 32): each
// phase reads what the phases before it set, so a test can run the first few
// (no device is opened before open_device()) and look at what they decided.
// A phase that can end the run returns the exit code it ends with, or
// std::nullopt to go on. run() calls them in order.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device.h"
#include "runner/commands/run_experiment.h"
#include "runner/experiment/config.h"
#include "runner/experiment/run_plan.h"
#include "runner/experiment/shard.h"
#include "runner/machine/energy_meter.h"
#include "runner/machine/gpu_environment.h"
#include "runner/machine/gpu_telemetry.h"
#include "runner/machine/machine_load.h"
#include "runner/measure/cost_estimate.h"
#include "runner/results/result_dir.h"
#include "runner/results/watchdog.h"
#include "train/trainer.h"

namespace mpb {

// std::nullopt: go on with the next phase; else the run's exit code (ExitCode).
using PhaseResult = std::optional<int>;

// Where a cell's files lie in a results directory.
struct CellPaths {
  std::filesystem::path dir;
  std::filesystem::path cell(const Cell& c) const;  // cells/<slug>.json: the finished cell
  // Repeats of a cell that are done while others are not yet: a sidecar that
  // --resume reads, replaced by the cell JSON once the last repeat is done.
  std::filesystem::path partial(const Cell& c) const;
  // A cell the watchdog found hung (runner/results/hung_cell.h): --resume skips it.
  std::filesystem::path failed(const Cell& c) const;
};

// What is done of this run's cells: what earlier runs left (--resume), then
// what this run adds.
struct CellProgress {
  std::set<const Cell*> finished, hung;
  std::map<const Cell*, std::vector<nlohmann::json>> partial;  // finished repeats of unfinished cells
};

// A JSON file on disk that --resume may keep: same cell and config, else nullopt.
std::optional<nlohmann::json> matching_json(const std::filesystem::path& path, const Cell& cell);

class ExperimentRun {
 public:
  ExperimentRun(const ExperimentConfig& exp, const RunOptions& opt);
  ~ExperimentRun();
  ExperimentRun(const ExperimentRun&) = delete;
  ExperimentRun& operator=(const ExperimentRun&) = delete;

  int run();  // every phase below, in order; throws DeviceError, ResultDirBusy

  // --- before anything is built or written
  PhaseResult select_cells();     // --filter; the baseline first
  PhaseResult take_shard();       // --shard i/N's share; the results directory; the run plan
  PhaseResult check_cells_fit();  // memory estimate and measured window of every cell
  int dry_run();                  // --dry-run: the plan and its time estimate
  // --- the machine
  void open_device();               // the probe device, GPU telemetry, energy meter
  PhaseResult lock_clocks();        // --lock-clocks, held until the run object goes
  void warn_about_cells() const;    // the models' warnings, once each
  void sample_load_before();        // half a second of the machine's idle load
  PhaseResult measure_ceilings();   // the GEMM ceiling of every mode the cells use
  void choose_cost_basis();         // the estimate kept beside each cell's measured time
  // --- the results directory
  PhaseResult prepare_result_dir();  // lock, sweep to stale/, this run's id, foreign files refused
  void write_manifest();             // manifest.json as the run starts
  void load_earlier_progress();      // --resume: finished, hung and partial cells
  std::vector<nlohmann::json> finalize_cells();  // speed-ups against the baseline on disk; summary.csv
  // --- the measured repeats and the end
  enum class Stop { Finished, Interrupted, OutOfTime };
  Stop run_rounds();
  int finish(Stop stop);

  const std::vector<const Cell*>& cells() const { return cells_; }
  const std::filesystem::path& dir() const { return paths_.dir; }
  const CellPaths& paths() const { return paths_; }
  const RunPlan& plan() const { return plan_; }
  uint64_t order_seed() const { return seed_; }
  const std::string& run_id() const { return run_id_; }
  const CellProgress& progress() const { return progress_; }

 private:
  struct Interrupted {};
  struct TimeBudgetReached {};  // --max-minutes: stop between repeats

  void run_round(size_t ri);
  void run_unit(size_t ri, size_t pos);
  bool skip_done_unit(const RunUnit& unit);
  nlohmann::json train_repeat(const RunUnit& unit, size_t ri);
  void add_repeat_measurements(nlohmann::json& rep, const Device& dev, const RunRecord& rec, const CellConfig& cfg,
                               const EnergyWindow& window, std::string energy_why,
                               const std::string& rss_caveat) const;
  void print_progress(const RunUnit& unit, size_t ri, int step, const RunRecord& rr) const;
  void write_partial(const Cell& cell, const std::vector<nlohmann::json>& reps) const;
  void write_cell(const Cell& cell, const std::vector<nlohmann::json>& reps);
  void note_round_load(size_t ri, const LoadWindow& w);
  void on_hang(const WatchdogReport& r);
  std::string earlier_run_id() const;

  const ExperimentConfig& exp_;
  const RunOptions& opt_;
  const std::chrono::steady_clock::time_point t_begin_;  // --max-minutes counts from here
  std::string kind_;                                     // the device kind: --device or the file's

  std::vector<const Cell*> cells_;
  std::optional<ShardShare> share_;
  size_t cells_before_shard_ = 0;
  CellPaths paths_;
  uint64_t seed_ = 0;
  RunPlan plan_;

  std::unique_ptr<Device> probe_;
  DeviceInfo info_;
  std::string telemetry_why_ = "the CPU device has no GPU telemetry";
  std::unique_ptr<GpuTelemetry> telemetry_;
  std::string energy_why_;
  std::unique_ptr<EnergyMeter> energy_;
  std::unique_ptr<GpuClockLock> clock_lock_;
  nlohmann::json noise_;
  std::map<std::string, double> ceiling_;          // best per GEMM mode name, start and per repeat
  std::map<GemmCompute, double> start_ceiling_;    // at the start, as --dry-run's, for the estimate
  CostBasis cost_basis_;

  std::optional<ResultDirLock> lock_;  // held until the run object goes
  std::string run_id_;
  nlohmann::json manifest_;
  std::string manifest_path_;
  CellProgress progress_;

  // The rounds' progress.
  bool tty_ = false;
  std::chrono::steady_clock::time_point t_start_;
  double steps_total_ = 0, steps_done_ = 0;
  size_t unit_no_ = 0;
  bool ran_a_repeat_ = false;
  std::set<const Cell*> said_skipped_;
  std::atomic<const RunUnit*> training_{nullptr};  // the repeat now training, for the watchdog's thread
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace mpb
