#include "runner/run_experiment.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "core/precision.h"
#include "runner/atomic_file.h"
#include "runner/ceiling.h"
#include "runner/device_factory.h"
#include "runner/manifest.h"
#include "runner/results.h"
#include "train/cell_factory.h"
#include "train/trainer.h"

namespace fs = std::filesystem;

namespace mpb {

std::atomic<bool> g_interrupted{false};

namespace {

struct Interrupted {};

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  long s = std::lround(seconds);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
  return buf;
}

// A cell JSON on disk that --resume may keep: same experiment, cell and config.
std::optional<nlohmann::json> finished_cell(const std::string& path, const Cell& cell) {
  if (!fs::exists(path)) return std::nullopt;
  try {
    nlohmann::json j = nlohmann::json::parse(read_file(path));
    if (j.at("cell_id") == cell.id && j.at("config_hash") == config_hash(cell_config_to_json(cell.config))) return j;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// A cell id for the terminal table: long ones (an include with many keys)
// keep their start and end; the files have the full id.
std::string table_id(const std::string& id, size_t width) {
  if (id.size() <= width) return id;
  const size_t head = (width - 3) * 2 / 3, tail = width - 3 - head;
  return id.substr(0, head) + "..." + id.substr(id.size() - tail);
}

void print_table(const std::vector<nlohmann::json>& cells) {
  constexpr size_t kMaxWidth = 96;
  size_t w = 4;
  for (const auto& c : cells) w = std::max(w, std::min(kMaxWidth, c.at("cell_id").get<std::string>().size()));
  std::printf("\n%-*s  %12s  %8s  %10s  %8s  %11s  %9s\n", int(w), "cell", "samples/s", "speedup", "step ms",
              "ceiling", "peak mem", "eval loss");
  for (const auto& c : cells) {
    const auto& s = c.at("summary");
    char speed[16] = "-", frac[16] = "-";
    if (!s.at("speedup").is_null()) std::snprintf(speed, sizeof speed, "%.2fx", s.at("speedup").get<double>());
    if (!s.at("ceiling_fraction").is_null())
      std::snprintf(frac, sizeof frac, "%.0f%%", 100 * s.at("ceiling_fraction").get<double>());
    std::printf("%-*s  %12.1f  %8s  %10.2f  %8s  %11s  %9.4f%s\n", int(w), table_id(c.at("cell_id"), w).c_str(),
                s.at("samples_per_s").get<double>(), speed, s.at("step_time_ms").at("median").get<double>(), frac,
                human_bytes(s.at("peak_memory_bytes").at("total").get<double>()).c_str(),
                s.at("eval_loss").get<double>(), c.at("is_baseline").get<bool>() ? "  (baseline)" : "");
  }
}

}  // namespace

int run_experiment(const ExperimentConfig& exp, const RunOptions& opt) {
  // The cells to run: the filter applies, the baseline always runs first so
  // every other cell can report its speedup when it is written.
  std::vector<const Cell*> order;
  const Cell* baseline = nullptr;
  try {
    for (const Cell& c : exp.cells) {
      if (c.is_baseline) baseline = &c;
      if (!opt.filter.empty() && !cell_matches_filter(c, opt.filter)) continue;
      order.push_back(&c);
    }
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "error: --filter: %s\n", e.what());
    return 2;
  }
  std::stable_partition(order.begin(), order.end(), [](const Cell* c) { return c->is_baseline; });
  if (order.empty()) {
    std::fprintf(stderr, "runner: --filter '%s' matches no cell of %s\n", opt.filter.c_str(), exp.path.c_str());
    return 2;
  }

  if (opt.dry_run) {
    std::printf("%s: %zu cell(s)%s\n", exp.name.c_str(), order.size(), opt.filter.empty() ? "" : " (filtered)");
    for (size_t i = 0; i < order.size(); ++i)
      std::printf("  %2zu  %s%s\n", i + 1, order[i]->id.c_str(), order[i]->is_baseline ? "  (baseline)" : "");
    return 0;
  }

  std::string notice;
  const std::string kind = opt.device.empty() ? exp.device : opt.device;
  std::unique_ptr<Device> probe = make_device(kind, &notice);  // DeviceError -> caller
  if (!notice.empty()) std::fprintf(stderr, "runner: %s\n", notice.c_str());
  const DeviceInfo info = probe->info();

  // What the models say about their cells before anything runs (BERT: GEMM
  // dimensions tensor cores dislike, and similar), once per distinct message.
  if (!opt.quiet) {
    std::vector<std::string> said;
    for (const Cell* c : order)
      for (const std::string& w : cell_warnings(c->config))
        if (std::find(said.begin(), said.end(), w) == said.end()) {
          std::fprintf(stderr, "runner: warning: %s\n", w.c_str());
          said.push_back(w);
        }
  }

  // Ceilings for every GEMM mode the cells use.
  std::map<std::string, double> ceiling;
  for (const Cell* c : order) {
    GemmCompute g = resolve_policy(c->config.precision).gemm;
    std::string name = gemm_compute_name(g);
    if (probe->gemm_support(g) == "unsupported")
      throw DeviceError("cell " + c->id + ": " + info.name + " cannot run " + name + " GEMMs (precision '" +
                        c->config.precision + "')");
    if (!ceiling.count(name)) {
      if (!opt.quiet) std::fprintf(stderr, "runner: measuring the %s GEMM ceiling on %s...\n", name.c_str(), info.name.c_str());
      ceiling[name] = measure_gemm_ceiling(*probe, g);
      if (!opt.quiet) std::fprintf(stderr, "runner: %s ceiling %.1f GFLOP/s\n", name.c_str(), ceiling[name]);
    }
  }

  const fs::path dir = fs::path(opt.out_dir) / exp.name;
  fs::create_directories(dir / "cells");
  nlohmann::json manifest = build_manifest(exp, info, ceiling);
  const std::string manifest_path = (dir / "manifest.json").string();
  write_file_atomic(manifest_path, manifest.dump(2) + "\n");

  auto cell_path = [&](const Cell& c) { return (dir / "cells" / (c.slug + ".json")).string(); };
  // The CSV lists every finished cell of the experiment, in matrix order,
  // including ones finished by earlier (resumed) runs.
  auto rewrite_summary = [&]() {
    std::vector<nlohmann::json> done;
    for (const Cell& c : exp.cells)
      if (auto j = finished_cell(cell_path(c), c)) done.push_back(*j);
    write_file_atomic((dir / "summary.csv").string(), summary_csv(done));
    return done;
  };

  std::optional<double> baseline_sps;
  if (baseline)
    if (auto j = finished_cell(cell_path(*baseline), *baseline)) baseline_sps = cell_samples_per_s(*j);

  const bool tty = isatty(fileno(stderr));
  const auto t_start = std::chrono::steady_clock::now();
  double cell_steps_total = 0, cell_steps_done = 0;
  for (const Cell* c : order) cell_steps_total += double(c->config.steps) * c->config.repeats;
  int interrupted = 0;
  std::vector<nlohmann::json> written;
  try {
    for (size_t k = 0; k < order.size(); ++k) {
      const Cell& cell = *order[k];
      const CellConfig& cfg = cell.config;
      if (opt.resume && finished_cell(cell_path(cell), cell)) {
        if (!opt.quiet) std::fprintf(stderr, "[%zu/%zu] %s: finished earlier, skipped (--resume)\n", k + 1, order.size(), cell.id.c_str());
        cell_steps_done += double(cfg.steps) * cfg.repeats;
        continue;
      }
      // The ceiling again, right before this cell: the cell's fraction of it
      // is then a ratio measured in one time window (a shared machine's speed
      // drifts), and the best measurement of the run is kept.
      const GemmCompute gemm_mode = resolve_policy(cfg.precision).gemm;
      const std::string mode_name = gemm_compute_name(gemm_mode);
      const double cell_ceiling = measure_gemm_ceiling(*probe, gemm_mode);
      ceiling[mode_name] = std::max(ceiling[mode_name], cell_ceiling);
      std::vector<RunRecord> repeats;
      for (int r = 0; r < cfg.repeats; ++r) {
        // A fresh device per repeat: peak memory is this run's alone.
        std::unique_ptr<Device> dev = make_device(info.kind);
        std::unique_ptr<Dataset> data = build_dataset(cfg, cfg.seed + r);
        std::unique_ptr<Model> model = build_model(*dev, cfg, cfg.seed + r);
        const int every = std::max(1, cfg.steps / 5);
        repeats.push_back(train(*dev, *model, *data, cfg, [&](int step, const RunRecord& rec) {
          if (g_interrupted) throw Interrupted{};
          cell_steps_done += 1;
          if (opt.quiet || (!tty && step % every != 0 && step != cfg.steps)) return;
          double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
          double eta = elapsed / cell_steps_done * (cell_steps_total - cell_steps_done);
          std::fprintf(stderr, "%s[%zu/%zu] %s  repeat %d/%d  step %d/%d  loss %.4f  %.1f ms/step  ETA %s%s",
                       tty ? "\r\033[K" : "", k + 1, order.size(), cell.id.c_str(), r + 1, cfg.repeats, step,
                       cfg.steps, rec.loss.back(), rec.step_ms.back(), format_eta(eta).c_str(), tty ? "" : "\n");
        }));
      }
      if (tty && !opt.quiet) std::fprintf(stderr, "\n");
      CellContext ctx;
      ctx.experiment = exp.name;
      ctx.cell = &cell;
      ctx.device = &info;
      ctx.policy = resolve_policy(cfg.precision);
      const GemmCompute g = ctx.policy.gemm;
      ctx.gemm_support = probe->gemm_support(g);
      ctx.ceiling_gflops = cell_ceiling;
      // Speedups compare like with like: a cell of another model than the
      // baseline's has none (samples/s of an MLP and a BERT don't compare).
      if (baseline && baseline->config.model.kind == cfg.model.kind) ctx.baseline_samples_per_s = baseline_sps;
      nlohmann::json result = cell_result_json(ctx, repeats);
      if (cell.is_baseline) {
        baseline_sps = cell_samples_per_s(result);
        result["summary"]["speedup"] = 1.0;
      }
      write_file_atomic(cell_path(cell), result.dump(1) + "\n");
      written = rewrite_summary();
    }
  } catch (const Interrupted&) {
    interrupted = 1;
    std::fprintf(stderr, "\nrunner: interrupted; every finished cell is kept in %s (rerun with --resume)\n",
                 dir.string().c_str());
  }
  written = rewrite_summary();
  if (interrupted) return 130;
  manifest["finished"] = utc_now_iso8601();
  manifest["device"]["ceiling_gflops"] = ceiling;  // the best of the start and per-cell measurements
  write_file_atomic(manifest_path, manifest.dump(2) + "\n");
  if (!opt.quiet) {
    print_table(written);
    std::printf("\nresults: %s\n", dir.string().c_str());
  }
  return 0;
}

}  // namespace mpb
