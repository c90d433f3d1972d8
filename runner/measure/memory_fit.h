// The memory check before a run (issue 13): every cell's memory estimate
// (estimate_cell_memory, train/cell_limits.h) against what the device has
// free, so that a cell that cannot fit fails before anything is built or
// written (exit 2, with the file:line:col of the value that makes it big),
// instead of "out of memory" or a bare std::bad_alloc halfway through a run.
// The device is known only when the run starts (--device overrides the
// file's; auto falls back to the CPU), so this runs then, and before
// --dry-run's listing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device.h"
#include "models/memory_estimate.h"
#include "runner/experiment/config.h"

namespace mpb {

// The first of `cells` that cannot fit: on the CPU device, its device and
// host bytes together above the host's available memory; on a GPU, its device
// bytes above the GPU's free memory or its host bytes above the host's. The
// error points at the value that makes the cell biggest (of the keys the file
// sets, the one whose default would shrink the estimate most) and names the
// cell, the estimate and the memory available. nullopt: every cell fits, or
// the device can't say what it has free.
std::optional<ConfigError> memory_fit_error(const ExperimentConfig& exp, const std::vector<const Cell*>& cells,
                                            const Device& dev);

// Whether one configuration's estimate fits `dev` now (the rule above);
// true when the device can't say what it has free.
bool cell_memory_fits(const CellConfig& cfg, const Device& dev);

// Makes the device `kind` names (cpu | cuda | auto) and runs memory_fit_error.
// Prints the error and returns 2 when a cell doesn't fit; returns 0 otherwise,
// also when the device can't be made (the run says why itself).
int refuse_cells_that_cannot_fit(const ExperimentConfig& exp, const std::vector<const Cell*>& cells,
                                 const std::string& kind);

// summary.estimated_memory_bytes of a cell's JSON (docs/RESULTS.md): the
// categories of peak_memory_bytes, their sum as "total", and "host".
nlohmann::json memory_estimate_json(const MemoryEstimate& estimate);

}  // namespace mpb
