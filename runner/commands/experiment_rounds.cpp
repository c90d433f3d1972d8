// ExperimentRun's measured repeats: the rounds of the run plan, each repeat
// trained on a fresh device under the watchdog, its measurements, and the
// partial or cell file it ends in.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include "config/schema.h"
#include "runner/commands/experiment_run.h"
#include "runner/io/atomic_file.h"
#include "runner/io/seconds_since.h"
#include "runner/machine/device_factory.h"
#include "runner/measure/ceiling.h"
#include "runner/measure/memory_triple.h"
#include "runner/measure/stats.h"
#include "runner/results/data_facts.h"
#include "runner/results/hung_cell.h"
#include "runner/results/manifest.h"
#include "runner/results/results.h"
#include "runner/results/terminal_table.h"
#include "train/cell_factory.h"
#include "train/trainer.h"

namespace fs = std::filesystem;

namespace mpb {

ExperimentRun::Stop ExperimentRun::run_rounds() {
  tty_ = isatty(fileno(stderr));
  t_start_ = std::chrono::steady_clock::now();
  for (const auto& round : plan_.rounds)
    for (const RunUnit& u : round) steps_total_ += u.cell->config.steps;
  watchdog_ = std::make_unique<Watchdog>(opt_.watchdog, [this](const WatchdogReport& r) { on_hang(r); });
  try {
    for (size_t ri = 0; ri < plan_.rounds.size(); ++ri) run_round(ri);
  } catch (const Interrupted&) {
    std::fprintf(stderr, "\nrunner: interrupted; every finished cell and repeat is kept in %s (rerun with --resume)\n",
                 paths_.dir.string().c_str());
    return Stop::Interrupted;
  } catch (const TimeBudgetReached&) {
    std::fprintf(stderr,
                 "runner: --max-minutes %g passed; stopped before repeat %zu of %zu; every finished cell and repeat "
                 "is kept in %s (rerun with --resume to go on)\n",
                 opt_.max_minutes, unit_no_, plan_.units(), paths_.dir.string().c_str());
    return Stop::OutOfTime;
  }
  return Stop::Finished;
}

// The watchdog's thread: the repeat now training stopped making progress.
void ExperimentRun::on_hang(const WatchdogReport& r) {
  const RunUnit* u = training_.load();
  if (!u) return;
  nlohmann::json record = hung_cell_record(*u->cell, u->repeat, r);
  record["experiment"] = exp_.name;
  record["run_id"] = run_id_;
  record_hang_and_restart(paths_.failed(*u->cell), record);
  std::_Exit(kExitFailure);  // exec failed; the training thread is stuck, so end here
}

void ExperimentRun::run_round(size_t ri) {
  LoadSampler load;
  load.begin();
  for (size_t pos = 0; pos < plan_.rounds[ri].size(); ++pos) run_unit(ri, pos);
  note_round_load(ri, load.end());
  write_file_atomic(manifest_path_, manifest_.dump(2) + "\n");
}

// The machine's load during a round, in the manifest; a busy machine is warned about.
void ExperimentRun::note_round_load(size_t ri, const LoadWindow& w) {
  nlohmann::json wj = w.to_json();
  wj["round"] = int(ri);
  manifest_["noise"]["rounds"].push_back(wj);
  const std::string when = plan_.order == RunOrder::Interleaved
                               ? "during round " + std::to_string(ri + 1)
                               : "while " + plan_.rounds[ri].front().cell->id + " ran";
  if (!w.busy()) return;
  manifest_["noise"]["busy"] = true;
  manifest_["noise"]["warnings"].push_back(load_warning(when, w));
  if (!opt_.quiet)
    std::fprintf(stderr, "runner: warning: %s\n", manifest_["noise"]["warnings"].back().get<std::string>().c_str());
}

// A repeat whose cell is finished or hung, or which an earlier run did (--resume).
bool ExperimentRun::skip_done_unit(const RunUnit& unit) {
  const Cell& cell = *unit.cell;
  const auto& reps = progress_.partial[&cell];
  const bool have =
      std::any_of(reps.begin(), reps.end(), [&](const nlohmann::json& r) { return r.at("repeat") == unit.repeat; });
  const bool finished = progress_.finished.count(&cell) != 0, hung = progress_.hung.count(&cell) != 0;
  if (!finished && !hung && !have) return false;
  if (!opt_.quiet && said_skipped_.insert(&cell).second)
    std::fprintf(stderr, "[%zu/%zu] %s: %s earlier, skipped (--resume)\n", unit_no_, plan_.units(), cell.id.c_str(),
                 finished ? "finished"
                 : hung   ? "hung (failed/" "*.json; rerun without --resume to retry)"
                          : "some repeats finished");
  steps_done_ += cell.config.steps;
  return true;
}

void ExperimentRun::run_unit(size_t ri, size_t pos) {
  const RunUnit& unit = plan_.rounds[ri][pos];
  const Cell& cell = *unit.cell;
  const CellConfig& cfg = cell.config;
  ++unit_no_;
  if (skip_done_unit(unit)) return;
  // Checked only once this run has trained a repeat: every slice makes
  // progress, however short its budget against the set-up.
  if (opt_.max_minutes > 0 && ran_a_repeat_ && seconds_since(t_begin_) >= opt_.max_minutes * 60.0)
    throw TimeBudgetReached{};
  ran_a_repeat_ = true;
  // The ceiling again, right before this repeat: the cell's fraction of
  // it is then a ratio measured in one time window (a shared machine's
  // speed drifts), and the best measurement of the run is kept.
  const std::string mode_name = gemm_compute_name(cfg.policy.gemm);
  if (!opt_.quiet)
    std::fprintf(stderr, "%s[%zu/%zu] round %zu/%zu  %s  repeat %d/%d  starting%s", tty_ ? "\r\033[K" : "", unit_no_,
                 plan_.units(), ri + 1, plan_.rounds.size(), cell.id.c_str(), unit.repeat + 1, cfg.repeats,
                 tty_ ? "" : "\n");
  const double repeat_ceiling = measure_gemm_ceiling(*probe_, cfg.policy.gemm, 0, 3, &g_interrupted);
  if (g_interrupted) throw Interrupted{};
  ceiling_[mode_name] = std::max(ceiling_[mode_name], repeat_ceiling);

  const std::string started = utc_now_iso8601();
  const double started_s = seconds_since(t_start_);
  // Watched from here to the cell's files: set-up (device, data, model) included.
  training_ = &unit;
  watchdog_->arm("cell " + cell.id + " repeat " + std::to_string(unit.repeat + 1), cfg.steps);
  struct Disarm {
    Watchdog& w;
    ~Disarm() { w.disarm(); }
  } disarm{*watchdog_};
  nlohmann::json rep = train_repeat(unit, ri);
  rep["order"] = run_order_name(plan_.order);
  rep["round"] = int(ri);  // manifest order.rounds[round][position] is this repeat
  rep["position"] = int(pos);
  rep["started"] = started;
  rep["started_s"] = started_s;
  rep["ceiling_gflops"] = repeat_ceiling;
  if (opt_.inject_step_delay_ms > 0) rep["testing"] = {{"inject_step_delay_ms", opt_.inject_step_delay_ms}};
  auto& reps = progress_.partial[&cell];
  reps.push_back(rep);
  std::sort(reps.begin(), reps.end(),
            [](const nlohmann::json& a, const nlohmann::json& b) { return a.at("repeat") < b.at("repeat"); });
  if (int(reps.size()) < cfg.repeats)
    write_partial(cell, reps);
  else
    write_cell(cell, reps);
}

// One repeat's training on a fresh device (peak memory is this repeat's
// alone) and its measurements: the repeat's JSON without its place in the plan.
nlohmann::json ExperimentRun::train_repeat(const RunUnit& unit, size_t ri) {
  const CellConfig& cfg = unit.cell->config;
  const int r = unit.repeat;
  const bool plant_hang = !opt_.inject_hang.empty() && cell_matches_filter(*unit.cell, opt_.inject_hang);
  std::unique_ptr<Device> dev = make_device(info_.kind);
  std::unique_ptr<Dataset> data = build_dataset(cfg, cfg.seed + r);
  std::unique_ptr<Model> model = build_model(*dev, cfg, cfg.seed + r);
  TrainOptions train_opt;
  train_opt.inject_step_delay_ms = opt_.inject_step_delay_ms;
  train_opt.on_eval_chunk = [this] { watchdog_->alive(); };
  std::string rss_caveat;  // the CPU's process_peak_bytes: this repeat's own peak when the reset works
  if (info_.kind == DeviceKind::Cpu) reset_resident_peak(&rss_caveat);
  if (telemetry_) telemetry_->begin();
  // The energy window: from after the last warm-up step (or the first
  // step: train()'s own warm-up pass comes before it) to after the last.
  EnergyWindow window;
  window.first_step = std::max(1, cfg.warmup_steps);
  window.last_step = cfg.steps;
  std::string energy_why = energy_ ? "" : energy_why_;
  const auto read_energy = [&](double* joules, double* seconds) {
    if (!energy_ || !energy_why.empty()) return;
    const std::optional<double> j = energy_->joules(&energy_why);
    if (j) *joules = *j, *seconds = seconds_since(t_start_);
  };
  RunRecord rec = train(*dev, *model, *data, cfg, [&](int step, const RunRecord& rr) {
    if (g_interrupted) throw Interrupted{};
    watchdog_->progress(step);
    if (step == window.first_step) read_energy(&window.joules_begin, &window.seconds_begin);
    if (step == window.last_step) read_energy(&window.joules_end, &window.seconds_end);
    if (plant_hang && step == std::min(3, cfg.steps))
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // deaf to Ctrl-C, as a real hang is
    steps_done_ += 1;
    print_progress(unit, ri, step, rr);
  }, train_opt);
  if (tty_ && !opt_.quiet) std::fprintf(stderr, "\n");
  nlohmann::json rep = repeat_result_json(r, cfg.seed + r, rec, cfg);
  if (nlohmann::json facts = data_facts_json(*data, cfg.data.eval_samples); !facts.empty()) rep["data"] = std::move(facts);
  add_repeat_measurements(rep, *dev, rec, cfg, window, energy_why, rss_caveat);
  return rep;
}

// GPU telemetry, the memory triple and energy per step, each with why it is missing where it is.
void ExperimentRun::add_repeat_measurements(nlohmann::json& rep, const Device& dev, const RunRecord& rec,
                                            const CellConfig& cfg, const EnergyWindow& window,
                                            std::string energy_why, const std::string& rss_caveat) const {
  rep["gpu_telemetry"] = telemetry_ ? telemetry_->end() : nlohmann::json(nullptr);
  if (!telemetry_) rep["gpu_telemetry_why"] = telemetry_why_;
  rep["memory"] = repeat_memory_json(dev, rec.memory, rep["gpu_telemetry"], telemetry_why_, rss_caveat);
  if (window.last_step <= window.first_step && energy_why.empty())
    energy_why = "no step after the warm-up to measure energy over";
  if (energy_why.empty()) {
    rep["energy"] =
        energy_json(energy_->source(), window, median(repeat_timed_steps(rep, cfg.warmup_steps)), cfg.batch_size);
  } else {
    rep["energy"] = nullptr;
    rep["energy_why"] = energy_why;
  }
}

// The progress line: every step on a terminal, else about five per repeat.
void ExperimentRun::print_progress(const RunUnit& unit, size_t ri, int step, const RunRecord& rr) const {
  const CellConfig& cfg = unit.cell->config;
  const int every = std::max(1, cfg.steps / 5);
  if (opt_.quiet || (!tty_ && step % every != 0 && step != cfg.steps)) return;
  const double eta = seconds_since(t_start_) / steps_done_ * (steps_total_ - steps_done_);
  std::fprintf(stderr, "%s[%zu/%zu] round %zu/%zu  %s  repeat %d/%d  step %d/%d  loss %.4f  %.1f ms/step  ETA %s%s",
               tty_ ? "\r\033[K" : "", unit_no_, plan_.units(), ri + 1, plan_.rounds.size(), unit.cell->id.c_str(),
               unit.repeat + 1, cfg.repeats, step, cfg.steps, rr.loss.back(), rr.step_ms.back(),
               format_eta(eta).c_str(), tty_ ? "" : "\n");
}

// A cell with repeats still to run: its finished repeats in partial/ (--resume reads them).
void ExperimentRun::write_partial(const Cell& cell, const std::vector<nlohmann::json>& reps) const {
  nlohmann::json side = {{"schema", "mpbench.partial/1"},
                         {"experiment", exp_.name},
                         {"run_id", run_id_},
                         {"cell_id", cell.id},
                         {"config_hash", config_hash(cell_config_to_json(cell.config))},
                         {"repeats", reps}};
  write_file_atomic(paths_.partial(cell).string(), side.dump(1) + "\n");
}

// A cell whose last repeat ran: its result file, then every cell's speed-ups again.
void ExperimentRun::write_cell(const Cell& cell, const std::vector<nlohmann::json>& reps) {
  CellContext ctx;
  ctx.experiment = exp_.name;
  ctx.run_id = run_id_;
  ctx.cell = &cell;
  ctx.device = &info_;
  ctx.policy = cell.config.policy;
  ctx.gemm_support = probe_->gemm_support(ctx.policy.gemm);
  ctx.gemm_math = probe_->gemm_math(ctx.policy.gemm);
  if (ctx.policy.fp8) {  // the linear layers' GEMMs are the FP8 ones; the rest (attention) keep bf16
    ctx.gemm_support = probe_->fp8_gemm_support();
    ctx.gemm_math = "linear layers: FP8 operands (E4M3 inputs/weights, E5M2 gradients, per-tensor scales), " +
                    ctx.gemm_support + "; other GEMMs: " + ctx.gemm_math;
  }
  ctx.environment_overrides = manifest_["environment"].value("overrides", nlohmann::json::object());
  for (const auto& x : reps) ctx.ceiling_gflops = std::max(ctx.ceiling_gflops, x.at("ceiling_gflops").get<double>());
  ctx.estimated_time = cell_cost_json(cell.config, estimate_cell_cost(cell.config, cost_basis_), cost_basis_);
  nlohmann::json result = cell_result_json(ctx, reps);
  apply_speedup(result, nullptr);  // against the baseline once it is finished (finalize_cells)
  write_file_atomic(paths_.cell(cell).string(), result.dump(1) + "\n");
  fs::remove(paths_.partial(cell));
  progress_.finished.insert(&cell);
  finalize_cells();
}

}  // namespace mpb
