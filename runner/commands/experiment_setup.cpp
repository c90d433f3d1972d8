// ExperimentRun's phases before the results directory: the cells, the shard,
// the dry run, and the machine (device, telemetry, clocks, load, ceilings).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "config/schema.h"
#include "core/precision.h"
#include "runner/commands/experiment_run.h"
#include "runner/experiment/measured_window.h"
#include "runner/machine/device_factory.h"
#include "runner/measure/ceiling.h"
#include "runner/measure/memory_fit.h"
#include "runner/results/terminal_table.h"
#include "train/cell_factory.h"

namespace mpb {

namespace {

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
  if (info.kind == DeviceKind::Cpu || !known_gpu_peaks(info.name)) {
    for (const Cell* c : cells) {
      const GemmCompute g = c->config.policy.gemm;
      if (ceilings.count(g) || !dev->supports(gemm_feature(g)).runs()) continue;
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
    std::printf("time estimate: a step x steps x repeats; a step is %s\n", cost_assumption(basis).c_str());
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

}  // namespace

// The cells to run: the filter applies; the baseline comes first (the
// sequential order runs it first; the interleaved order shuffles anyway).
PhaseResult ExperimentRun::select_cells() {
  cells_.clear();
  try {
    for (const Cell& c : exp_.cells) {
      if (!opt_.filter.empty() && !cell_matches_filter(c, opt_.filter)) continue;
      cells_.push_back(&c);
    }
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "error: --filter: %s\n", e.what());
    return kExitBadInput;
  }
  std::stable_partition(cells_.begin(), cells_.end(), [](const Cell* c) { return c->is_baseline; });
  if (cells_.empty()) {
    std::fprintf(stderr, "error: --filter '%s' matches no cell of %s: %s\n", opt_.filter.c_str(), exp_.path.c_str(),
                 filter_no_match_reason(exp_.cells, opt_.filter).c_str());
    return kExitBadInput;
  }
  return std::nullopt;
}

// --shard i/N: this runner's share (runner/experiment/shard.h). The order seed
// still comes from the whole experiment, like the assignment itself.
PhaseResult ExperimentRun::take_shard() {
  cells_before_shard_ = cells_.size();
  if (opt_.shard) {
    try {
      share_ = shard_share(cells_, *opt_.shard);
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "error: --shard %d/%d: %s\n", opt_.shard->index, opt_.shard->count, e.what());
      return kExitBadInput;
    }
    cells_ = share_->to_run();
  }
  paths_.dir = std::filesystem::path(opt_.out_dir) /
               (opt_.shard ? shard_dir_name(exp_.name, *opt_.shard) : exp_.name);
  nlohmann::json all_configs = nlohmann::json::array();
  for (const Cell& c : exp_.cells) all_configs.push_back({{"id", c.id}, {"config", cell_config_to_json(c.config)}});
  seed_ = opt_.order_seed.value_or(std::stoull(config_hash(all_configs), nullptr, 16));
  plan_ = make_run_plan(cells_, opt_.order, seed_);
  return std::nullopt;
}

PhaseResult ExperimentRun::check_cells_fit() {
  // A cell whose memory estimate can't fit the device fails now, before anything is built or written.
  if (const int rc = refuse_cells_that_cannot_fit(exp_, cells_, kind_)) return rc;
  // A cell whose repeats would time too few steps fails now too (runner/experiment/measured_window.h).
  if (const auto error = short_window_error(exp_, cells_)) {
    std::fprintf(stderr, "error: %s\n", error->what());
    return kExitBadInput;
  }
  return std::nullopt;
}

int ExperimentRun::dry_run() {
  const Cell* baseline_copy = share_ ? share_->baseline_copy : nullptr;
  std::printf("%s: %zu cell(s)%s, %zu repeat(s) in %s order (seed %llu)\n", exp_.name.c_str(), cells_.size(),
              opt_.filter.empty() ? "" : " (filtered)", plan_.units(), run_order_name(plan_.order),
              static_cast<unsigned long long>(seed_));
  if (share_)
    std::printf("shard %d/%d: %zu of the %zu cell(s)%s, %.0f%% of the matrix's weight (GEMM FLOPs x steps x "
                "repeats); results in %s\n",
                share_->spec.index, share_->spec.count, share_->owned.size(), cells_before_shard_,
                baseline_copy ? " plus a copy of the baseline for speed-ups" : "",
                100.0 * share_->weight / share_->total_weight, paths_.dir.string().c_str());
  print_cells_with_cost(cells_, dry_run_cost_basis(cells_, kind_, opt_), baseline_copy);
  return 0;
}

void ExperimentRun::open_device() {
  std::string notice;
  probe_ = make_device(kind_, &notice);  // DeviceError -> caller
  if (!notice.empty()) std::fprintf(stderr, "runner: %s\n", notice.c_str());
  info_ = probe_->info();
  if (info_.kind == DeviceKind::Cpu && !opt_.quiet)
    std::fprintf(stderr, "runner: CPU kernels: the %s build (%s); GEMMs: %s\n", info_.kernel_isa.c_str(),
                 info_.kernel_isa_source == "cpuid" ? "the widest this CPU runs" : "MPB_CPU_ISA",
                 info_.gemm_isa.c_str());
  // Clocks, power and throttling of the GPU during every repeat (NVML, when the driver has it).
  if (info_.kind == DeviceKind::Cuda) {
    telemetry_ = GpuTelemetry::open(info_.pci_bus_id, &telemetry_why_);
    if (!telemetry_) std::fprintf(stderr, "runner: warning: no GPU telemetry: %s\n", telemetry_why_.c_str());
  }
  // Energy per step (runner/machine/energy_meter.h): NVML's counter on a GPU, RAPL on the CPU.
  energy_ = open_energy_meter(info_.kind, telemetry_ ? &telemetry_->nvml() : nullptr, telemetry_why_, &energy_why_);
}

// --lock-clocks: held from here (before the ceilings) to the end of the run.
PhaseResult ExperimentRun::lock_clocks() {
  if (!opt_.lock_clocks) return std::nullopt;
  if (!telemetry_) {
    std::fprintf(stderr, "error: --lock-clocks needs a GPU with NVML: %s; nothing was written\n",
                 telemetry_why_.c_str());
    return kExitFailure;
  }
  try {
    clock_lock_ = std::make_unique<GpuClockLock>(telemetry_->nvml(), *opt_.lock_clocks);
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "error: %s; nothing was written\n", e.what());
    return kExitFailure;
  }
  if (!opt_.quiet) std::fprintf(stderr, "runner: SM clock locked at %s\n", opt_.lock_clocks->text().c_str());
  return std::nullopt;
}

