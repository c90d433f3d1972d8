// ExperimentRun's phases on the results directory: lock and sweep, the run's
// id, the manifest, --resume's earlier progress, speed-ups, and the end.
#include <cstdio>
#include <set>
#include <string>

#include "runner/commands/experiment_run.h"
#include "runner/io/atomic_file.h"
#include "runner/io/seconds_since.h"
#include "runner/machine/gpu_environment.h"
#include "runner/results/convergence_json.h"
#include "runner/results/manifest.h"
#include "runner/results/results.h"
#include "runner/results/run_identity.h"
#include "runner/results/terminal_table.h"

namespace fs = std::filesystem;

namespace mpb {

PhaseResult ExperimentRun::prepare_result_dir() {
  const fs::path& dir = paths_.dir;
  lock_.emplace(dir);  // ResultDirBusy -> caller; held until the run object goes
  const EarlierResults earlier = opt_.resume ? EarlierResults::Keep : EarlierResults::Replace;
  // What the sweep would move, then whether what stays is this run's: a run
  // refused for a stranger moves and creates nothing (issue 43 item 2: it had
  // swept the baseline's file to stale/ and made partial/ before refusing).
  std::set<std::string> moved_away;  // relative to dir: what the sweep moves to stale/
  for (const StaleMove& m : sweep_result_dir(dir, exp_.cells, cells_, earlier, SweepMode::Plan))
    if (m.to.rfind("stale/", 0) == 0) moved_away.insert(m.from);
  // This run's id (runner/results/run_identity.h): the earlier manifest's while earlier
  // results stay beside this run's (--resume, or --filter keeping the other
  // cells), else a new one. A file that stays but belongs to another run or
  // experiment (copied in by hand) is refused before anything is written.
  const std::string earlier_id = earlier_run_id();
  bool kept_results = false;
  for (const char* sub : {"cells", "partial", "failed"}) {
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(dir / sub, ec))) continue;
    for (const auto& e : fs::directory_iterator(dir / sub, ec))
      if (!moved_away.count(std::string(sub) + "/" + e.path().filename().string())) kept_results = true;
  }
  run_id_ = kept_results && !earlier_id.empty() ? earlier_id : new_run_id();
  const std::vector<std::string> strangers =
      stranger_files(dir, RunMembership{exp_.name, {run_id_}, earlier_id.empty()}, moved_away);
  if (!strangers.empty()) {
    for (const std::string& s : strangers) std::fprintf(stderr, "error: %s\n", s.c_str());
    std::fprintf(stderr, "error: %zu result file(s) in %s are not this run's: move them away (a cell of another run "
                 "was measured against another baseline); nothing was written\n", strangers.size(),
                 dir.string().c_str());
    return kExitBadInput;
  }
  for (const StaleMove& m : sweep_result_dir(dir, exp_.cells, cells_, earlier))
    if (!opt_.quiet) std::fprintf(stderr, "runner: %s -> %s: %s\n", m.from.c_str(), m.to.c_str(), m.reason.c_str());
  fs::create_directories(dir / "cells");
  fs::create_directories(dir / "partial");
  return std::nullopt;
}

// The run id of the manifest already in the directory; empty when there is
// none or it cannot be read (an unreadable manifest is rewritten).
std::string ExperimentRun::earlier_run_id() const {
  const fs::path manifest = paths_.dir / "manifest.json";
  if (!fs::exists(manifest)) return std::string();
  try {
    return recorded_run_id(nlohmann::json::parse(read_file(manifest.string())));
  } catch (const std::exception&) {
    return std::string();
  }
}

void ExperimentRun::write_manifest() {
  manifest_ = build_manifest(exp_, info_, ceiling_);
  manifest_["run_id"] = run_id_;
  // Headers vs loaded CUDA libraries (runner/machine/library_check.h), said once.
  if (info_.kind == DeviceKind::Cuda && !opt_.quiet)
    for (const auto& w : manifest_["libraries"]["warnings"])
      std::fprintf(stderr, "runner: warning: %s\n", w.get<std::string>().c_str());
  if (info_.kind == DeviceKind::Cuda) {  // the GPU's fixed facts (runner/machine/gpu_environment.h)
    manifest_["device"]["gpu"]["nvml"] = telemetry_ ? gpu_environment_json(telemetry_->nvml()) : nlohmann::json(nullptr);
    if (!telemetry_) manifest_["device"]["gpu"]["nvml_why"] = telemetry_why_;
  }
  manifest_["device"]["clock_lock"] = clock_lock_ ? clock_lock_->to_json() : nlohmann::json(nullptr);
  manifest_["order"] = run_plan_json(plan_);
  if (share_) {
    manifest_["shard"] = shard_json(*share_, opt_.filter);
    manifest_["shard"]["environment"] = scheduler_environment_json();
  }
  if (opt_.inject_step_delay_ms > 0) {
    // Never to be mistaken for a real measurement: said in the manifest, in every cell, and here.
    manifest_["testing"] = {{"inject_step_delay_ms", opt_.inject_step_delay_ms}};
    std::fprintf(stderr, "runner: warning: TESTING: every timed step sleeps %.3g ms (--inject-step-delay-ms); "
                 "these results are not measurements\n", opt_.inject_step_delay_ms);
  }
  if (!opt_.inject_hang.empty()) {
    manifest_["testing"]["inject_hang"] = opt_.inject_hang;
    std::fprintf(stderr, "runner: warning: TESTING: cells matching '%s' hang after step 3 (--inject-hang)\n",
                 opt_.inject_hang.c_str());
  }
  manifest_["noise"] = noise_;
  manifest_path_ = (paths_.dir / "manifest.json").string();
  write_file_atomic(manifest_path_, manifest_.dump(2) + "\n");
}

