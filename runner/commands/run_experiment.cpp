#include "runner/commands/run_experiment.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "core/precision.h"
#include "runner/io/atomic_file.h"
#include "runner/measure/ceiling.h"
#include "runner/measure/cost_estimate.h"
#include "runner/machine/device_factory.h"
#include "runner/machine/gpu_environment.h"
#include "runner/machine/energy_meter.h"
#include "runner/machine/gpu_telemetry.h"
#include "runner/results/hung_cell.h"
#include "runner/machine/machine_load.h"
#include "runner/results/manifest.h"
#include "runner/experiment/measured_window.h"
#include "runner/measure/memory_fit.h"
#include "runner/measure/memory_triple.h"
#include "runner/results/result_dir.h"
#include "runner/results/results.h"
#include "runner/results/run_identity.h"
#include "runner/io/seconds_since.h"
#include "runner/measure/stats.h"
#include "runner/results/terminal_table.h"
#include "train/cell_factory.h"
#include "train/trainer.h"

namespace fs = std::filesystem;

namespace mpb {

std::atomic<bool> g_interrupted{false};

namespace {

struct Interrupted {};
struct TimeBudgetReached {};  // --max-minutes: stop between repeats

// --assume-gpu's row (main checks the name first).
CostBasis assumed_basis(const std::string& gpu) {
  std::string error;
  if (auto b = assumed_gpu_basis(gpu, &error)) return *b;
  throw std::invalid_argument(error);
}

// --dry-run's estimate: --assume-gpu's row, else the device's own row (a
// known GPU) or, on the CPU, a quick GEMM ceiling per mode the cells use.
CostBasis dry_run_cost_basis(const std::vector<const Cell*>& cells, const std::string& kind, const RunOptions& opt) {
  if (!opt.assume_gpu.empty()) return assumed_basis(opt.assume_gpu);
  std::unique_ptr<Device> dev;
  try {
    dev = make_device(kind);
  } catch (const DeviceError& e) {
    CostBasis none;
    none.why_none = std::string(e.what()) + "; --assume-gpu NAME estimates for one of: " +
                    schema::join(known_gpu_names(), ", ");
    return none;
  }
  const DeviceInfo info = dev->info();
  std::map<GemmCompute, double> ceilings;
  if (info.kind == "cpu" || !known_gpu_peaks(info.name)) {
    for (const Cell* c : cells) {
      const GemmCompute g = c->config.policy.gemm;
      if (ceilings.count(g) || dev->gemm_support(g) == "unsupported") continue;
      if (!opt.quiet)
        std::fprintf(stderr, "runner: measuring the %s GEMM ceiling on %s for the estimate...\n", gemm_compute_name(g),
                     info.name.c_str());
      ceilings[g] = measure_gemm_ceiling(*dev, g, 0, 3, &g_interrupted);
    }
  }
  return device_cost_basis(info, ceilings);
}

// The cell list with each cell's estimated time (h:mm) and the total.
// `baseline_copy`: a shard's copy of the baseline (runner/experiment/shard.h), marked as such.
void print_cells_with_cost(const std::vector<const Cell*>& cells, const CostBasis& basis,
                           const Cell* baseline_copy) {
  if (basis.peaks || !basis.ceiling.empty())
    std::printf("time estimate: GEMM FLOPs per step x steps x repeats at %s\n", cost_assumption(basis).c_str());
  else
    std::printf("time estimate: none (%s)\n", basis.why_none.c_str());
  std::printf("  %3s  %6s  %9s  %s\n", "", "h:mm", "seconds", "cell");
  double total = 0;
  bool complete = true;
  for (size_t i = 0; i < cells.size(); ++i) {
    const CellCost cost = estimate_cell_cost(cells[i]->config, basis);
    if (cost.seconds) total += *cost.seconds;
    else complete = false;
    std::printf("  %3zu  %6s  %9s  %s%s%s\n", i + 1, format_hours_minutes(cost.seconds).c_str(),
                cost.seconds ? std::to_string(std::llround(*cost.seconds)).c_str() : "-", cells[i]->id.c_str(),
                cells[i] == baseline_copy ? "  (baseline: a copy for this shard's speed-ups; shard 0's is merged)"
                : cells[i]->is_baseline   ? "  (baseline)"
                                          : "",
                cost.seconds || basis.peaks == std::nullopt ? "" : ("  (" + cost.why_none + ")").c_str());
  }
  const std::optional<double> sum = complete || total > 0 ? std::optional<double>(total) : std::nullopt;
  std::printf("  %3s  %6s  %9s  total%s (set-up, evaluation and ceiling measurements not included)\n", "",
              format_hours_minutes(sum).c_str(), sum ? std::to_string(std::llround(*sum)).c_str() : "-",
              complete ? "" : " of the cells with an estimate");
}

// A JSON file on disk that --resume may keep: same cell and config.
std::optional<nlohmann::json> matching_json(const fs::path& path, const Cell& cell) {
  if (!fs::exists(path)) return std::nullopt;
  try {
    nlohmann::json j = nlohmann::json::parse(read_file(path.string()));
    if (j.at("cell_id") == cell.id && j.at("config_hash") == config_hash(cell_config_to_json(cell.config))) return j;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace

int run_experiment(const ExperimentConfig& exp, const RunOptions& opt) {
  // --max-minutes counts from here: set-up and the start's ceilings included.
  const auto t_begin = std::chrono::steady_clock::now();
  // The cells to run: the filter applies; the baseline comes first (the
  // sequential order runs it first; the interleaved order shuffles anyway).
  std::vector<const Cell*> cells;
  try {
    for (const Cell& c : exp.cells) {
      if (!opt.filter.empty() && !cell_matches_filter(c, opt.filter)) continue;
      cells.push_back(&c);
    }
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "error: --filter: %s\n", e.what());
    return kExitBadInput;
  }
  std::stable_partition(cells.begin(), cells.end(), [](const Cell* c) { return c->is_baseline; });
  if (cells.empty()) {
    std::fprintf(stderr, "runner: --filter '%s' matches no cell of %s\n", opt.filter.c_str(), exp.path.c_str());
    return kExitBadInput;
  }
  // --shard i/N: this runner's share (runner/experiment/shard.h). The order seed below
  // still comes from the whole experiment, like the assignment itself.
  std::optional<ShardShare> share;
  const size_t cells_before_shard = cells.size();
  if (opt.shard) {
    try {
      share = shard_share(cells, *opt.shard);
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "error: --shard %d/%d: %s\n", opt.shard->index, opt.shard->count, e.what());
      return kExitBadInput;
    }
    cells = share->to_run();
  }
  const Cell* baseline_copy = share ? share->baseline_copy : nullptr;
  const fs::path dir = fs::path(opt.out_dir) / (opt.shard ? shard_dir_name(exp.name, *opt.shard) : exp.name);
  nlohmann::json all_configs = nlohmann::json::array();
  for (const Cell& c : exp.cells) all_configs.push_back({{"id", c.id}, {"config", cell_config_to_json(c.config)}});
  const uint64_t seed = opt.order_seed.value_or(std::stoull(config_hash(all_configs), nullptr, 16));
  const RunPlan plan = make_run_plan(cells, opt.order, seed);

  // A cell whose memory estimate can't fit the device fails now, before anything is built or written.
  if (const int rc = refuse_cells_that_cannot_fit(exp, cells, opt.device.empty() ? exp.device : opt.device)) return rc;
  // A cell whose repeats would time too few steps fails now too (runner/experiment/measured_window.h).
  if (const auto error = short_window_error(exp, cells)) {
    std::fprintf(stderr, "error: %s\n", error->what());
    return kExitBadInput;
  }

  if (opt.dry_run) {
    std::printf("%s: %zu cell(s)%s, %zu repeat(s) in %s order (seed %llu)\n", exp.name.c_str(), cells.size(),
                opt.filter.empty() ? "" : " (filtered)", plan.units(), run_order_name(plan.order),
                static_cast<unsigned long long>(seed));
    if (share)
      std::printf("shard %d/%d: %zu of the %zu cell(s)%s, %.0f%% of the matrix's weight (GEMM FLOPs x steps x "
                  "repeats); results in %s\n",
                  share->spec.index, share->spec.count, share->owned.size(), cells_before_shard,
                  baseline_copy ? " plus a copy of the baseline for speed-ups" : "",
                  100.0 * share->weight / share->total_weight, dir.string().c_str());
    print_cells_with_cost(cells, dry_run_cost_basis(cells, opt.device.empty() ? exp.device : opt.device, opt),
                          baseline_copy);
    return 0;
  }

  std::string notice;
  const std::string kind = opt.device.empty() ? exp.device : opt.device;
  std::unique_ptr<Device> probe = make_device(kind, &notice);  // DeviceError -> caller
  if (!notice.empty()) std::fprintf(stderr, "runner: %s\n", notice.c_str());
  const DeviceInfo info = probe->info();
  if (info.kind == "cpu" && !opt.quiet)
    std::fprintf(stderr, "runner: CPU kernels: the %s build (%s); GEMMs: %s\n", info.kernel_isa.c_str(),
                 info.kernel_isa_source == "cpuid" ? "the widest this CPU runs" : "MPB_CPU_ISA",
                 info.gemm_isa.c_str());
  // Clocks, power and throttling of the GPU during every repeat (NVML, when the driver has it).
  std::string telemetry_why = "the CPU device has no GPU telemetry";
  std::unique_ptr<GpuTelemetry> telemetry;
  if (info.kind == "cuda") {
    telemetry = GpuTelemetry::open(info.pci_bus_id, &telemetry_why);
    if (!telemetry) std::fprintf(stderr, "runner: warning: no GPU telemetry: %s\n", telemetry_why.c_str());
  }
  // Energy per step (runner/machine/energy_meter.h): NVML's counter on a GPU, RAPL on the CPU.
  std::string energy_why;
  std::unique_ptr<EnergyMeter> energy =
      open_energy_meter(info.kind, telemetry ? &telemetry->nvml() : nullptr, telemetry_why, &energy_why);
  // --lock-clocks: held from here (before the ceilings) to the end of the run.
  std::unique_ptr<GpuClockLock> clock_lock;
  if (opt.lock_clocks) {
    if (!telemetry) {
      std::fprintf(stderr, "error: --lock-clocks needs a GPU with NVML: %s; nothing was written\n",
                   telemetry_why.c_str());
      return kExitFailure;
    }
    try {
      clock_lock = std::make_unique<GpuClockLock>(telemetry->nvml(), *opt.lock_clocks);
    } catch (const std::runtime_error& e) {
      std::fprintf(stderr, "error: %s; nothing was written\n", e.what());
      return kExitFailure;
    }
    if (!opt.quiet) std::fprintf(stderr, "runner: SM clock locked at %s\n", opt.lock_clocks->text().c_str());
  }

  // What the models say about their cells before anything runs (BERT: GEMM
  // dimensions tensor cores dislike, and similar), once per distinct message.
  if (!opt.quiet) {
    std::vector<std::string> said;
    for (const Cell* c : cells)
      for (const std::string& w : cell_warnings(c->config))
        if (std::find(said.begin(), said.end(), w) == said.end()) {
          std::fprintf(stderr, "runner: warning: %s\n", w.c_str());
          said.push_back(w);
        }
  }

  // How busy the machine is before we load it: half a second of idling.
  nlohmann::json noise = {{"busy", false}, {"warnings", nlohmann::json::array()}, {"rounds", nlohmann::json::array()}};
  auto note_load = [&](const std::string& when, const LoadWindow& w) {
    if (!w.busy()) return;
    noise["busy"] = true;
    noise["warnings"].push_back(load_warning(when, w));
    if (!opt.quiet) std::fprintf(stderr, "runner: warning: %s\n", noise["warnings"].back().get<std::string>().c_str());
  };
  const LoadWindow before = sample_idle_load(0.5);
  noise["before"] = before.to_json();
  note_load("before the run", before);

  // Ceilings for every GEMM mode the cells use.
  std::map<std::string, double> ceiling;
  std::map<GemmCompute, double> start_ceiling;  // for the time estimate: the ceiling at start, as --dry-run's
  for (const Cell* c : cells) {
    const GemmCompute g = c->config.policy.gemm;
    std::string name = gemm_compute_name(g);
    if (probe->gemm_support(g) == "unsupported")
      throw DeviceError("cell " + c->id + ": " + info.name + " cannot run " + name + " GEMMs (precision '" +
                        c->config.precision + "')");
    if (c->config.policy.fp8) {  // e.g. "... has compute capability 8.6; FP8 GEMMs need 8.9 ..."
      const std::string fp8 = probe->fp8_gemm_support();
      if (fp8.rfind("unsupported", 0) == 0) throw DeviceError("cell " + c->id + ": precision fp8: " + fp8);
    }
    if (!ceiling.count(name)) {
      if (!opt.quiet) std::fprintf(stderr, "runner: measuring the %s GEMM ceiling on %s...\n", name.c_str(), info.name.c_str());
      ceiling[name] = measure_gemm_ceiling(*probe, g, 0, 5, &g_interrupted);
      start_ceiling[g] = ceiling[name];
      if (g_interrupted) {
        std::fprintf(stderr, "\nrunner: interrupted while measuring the GEMM ceiling; nothing was written\n");
        return kExitInterrupted;
      }
      if (!opt.quiet) std::fprintf(stderr, "runner: %s ceiling %.1f GFLOP/s\n", name.c_str(), ceiling[name]);
    }
  }

  // The estimate each cell's results keep beside its measured time (runner/measure/cost_estimate.h).
  const CostBasis cost_basis =
      opt.assume_gpu.empty() ? device_cost_basis(info, start_ceiling) : assumed_basis(opt.assume_gpu);

  const ResultDirLock lock(dir);  // ResultDirBusy -> caller; held until we return
  for (const StaleMove& m : sweep_result_dir(dir, exp.cells, cells, opt.resume ? EarlierResults::Keep
                                                                                : EarlierResults::Replace))
    if (!opt.quiet) std::fprintf(stderr, "runner: %s -> %s: %s\n", m.from.c_str(), m.to.c_str(), m.reason.c_str());
  fs::create_directories(dir / "cells");
  fs::create_directories(dir / "partial");
  // This run's id (runner/results/run_identity.h): the earlier manifest's while earlier
  // results stay beside this run's (--resume, or --filter keeping the other
  // cells), else a new one. A file that stayed but belongs to another run or
  // experiment (copied in by hand) is refused before anything is written.
  const std::string earlier_run_id = fs::exists(dir / "manifest.json") ? [&] {
    try {
      return recorded_run_id(nlohmann::json::parse(read_file((dir / "manifest.json").string())));
    } catch (const std::exception&) {
      return std::string();  // an unreadable manifest is rewritten below
    }
  }() : std::string();
  bool kept_results = false;
  for (const char* sub : {"cells", "partial", "failed"})
    if (fs::is_directory(dir / sub) && !fs::is_empty(dir / sub)) kept_results = true;
  const std::string run_id = kept_results && !earlier_run_id.empty() ? earlier_run_id : new_run_id();
  const std::vector<std::string> strangers =
      stranger_files(dir, RunMembership{exp.name, {run_id}, earlier_run_id.empty()});
  if (!strangers.empty()) {
    for (const std::string& s : strangers) std::fprintf(stderr, "error: %s\n", s.c_str());
    std::fprintf(stderr, "error: %zu result file(s) in %s are not this run's: move them away (a cell of another run "
                 "was measured against another baseline); nothing was written\n", strangers.size(),
                 dir.string().c_str());
    return kExitBadInput;
  }
  nlohmann::json manifest = build_manifest(exp, info, ceiling);
  manifest["run_id"] = run_id;
  if (info.kind == "cuda" && !opt.quiet)  // headers vs loaded CUDA libraries (runner/machine/library_check.h), said once
    for (const auto& w : manifest["libraries"]["warnings"])
      std::fprintf(stderr, "runner: warning: %s\n", w.get<std::string>().c_str());
  if (info.kind == "cuda") {  // the GPU's fixed facts (runner/machine/gpu_environment.h)
    manifest["device"]["gpu"]["nvml"] = telemetry ? gpu_environment_json(telemetry->nvml()) : nlohmann::json(nullptr);
    if (!telemetry) manifest["device"]["gpu"]["nvml_why"] = telemetry_why;
  }
  manifest["device"]["clock_lock"] = clock_lock ? clock_lock->to_json() : nlohmann::json(nullptr);
  manifest["order"] = run_plan_json(plan);
  if (share) {
    manifest["shard"] = shard_json(*share, opt.filter);
    manifest["shard"]["environment"] = scheduler_environment_json();
  }
  if (opt.inject_step_delay_ms > 0) {
    // Never to be mistaken for a real measurement: said in the manifest, in every cell, and here.
    manifest["testing"] = {{"inject_step_delay_ms", opt.inject_step_delay_ms}};
    std::fprintf(stderr, "runner: warning: TESTING: every timed step sleeps %.3g ms (--inject-step-delay-ms); "
                 "these results are not measurements\n", opt.inject_step_delay_ms);
  }
  if (!opt.inject_hang.empty()) {
    manifest["testing"]["inject_hang"] = opt.inject_hang;
    std::fprintf(stderr, "runner: warning: TESTING: cells matching '%s' hang after step 3 (--inject-hang)\n",
                 opt.inject_hang.c_str());
  }
  manifest["noise"] = noise;
  const std::string manifest_path = (dir / "manifest.json").string();
  write_file_atomic(manifest_path, manifest.dump(2) + "\n");

  auto cell_path = [&](const Cell& c) { return dir / "cells" / (c.slug + ".json"); };
  // Repeats of a cell that are done while others are not yet: a sidecar that
  // --resume reads, replaced by the cell JSON once the last repeat is done.
  auto partial_path = [&](const Cell& c) { return dir / "partial" / (c.slug + ".json"); };
  // A cell the watchdog found hung (runner/results/hung_cell.h): --resume skips it.
  auto failed_path = [&](const Cell& c) { return dir / "failed" / (c.slug + ".json"); };
  std::map<const Cell*, std::vector<nlohmann::json>> partial;
  std::set<const Cell*> finished, hung;
  for (const Cell* c : cells) {
    if (!opt.resume) continue;  // the sweep above moved their earlier files to stale/
    if (matching_json(cell_path(*c), *c)) {
      finished.insert(c);
    } else if (matching_json(failed_path(*c), *c)) {
      hung.insert(c);
    } else if (auto p = matching_json(partial_path(*c), *c)) {
      for (const auto& rep : p->at("repeats"))
        if (rep.at("repeat").get<int>() < c->config.repeats) partial[c].push_back(rep);
    }
  }

  // Derived fields (speed-ups and their intervals) from every finished cell
  // on disk, so that a resumed run's cells all compare with the same
  // baseline result; then the CSV, in matrix order.
  // The baseline is the one the experiment file names now: a resumed run
  // whose baseline was edited recomputes every speed-up against it.
  auto finalize = [&]() {
    std::vector<nlohmann::json> done;
    std::vector<fs::path> paths;
    std::vector<const Cell*> of;
    for (const Cell& c : exp.cells)
      if (auto j = matching_json(cell_path(c), c)) {
        done.push_back(*j);
        paths.push_back(cell_path(c));
        of.push_back(&c);
      }
    auto update = [&](size_t i, const nlohmann::json* base) {
      nlohmann::json updated = done[i];
      updated["is_baseline"] = of[i]->is_baseline;
      updated["run_id"] = run_id;  // a file from before run ids, in a directory it started, joins this run
      apply_speedup(updated, base);
      if (updated == done[i]) return;  // unchanged files are not rewritten
      write_file_atomic(paths[i].string(), updated.dump(1) + "\n");
      done[i] = std::move(updated);
    };
    const nlohmann::json* base = nullptr;
    for (size_t i = 0; i < done.size(); ++i)
      if (of[i]->is_baseline) {
        update(i, nullptr);
        base = &done[i];
      }
    for (size_t i = 0; i < done.size(); ++i) {
      if (&done[i] == base) continue;
      const bool same_model =
          base && base->at("config").at("model").at("kind") == done[i].at("config").at("model").at("kind");
      update(i, same_model ? base : nullptr);
    }
    write_file_atomic((dir / "summary.csv").string(), summary_csv(done));
    return done;
  };

  const bool tty = isatty(fileno(stderr));
  const auto t_start = std::chrono::steady_clock::now();
  auto since_start = [&]() { return seconds_since(t_start); };
  double steps_total = 0, steps_done = 0;
  for (const auto& round : plan.rounds)
    for (const RunUnit& u : round) steps_total += u.cell->config.steps;
  const size_t units = plan.units();
  size_t unit_no = 0;
  int interrupted = 0;
  bool out_of_time = false, ran_a_repeat = false;
  std::set<const Cell*> said_skipped;
  // The repeat now training, for the watchdog's thread (set before arm()).
  std::atomic<const RunUnit*> training{nullptr};
  Watchdog watchdog(opt.watchdog, [&](const WatchdogReport& r) {
    const RunUnit* u = training.load();
    if (!u) return;
    nlohmann::json record = hung_cell_record(*u->cell, u->repeat, r);
    record["experiment"] = exp.name;
    record["run_id"] = run_id;
    record_hang_and_restart(failed_path(*u->cell), record);
    std::_Exit(kExitFailure);  // exec failed; the training thread is stuck, so end here
  });
  try {
    for (size_t ri = 0; ri < plan.rounds.size(); ++ri) {
      LoadSampler load;
      load.begin();
      for (size_t pos = 0; pos < plan.rounds[ri].size(); ++pos) {
        const RunUnit& unit = plan.rounds[ri][pos];
        const Cell& cell = *unit.cell;
        const CellConfig& cfg = cell.config;
        ++unit_no;
        auto& reps = partial[&cell];
        const bool have = std::any_of(reps.begin(), reps.end(),
                                      [&](const nlohmann::json& r) { return r.at("repeat") == unit.repeat; });
        if (finished.count(&cell) || hung.count(&cell) || have) {
          if (!opt.quiet && said_skipped.insert(&cell).second)
            std::fprintf(stderr, "[%zu/%zu] %s: %s earlier, skipped (--resume)\n", unit_no, units, cell.id.c_str(),
                         finished.count(&cell) ? "finished"
                         : hung.count(&cell)   ? "hung (failed/" "*.json; rerun without --resume to retry)"
                                               : "some repeats finished");
          steps_done += cfg.steps;
          continue;
        }
        // Checked only once this run has trained a repeat: every slice makes
        // progress, however short its budget against the set-up.
        if (opt.max_minutes > 0 && ran_a_repeat &&
            seconds_since(t_begin) >= opt.max_minutes * 60.0)
          throw TimeBudgetReached{};
        ran_a_repeat = true;
        // The ceiling again, right before this repeat: the cell's fraction of
        // it is then a ratio measured in one time window (a shared machine's
        // speed drifts), and the best measurement of the run is kept.
        const GemmCompute gemm_mode = cfg.policy.gemm;
        const std::string mode_name = gemm_compute_name(gemm_mode);
        if (!opt.quiet)
          std::fprintf(stderr, "%s[%zu/%zu] round %zu/%zu  %s  repeat %d/%d  starting%s", tty ? "\r\033[K" : "",
                       unit_no, units, ri + 1, plan.rounds.size(), cell.id.c_str(), unit.repeat + 1, cfg.repeats,
                       tty ? "" : "\n");
        const double repeat_ceiling = measure_gemm_ceiling(*probe, gemm_mode, 0, 3, &g_interrupted);
        if (g_interrupted) throw Interrupted{};
        ceiling[mode_name] = std::max(ceiling[mode_name], repeat_ceiling);

        const int r = unit.repeat;
        const std::string started = utc_now_iso8601();
        const double started_s = since_start();
        // Watched from here to the last step: set-up (device, data, model) included.
        training = &unit;
        watchdog.arm("cell " + cell.id + " repeat " + std::to_string(r + 1), cfg.steps);
        struct Disarm {
          Watchdog& w;
          ~Disarm() { w.disarm(); }
        } disarm{watchdog};
        const bool plant_hang = !opt.inject_hang.empty() && cell_matches_filter(cell, opt.inject_hang);
        // A fresh device per repeat: peak memory is this run's alone.
        std::unique_ptr<Device> dev = make_device(info.kind);
        std::unique_ptr<Dataset> data = build_dataset(cfg, cfg.seed + r);
        std::unique_ptr<Model> model = build_model(*dev, cfg, cfg.seed + r);
        const int every = std::max(1, cfg.steps / 5);
        TrainOptions train_opt;
        train_opt.inject_step_delay_ms = opt.inject_step_delay_ms;
        std::string rss_caveat;  // the CPU's process_peak_bytes: this repeat's own peak when the reset works
        if (info.kind == "cpu") reset_resident_peak(&rss_caveat);
        if (telemetry) telemetry->begin();
        // The energy window: from after the last warm-up step (or the first
        // step: train()'s own warm-up pass comes before it) to after the last.
        EnergyWindow window;
        window.first_step = std::max(1, cfg.warmup_steps);
        window.last_step = cfg.steps;
        std::string repeat_energy_why = energy ? "" : energy_why;
        const auto read_energy = [&](double* joules, double* seconds) {
          if (!energy || !repeat_energy_why.empty()) return;
          const std::optional<double> j = energy->joules(&repeat_energy_why);
          if (j) *joules = *j, *seconds = since_start();
        };
        RunRecord rec = train(*dev, *model, *data, cfg, [&](int step, const RunRecord& rr) {
          if (g_interrupted) throw Interrupted{};
          watchdog.progress(step);
          if (step == window.first_step) read_energy(&window.joules_begin, &window.seconds_begin);
          if (step == window.last_step) read_energy(&window.joules_end, &window.seconds_end);
          if (plant_hang && step == std::min(3, cfg.steps))
            for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // deaf to Ctrl-C, as a real hang is
          steps_done += 1;
          if (opt.quiet || (!tty && step % every != 0 && step != cfg.steps)) return;
          const double eta = since_start() / steps_done * (steps_total - steps_done);
          std::fprintf(stderr, "%s[%zu/%zu] round %zu/%zu  %s  repeat %d/%d  step %d/%d  loss %.4f  %.1f ms/step  ETA %s%s",
                       tty ? "\r\033[K" : "", unit_no, units, ri + 1, plan.rounds.size(), cell.id.c_str(), r + 1,
                       cfg.repeats, step, cfg.steps, rr.loss.back(), rr.step_ms.back(), format_eta(eta).c_str(),
                       tty ? "" : "\n");
        }, train_opt);
        if (tty && !opt.quiet) std::fprintf(stderr, "\n");
        nlohmann::json rep = repeat_result_json(r, cfg.seed + r, rec, cfg);
        rep["gpu_telemetry"] = telemetry ? telemetry->end() : nlohmann::json(nullptr);
        if (!telemetry) rep["gpu_telemetry_why"] = telemetry_why;
        rep["memory"] = repeat_memory_json(*dev, rec.memory, rep["gpu_telemetry"], telemetry_why, rss_caveat);
        if (window.last_step <= window.first_step && repeat_energy_why.empty())
          repeat_energy_why = "no step after the warm-up to measure energy over";
        if (repeat_energy_why.empty()) {
          rep["energy"] = energy_json(energy->source(), window, median(repeat_timed_steps(rep, cfg.warmup_steps)),
                                      cfg.batch_size);
        } else {
          rep["energy"] = nullptr;
          rep["energy_why"] = repeat_energy_why;
        }
        rep["order"] = run_order_name(plan.order);
        rep["round"] = int(ri);  // manifest order.rounds[round][position] is this repeat
        rep["position"] = int(pos);
        rep["started"] = started;
        rep["started_s"] = started_s;
        rep["ceiling_gflops"] = repeat_ceiling;
        if (opt.inject_step_delay_ms > 0) rep["testing"] = {{"inject_step_delay_ms", opt.inject_step_delay_ms}};
        reps.push_back(rep);
        std::sort(reps.begin(), reps.end(),
                  [](const nlohmann::json& a, const nlohmann::json& b) { return a.at("repeat") < b.at("repeat"); });

        if (int(reps.size()) < cfg.repeats) {
          nlohmann::json side = {{"schema", "mpbench.partial/1"},
                                 {"experiment", exp.name},
                                 {"run_id", run_id},
                                 {"cell_id", cell.id},
                                 {"config_hash", config_hash(cell_config_to_json(cfg))},
                                 {"repeats", reps}};
          write_file_atomic(partial_path(cell).string(), side.dump(1) + "\n");
          continue;
        }
        CellContext ctx;
        ctx.experiment = exp.name;
        ctx.run_id = run_id;
        ctx.cell = &cell;
        ctx.device = &info;
        ctx.policy = cfg.policy;
        ctx.gemm_support = probe->gemm_support(ctx.policy.gemm);
        ctx.gemm_math = probe->gemm_math(ctx.policy.gemm);
        if (ctx.policy.fp8) {  // the linear layers' GEMMs are the FP8 ones; the rest (attention) keep bf16
          ctx.gemm_support = probe->fp8_gemm_support();
          ctx.gemm_math = "linear layers: FP8 operands (E4M3 inputs/weights, E5M2 gradients, per-tensor scales), " +
                          ctx.gemm_support + "; other GEMMs: " + ctx.gemm_math;
        }
        ctx.environment_overrides = manifest["environment"].value("overrides", nlohmann::json::object());
        for (const auto& x : reps) ctx.ceiling_gflops = std::max(ctx.ceiling_gflops, x.at("ceiling_gflops").get<double>());
        ctx.estimated_time = cell_cost_json(cfg, estimate_cell_cost(cfg, cost_basis), cost_basis);
        nlohmann::json result = cell_result_json(ctx, reps);
        apply_speedup(result, nullptr);  // against the baseline once it is finished (finalize)
        write_file_atomic(cell_path(cell).string(), result.dump(1) + "\n");
        fs::remove(partial_path(cell));
        finished.insert(&cell);
        finalize();
      }
      const LoadWindow w = load.end();
      nlohmann::json wj = w.to_json();
      wj["round"] = int(ri);
      manifest["noise"]["rounds"].push_back(wj);
      const std::string when = plan.order == RunOrder::Interleaved
                                   ? "during round " + std::to_string(ri + 1)
                                   : "while " + plan.rounds[ri].front().cell->id + " ran";
      if (w.busy()) {
        manifest["noise"]["busy"] = true;
        manifest["noise"]["warnings"].push_back(load_warning(when, w));
        if (!opt.quiet) std::fprintf(stderr, "runner: warning: %s\n", manifest["noise"]["warnings"].back().get<std::string>().c_str());
      }
      write_file_atomic(manifest_path, manifest.dump(2) + "\n");
    }
  } catch (const Interrupted&) {
    interrupted = 1;
    std::fprintf(stderr, "\nrunner: interrupted; every finished cell and repeat is kept in %s (rerun with --resume)\n",
                 dir.string().c_str());
  } catch (const TimeBudgetReached&) {
    out_of_time = true;
    std::fprintf(stderr,
                 "runner: --max-minutes %g passed; stopped before repeat %zu of %zu; every finished cell and repeat "
                 "is kept in %s (rerun with --resume to go on)\n",
                 opt.max_minutes, unit_no, units, dir.string().c_str());
  }
  std::vector<nlohmann::json> written = finalize();
  if (fs::is_empty(dir / "partial")) fs::remove(dir / "partial");
  // Cells the watchdog found hung, in this run or (with --resume) an earlier one.
  nlohmann::json failed_cells = nlohmann::json::array();
  for (const Cell& c : exp.cells)
    if (auto f = matching_json(failed_path(c), c)) failed_cells.push_back(*f);
  manifest["failed_cells"] = failed_cells;
  if (interrupted || out_of_time) {  // not "finished": --resume goes on from here
    if (out_of_time) manifest["stopped"] = {{"reason", "max_minutes"}, {"max_minutes", opt.max_minutes}, {"at", utc_now_iso8601()}};
    write_file_atomic(manifest_path, manifest.dump(2) + "\n");
    return interrupted ? kExitInterrupted : kExitTimeBudget;
  }
  manifest["finished"] = utc_now_iso8601();
  manifest["device"]["ceiling_gflops"] = ceiling;  // the best of the start and per-repeat measurements
  write_file_atomic(manifest_path, manifest.dump(2) + "\n");
  if (!opt.quiet) {
    print_table(written);
    for (const auto& w : manifest["noise"]["warnings"]) std::printf("warning: %s\n", w.get<std::string>().c_str());
    std::printf("\nresults: %s\n", dir.string().c_str());
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
  if (!diverged.empty() && opt.fail_on_divergence) {
    for (const std::string& id : diverged) std::fprintf(stderr, "runner: diverged: %s\n", id.c_str());
    return kExitDiverged;
  }
  return kExitOk;
}

}  // namespace mpb