// What the models say about their cells before anything runs (BERT: GEMM
// dimensions tensor cores dislike, and similar), once per distinct message.
void ExperimentRun::warn_about_cells() const {
  if (opt_.quiet) return;
  std::vector<std::string> said;
  for (const Cell* c : cells_)
    for (const std::string& w : cell_warnings(c->config))
      if (std::find(said.begin(), said.end(), w) == said.end()) {
        std::fprintf(stderr, "runner: warning: %s\n", w.c_str());
        said.push_back(w);
      }
}

// How busy the machine is before we load it: half a second of idling.
void ExperimentRun::sample_load_before() {
  noise_ = {{"busy", false}, {"warnings", nlohmann::json::array()}, {"rounds", nlohmann::json::array()}};
  const LoadWindow before = sample_idle_load(0.5);
  noise_["before"] = before.to_json();
  if (!before.busy()) return;
  noise_["busy"] = true;
  noise_["warnings"].push_back(load_warning("before the run", before));
  if (!opt_.quiet) std::fprintf(stderr, "runner: warning: %s\n", noise_["warnings"].back().get<std::string>().c_str());
}

// Ceilings for every GEMM mode the cells use; a mode the device cannot run fails here.
PhaseResult ExperimentRun::measure_ceilings() {
  for (const Cell* c : cells_) {
    const GemmCompute g = c->config.policy.gemm;
    std::string name = gemm_compute_name(g);
    if (!probe_->supports(gemm_feature(g)).runs())
      throw DeviceError("cell " + c->id + ": " + info_.name + " cannot run " + name + " GEMMs (precision '" +
                        c->config.precision + "')");
    if (c->config.policy.fp8) {  // e.g. "... has compute capability 8.6; FP8 GEMMs need 8.9 ..."
      const Support fp8 = probe_->supports(Feature::GemmFp8);
      if (!fp8.runs()) throw DeviceError("cell " + c->id + ": precision fp8: " + fp8.describe());
    }
    if (!ceiling_.count(name)) {
      if (!opt_.quiet)
        std::fprintf(stderr, "runner: measuring the %s GEMM ceiling on %s...\n", name.c_str(), info_.name.c_str());
      ceiling_[name] = measure_gemm_ceiling(*probe_, g, 0, 5, &g_interrupted);
      start_ceiling_[g] = ceiling_[name];
      if (g_interrupted) {
        std::fprintf(stderr, "\nrunner: interrupted while measuring the GEMM ceiling; nothing was written\n");
        return kExitInterrupted;
      }
      if (!opt_.quiet) std::fprintf(stderr, "runner: %s ceiling %.1f GFLOP/s\n", name.c_str(), ceiling_[name]);
    }
  }
  return std::nullopt;
}

// The estimate each cell's results keep beside its measured time (runner/measure/cost_estimate.h).
void ExperimentRun::choose_cost_basis() {
  cost_basis_ = opt_.assume_gpu.empty() ? device_cost_basis(info_, start_ceiling_) : assumed_basis(opt_.assume_gpu);
}

}  // namespace mpb
