// What a cell's model and data can take, decided from its configuration
// before anything is built: the models' and data sources' own rules (beyond
// the schema's per-key bounds and check_cell_config's cross-key rules), the
// data files it names, and the memory it will need. The loader runs the
// checks on every cell, so that a bad cell fails at load time with its
// file:line:col (runner/experiment/matrix.cpp); the runner compares the estimate with
// the device's free memory before a run (runner/measure/memory_fit.h).
#pragma once

#include <optional>

#include "config/cell_config.h"
#include "config/schema.h"
#include "models/memory_estimate.h"

namespace mpb {

// The first rule of the cell's model or data source that `cfg` breaks (for
// BERT: hidden divisible by heads, after the model.size preset), with the
// keys involved, most specific first. Pure: reads no file.
std::optional<CellProblem> check_cell_model(const CellConfig& cfg);

// The files the cell reads (data.path for data.kind text): missing, not a
// regular file, unreadable, or too short for model.seq_len. Relative paths are
// from the current directory, as the run opens them.
std::optional<CellProblem> check_cell_files(const CellConfig& cfg);

// Everything a run of the cell allocates, per memory category (models/
// memory_estimate.h): the model's parameters, gradients, activations and
// workspace, the trainer's optimizer state and labels, and on the host the
// data source, its batches and the run record. `cuda`: the model as
// build_model makes it on a CUDA device (bert_config's pad_vocab and fused
// attention choices).
MemoryEstimate estimate_cell_memory(const CellConfig& cfg, bool cuda = false);

}  // namespace mpb
