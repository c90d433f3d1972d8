#include "runner/commands/run_experiment.h"

#include <filesystem>

#include "runner/commands/experiment_run.h"
#include "config/schema.h"
#include "runner/io/atomic_file.h"

namespace fs = std::filesystem;

namespace mpb {

std::atomic<bool> g_interrupted{false};

fs::path CellPaths::cell(const Cell& c) const { return dir / "cells" / (c.slug + ".json"); }
fs::path CellPaths::partial(const Cell& c) const { return dir / "partial" / (c.slug + ".json"); }
fs::path CellPaths::failed(const Cell& c) const { return dir / "failed" / (c.slug + ".json"); }

std::optional<nlohmann::json> matching_json(const fs::path& path, const Cell& cell) {
  if (!fs::exists(path)) return std::nullopt;
  try {
    nlohmann::json j = nlohmann::json::parse(read_file(path.string()));
    if (j.at("cell_id") == cell.id && j.at("config_hash") == config_hash(cell_config_to_json(cell.config))) return j;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

ExperimentRun::ExperimentRun(const ExperimentConfig& exp, const RunOptions& opt)
    : exp_(exp), opt_(opt), t_begin_(std::chrono::steady_clock::now()),
      kind_(opt.device.empty() ? exp.device : opt.device) {}

ExperimentRun::~ExperimentRun() = default;

int ExperimentRun::run() {
  // Before anything is built or written: which cells, in which order, and
  // whether each can run at all.
  for (auto phase : {&ExperimentRun::select_cells, &ExperimentRun::take_shard, &ExperimentRun::check_cells_fit})
    if (const PhaseResult rc = (this->*phase)()) return *rc;
  if (opt_.dry_run) return dry_run();
  // The machine: device, telemetry, clocks, load and ceilings.
  open_device();  // DeviceError -> caller
  if (const PhaseResult rc = lock_clocks()) return *rc;
  warn_about_cells();
  sample_load_before();
  if (const PhaseResult rc = measure_ceilings()) return *rc;
  choose_cost_basis();
  // The results directory, then the measured repeats.
  if (const PhaseResult rc = prepare_result_dir()) return *rc;  // ResultDirBusy -> caller
  write_manifest();
  load_earlier_progress();
  return finish(run_rounds());
}

int run_experiment(const ExperimentConfig& exp, const RunOptions& opt) {
  ExperimentRun run(exp, opt);
  return run.run();
}

}  // namespace mpb