void ExperimentRun::load_earlier_progress() {
  progress_ = CellProgress{};
  if (!opt_.resume) return;  // prepare_result_dir's sweep moved their earlier files to stale/
  for (const Cell* c : cells_) {
    if (matching_json(paths_.cell(*c), *c)) {
      progress_.finished.insert(c);
    } else if (matching_json(paths_.failed(*c), *c)) {
      progress_.hung.insert(c);
    } else if (auto p = matching_json(paths_.partial(*c), *c)) {
      for (const auto& rep : p->at("repeats"))
        if (rep.at("repeat").get<int>() < c->config.repeats) progress_.partial[c].push_back(rep);
    }
  }
}

// Derived fields (speed-ups and their intervals) from every finished cell
// on disk, so that a resumed run's cells all compare with the same
// baseline result; then the CSV, in matrix order.
// The baseline is the one the experiment file names now: a resumed run
// whose baseline was edited recomputes every speed-up against it.
std::vector<nlohmann::json> ExperimentRun::finalize_cells() {
  std::vector<nlohmann::json> done;
  std::vector<const Cell*> of;
  for (const Cell& c : exp_.cells)
    if (auto j = matching_json(paths_.cell(c), c)) {
      done.push_back(*j);
      of.push_back(&c);
    }
  std::vector<nlohmann::json> updated = done;
  auto update = [&](size_t i, const nlohmann::json* base) {
    updated[i]["is_baseline"] = of[i]->is_baseline;
    updated[i]["run_id"] = run_id_;  // a file from before run ids, in a directory it started, joins this run
    apply_speedup(updated[i], base);
  };
  const nlohmann::json* base = nullptr;
  for (size_t i = 0; i < done.size(); ++i)
    if (of[i]->is_baseline) {
      update(i, nullptr);
      base = &updated[i];
    }
  for (size_t i = 0; i < done.size(); ++i) {
    if (&updated[i] == base) continue;
    const bool same_model =
        base && base->at("config").at("model").at("kind") == updated[i].at("config").at("model").at("kind");
    update(i, same_model ? base : nullptr);
  }
  std::vector<nlohmann::json*> family;
  for (nlohmann::json& j : updated) family.push_back(&j);
  apply_convergence_family(family);  // runner/results/convergence_json.h: Holm over the cells
  for (size_t i = 0; i < done.size(); ++i) {
    if (updated[i] == done[i]) continue;  // unchanged files are not rewritten
    write_file_atomic(paths_.cell(*of[i]).string(), updated[i].dump(1) + "\n");
    done[i] = std::move(updated[i]);
  }
  const nlohmann::json& commit = manifest_["git_commit"];
  const CommitsByRun commits{{run_id_, commit.is_string() ? commit.get<std::string>() : std::string()}};
  write_file_atomic((paths_.dir / "summary.csv").string(), summary_csv(done, commits));
  return done;
}

int ExperimentRun::finish(Stop stop) {
  std::vector<nlohmann::json> written = finalize_cells();
  if (fs::is_empty(paths_.dir / "partial")) fs::remove(paths_.dir / "partial");
  // Cells the watchdog found hung, in this run or (with --resume) an earlier one.
  nlohmann::json failed_cells = nlohmann::json::array();
  for (const Cell& c : exp_.cells)
    if (auto f = matching_json(paths_.failed(c), c)) failed_cells.push_back(*f);
  manifest_["failed_cells"] = failed_cells;
  if (stop != Stop::Finished) {  // not "finished": --resume goes on from here
    if (stop == Stop::OutOfTime)
      manifest_["stopped"] = {{"reason", "max_minutes"}, {"max_minutes", opt_.max_minutes}, {"at", utc_now_iso8601()}};
    write_file_atomic(manifest_path_, manifest_.dump(2) + "\n");
    return stop == Stop::Interrupted ? kExitInterrupted : kExitTimeBudget;
  }
  manifest_["finished"] = utc_now_iso8601();
  manifest_["device"]["ceiling_gflops"] = ceiling_;  // the best of the start and per-repeat measurements
  write_file_atomic(manifest_path_, manifest_.dump(2) + "\n");
  if (!opt_.quiet) {
    print_table(written);
    for (const auto& w : manifest_["noise"]["warnings"]) std::printf("warning: %s\n", w.get<std::string>().c_str());
    std::printf("\nresults: %s\n", paths_.dir.string().c_str());
  }
  for (const auto& f : failed_cells)
    std::fprintf(stderr, "runner: %s: %s (repeat %d; failed/%s.json)\n", f.at("cell_id").get<std::string>().c_str(),
                 f.at("reason").get<std::string>().c_str(), f.at("repeat").get<int>() + 1,
                 cell_slug(f.at("cell_id").get<std::string>()).c_str());
  if (!failed_cells.empty()) return kExitFailure;
  // A diverged cell is a result (its losses are null, the table says
  // "diverged"), so by default the run succeeded; CI that wants to notice asks.
  std::vector<std::string> diverged;
  for (const auto& c : written)
    if (cell_diverged(c)) diverged.push_back(c.at("cell_id").get<std::string>());
  if (!diverged.empty() && opt_.fail_on_divergence) {
    for (const std::string& id : diverged) std::fprintf(stderr, "runner: diverged: %s\n", id.c_str());
    return kExitDiverged;
  }
  return kExitOk;
}

}  // namespace mpb
