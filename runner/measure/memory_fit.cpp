#include "runner/measure/memory_fit.h"

#include <cmath>
#include <cstdio>

#include "core/host_memory.h"
#include "runner/machine/device_factory.h"
#include "train/cell_limits.h"

namespace mpb {

namespace {

std::string bytes_text(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (b >= 1024 && u < 6) b /= 1024, ++u;
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 6 && b >= 1024 ? "%.3g %s" : "%.1f %s", b, units[u]);
  return buf;
}

// "params 1.0 GiB, grads ..., host 12.0 MiB"
std::string breakdown(const MemoryEstimate& e) {
  std::string out;
  for (int c = 0; c < kMemCategoryCount; ++c) {
    out += std::string(mem_category_name(static_cast<MemCategory>(c))) + " " + bytes_text(e.device[size_t(c)]) + ", ";
  }
  return out + "host data " + bytes_text(e.host);
}

// What must fit, and what is available for it, on `dev`.
struct Need {
  double bytes, available;
  std::string what;  // "the cpu device has", ...
};

std::optional<Need> shortfall(const MemoryEstimate& e, const Device& dev) {
  const std::optional<size_t> free = dev.free_memory_bytes();
  if (!free) return std::nullopt;
  if (dev.info().kind == DeviceKind::Cpu) {  // device memory is host memory
    if (e.total() > double(*free)) return Need{e.total(), double(*free), "the cpu device has"};
    return std::nullopt;
  }
  if (e.device_total() > double(*free))
    return Need{e.device_total(), double(*free), dev.info().name + " has"};
  const std::optional<size_t> host = host_available_memory_bytes();
  if (host && e.host > double(*host)) return Need{e.host, double(*host), "the host has"};
  return std::nullopt;
}

// " (RLIMIT_AS (ulimit -v))" when host memory is short and a limit other than
// MemAvailable set it (core/host_memory.h): the machine has more, this process may not.
std::string host_limit_note(const Need& need) {
  if (need.what != "the cpu device has" && need.what != "the host has") return "";
  const HostMemory host = host_memory();
  return host.available && host.limited_by != "MemAvailable" ? " (limited by " + host.limited_by + ")" : "";
}

// The model as build_model makes it on `dev` (train/cell_limits.h).
bool is_cuda(const Device& dev) { return dev.info().kind == DeviceKind::Cuda; }

// The bytes that must fit on `dev` (see shortfall): what the culprit search shrinks.
double measure(const MemoryEstimate& e, const Device& dev) {
  return dev.info().kind == DeviceKind::Cpu ? e.total() : std::max(e.device_total(), e.host);
}

// Of the keys the file sets for the cell, the one whose default value would
// shrink the estimate most (a value the matrix or an include sets wins a tie):
// the value to point at. nullptr: no value the file sets makes it bigger.
const std::pair<const std::string, ValueOrigin>* culprit(const Cell& cell, const Device& dev) {
  const CellConfig defaults;
  const double full = measure(estimate_cell_memory(cell.config, is_cuda(dev)), dev);
  const std::pair<const std::string, ValueOrigin>* best = nullptr;
  double best_saving = 0;
  for (const auto& entry : cell.origins) {
    // The kinds choose what is built, not how big it is: "model.kind: bert" is
    // never the value to change.
    if (entry.first == "model.kind" || entry.first == "data.kind") continue;
    const schema::KeySpec* spec = schema::find_spec(entry.first);
    if (!spec) continue;
    CellConfig smaller = cell.config;
    spec->set(smaller, spec->get(defaults));
    const double saving = full - measure(estimate_cell_memory(smaller, is_cuda(dev)), dev);
    const bool better = saving > best_saving || (best && saving == best_saving && saving > 0 &&
                                                 entry.second.per_cell && !best->second.per_cell);
    if (better) {
      best = &entry;
      best_saving = saving;
    }
  }
  return best;
}

}  // namespace

std::optional<ConfigError> memory_fit_error(const ExperimentConfig& exp, const std::vector<const Cell*>& cells,
                                            const Device& dev) {
  for (const Cell* cell : cells) {
    const MemoryEstimate e = estimate_cell_memory(cell->config, is_cuda(dev));
    const std::optional<Need> need = shortfall(e, dev);
    if (!need) continue;
    const std::string message = "cell '" + cell->id + "' needs an estimated " + bytes_text(need->bytes) + " (" +
                                breakdown(e) + "), but " + need->what + " " + bytes_text(need->available) +
                                " available" + host_limit_note(*need) +
                                "; make it smaller, run it elsewhere, or leave it out with --filter";
    const auto* key = culprit(*cell, dev);
    if (!key) return ConfigError(exp.path, 0, 0, "", message);
    return ConfigError(exp.path, key->second.line, key->second.col, key->second.path, message);
  }
  return std::nullopt;
}

bool cell_memory_fits(const CellConfig& cfg, const Device& dev) {
  return !shortfall(estimate_cell_memory(cfg, is_cuda(dev)), dev).has_value();
}

int refuse_cells_that_cannot_fit(const ExperimentConfig& exp, const std::vector<const Cell*>& cells,
                                 const std::string& kind) {
  std::unique_ptr<Device> dev;
  try {
    dev = make_device(kind);
  } catch (const DeviceError&) {
    return 0;  // no such device: the run reports it
  }
  if (const auto error = memory_fit_error(exp, cells, *dev)) {
    std::fprintf(stderr, "error: %s\n", error->what());
    return 2;
  }
  return 0;
}

nlohmann::json memory_estimate_json(const MemoryEstimate& e) {
  nlohmann::json j = nlohmann::json::object();
  const auto bytes = [](double b) { return static_cast<uint64_t>(std::ceil(b)); };
  for (int c = 0; c < kMemCategoryCount; ++c) {
    j[mem_category_name(static_cast<MemCategory>(c))] = bytes(e.device[size_t(c)]);
  }
  j["total"] = bytes(e.device_total());
  j["host"] = bytes(e.host);
  return j;
}

}  // namespace mpb
