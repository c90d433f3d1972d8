#include "runner/commands/find_max_batch.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <new>
#include <vector>

#include "runner/machine/device_factory.h"
#include "runner/measure/memory_fit.h"
#include "train/cell_factory.h"
#include "train/cell_limits.h"
#include "train/trainer.h"

namespace mpb {

MaxBatch search_max_batch(int configured, int accumulation, const std::function<bool(int)>& fits) {
  MaxBatch r;
  r.configured = configured;
  const int unit = std::max(1, accumulation);
  const int max_k = kMaxBatchSearched / unit;
  auto fits_k = [&](int k) {
    ++r.trials;
    return fits(k * unit);
  };
  // Invariant: lo fits (0: nothing known to), hi does not (max_k + 1: nothing known not to).
  int lo = 0, hi = max_k + 1;
  const int start = std::clamp(configured / unit, 1, max_k);
  if (fits_k(start)) {
    lo = start;
    while (lo < max_k) {  // doubling
      const int next = lo > max_k / 2 ? max_k : lo * 2;
      if (!fits_k(next)) {
        hi = next;
        break;
      }
      lo = next;
    }
  } else {
    hi = start;
  }
  while (hi - lo > 1) {  // bisection
    const int mid = lo + (hi - lo) / 2;
    (fits_k(mid) ? lo : hi) = mid;
  }
  r.largest = lo * unit;
  r.capped = lo == max_k;
  return r;
}

namespace {

// A failed allocation, on the device or the host: "does not fit". Every
// other error is a real failure and propagates.
bool is_out_of_memory(const std::exception& e) {
  const std::string what = e.what();
  for (const char* sign : {"cudaErrorMemoryAllocation", "ALLOC_FAILED", "out of memory"})
    if (what.find(sign) != std::string::npos) return true;
  return false;
}

// Two training steps of `cfg` on a fresh device: what a run at this batch allocates.
bool trial_fits(DeviceKind kind, CellConfig cfg) {
  cfg.steps = 2;
  cfg.warmup_steps = 1;
  cfg.numerics_every = 0;
  try {
    std::unique_ptr<Device> dev = make_device(kind);
    std::unique_ptr<Dataset> data = build_dataset(cfg, cfg.seed);
    std::unique_ptr<Model> model = build_model(*dev, cfg, cfg.seed);
    train(*dev, *model, *data, cfg);
    return true;
  } catch (const std::bad_alloc&) {
    return false;
  } catch (const DeviceError& e) {
    if (is_out_of_memory(e)) return false;
    throw;
  }
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(1ull << 30));
  return buf;
}

}  // namespace

int run_find_max_batch(const ExperimentConfig& exp, const RunOptions& opt) {
  std::vector<const Cell*> cells;
  try {
    for (const Cell& c : exp.cells)
      if (opt.filter.empty() || cell_matches_filter(c, opt.filter)) cells.push_back(&c);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "error: --filter: %s\n", e.what());
    return kExitBadInput;
  }
  if (cells.empty()) {
    std::fprintf(stderr, "error: --filter '%s' matches no cell of %s: %s\n", opt.filter.c_str(), exp.path.c_str(),
                 filter_no_match_reason(exp.cells, opt.filter).c_str());
    return kExitBadInput;
  }
  const std::string kind = opt.device.empty() ? exp.device : opt.device;
  std::unique_ptr<Device> probe = make_device(kind);  // DeviceError -> main: exit 1
  const DeviceInfo info = probe->info();
  const bool trial = info.kind != DeviceKind::Cpu;
  const std::optional<size_t> free = probe->free_memory_bytes();
  std::printf("%s: the largest batch_size per cell on %s (%s free now); %s\n", exp.name.c_str(), info.name.c_str(),
              free ? gib(double(*free)).c_str() : "memory free unknown",
              trial ? "each candidate checked by its memory estimate, then by two real training steps"
                    : "by the memory estimate alone (the CPU's memory overcommits: a trial would swap, not fail)");
  int width = 4;
  for (const Cell* c : cells) width = std::max(width, int(c->id.size()));
  std::printf("  %-*s %10s %10s %8s  %s\n", width, "cell", "batch", "largest", "trials", "estimated peak at largest");
  for (const Cell* cell : cells) {
    const CellConfig& base = cell->config;
    auto with_batch = [&](int b) {
      CellConfig c = base;
      c.batch_size = b;
      return c;
    };
    const MaxBatch m = search_max_batch(base.batch_size, base.accumulation, [&](int b) {
      const CellConfig c = with_batch(b);
      if (check_cell_config(c) || check_cell_model(c) || !cell_memory_fits(c, *probe)) return false;
      if (!trial) return true;
      if (!opt.quiet) std::fprintf(stderr, "runner: %s: trying batch_size %d...\n", cell->id.c_str(), b);
      return trial_fits(info.kind, c);
    });
    const MemoryEstimate at_largest =
        estimate_cell_memory(with_batch(std::max(1, m.largest)), info.kind == DeviceKind::Cuda);
    const std::string peak =
        m.largest > 0 ? gib(trial ? at_largest.device_total() : at_largest.total()) : std::string("-");
    std::printf("  %-*s %10d %10d %8d  %s%s\n", width, cell->id.c_str(), m.configured, m.largest, m.trials, peak.c_str(),
                m.capped ? " (search limit reached)" : m.largest == 0 ? " (not even one micro-batch fits)" : "");
  }
  return kExitOk;
}

}  // namespace mpb
