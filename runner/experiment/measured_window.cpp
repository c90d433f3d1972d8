#include "runner/experiment/measured_window.h"

#include <algorithm>
#include <string>

namespace mpb {

int planned_measured_steps(const CellConfig& c) {
  int unprobed = 0;
  for (int step = c.warmup_steps; step < c.steps; ++step)  // train/trainer.cpp: step % numerics_every == 0 probes
    unprobed += !(c.numerics_every > 0 && step % c.numerics_every == 0);
  return unprobed > 0 ? unprobed : std::max(0, c.steps - c.warmup_steps);
}

std::optional<ConfigError> short_window_error(const ExperimentConfig& exp, const std::vector<const Cell*>& cells) {
  for (const Cell* cell : cells) {
    const CellConfig& c = cell->config;
    const int n = planned_measured_steps(c);
    if (n >= kMinMeasuredSteps) continue;
    const int probed = c.steps - c.warmup_steps - n;
    std::string message = "cell '" + cell->id + "': steps (" + std::to_string(c.steps) + ") after warmup_steps (" +
                          std::to_string(c.warmup_steps) + ") leave " + std::to_string(n) + " measured step(s)";
    if (probed > 0) message += " (" + std::to_string(probed) + " more sample numerics, every numerics_every-th step)";
    CellConfig longer = c;
    while (planned_measured_steps(longer) < kMinMeasuredSteps) ++longer.steps;
    message += "; each repeat needs at least " + std::to_string(kMinMeasuredSteps) +
               " for its statistics: raise steps to at least " + std::to_string(longer.steps);
    // Point at what the file set: steps first (the usual fix), then the others.
    for (const char* key : {"steps", "warmup_steps", "numerics_every"}) {
      const auto it = cell->origins.find(key);
      if (it != cell->origins.end())
        return ConfigError(exp.path, it->second.line, it->second.col, it->second.path, message);
    }
    return ConfigError(exp.path, 0, 0, "steps", message);
  }
  return std::nullopt;
}

}  // namespace mpb
