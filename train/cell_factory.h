// A cell's model and data source from its resolved configuration: the one
// place that maps config keys to model and dataset constructors (the runner,
// the benchmarks and the tests all build cells through it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "models/dataset.h"
#include "models/model.h"
#include "config/cell_config.h"

namespace mpb {

// Each throws std::invalid_argument for a configuration that check_cell_config
// (config/schema.h) rejects, with its message.
// Micro-batch = batch_size / accumulation; `seed` initialises the weights.
std::unique_ptr<Model> build_model(Device& dev, const CellConfig& cfg, uint64_t seed);
// `seed` draws the training batches; the held-out set never depends on it.
std::unique_ptr<Dataset> build_dataset(const CellConfig& cfg, uint64_t seed);
// Things worth telling the user about a cell before it runs (for BERT: GEMM
// dimensions that are not multiples of 8, and similar).
std::vector<std::string> cell_warnings(const CellConfig& cfg);

}  // namespace mpb
