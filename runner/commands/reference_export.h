// `runner FILE.yaml --export-reference DIR [--filter EXPR]`: everything a
// PyTorch re-implementation needs to check one cell's model against mpbench
// (as llm.c checks itself against PyTorch), in safetensors files:
//
//   DIR/weights.safetensors   the initial parameters, by their state-dict names
//   DIR/batches.safetensors   the host batches of steps 1..kReferenceSteps
//   DIR/mpbench.safetensors   mpbench's results: step 1's logits, loss and
//                             parameter gradients; the losses and gradient
//                             norms of kReferenceSteps training steps
//   DIR/meta.json             the resolved config, model, parameter order, rules
//
// The format is documented in docs/REFERENCE.md; scripts/torch_reference.py
// and scripts/check_reference.py are the other two halves.
#pragma once

#include <string>

#include "runner/experiment/config.h"

namespace mpb {

constexpr int kReferenceSteps = 10;

// Exports `cell` on the CPU device into `dir` (created if needed). Throws
// std::exception subclasses on failure (a model or dataset that can't be
// built, an unwritable directory).
void export_reference(const ExperimentConfig& exp, const Cell& cell, const std::string& dir);

// The CLI's entry point: picks the one cell of `exp` that `filter` matches
// (all cells when empty) and exports it. Returns the exit code: 0 done, 2 when
// the filter is malformed or matches no cell or more than one (with a message
// on stderr listing the candidates), 1 when the export fails.
int run_export_reference(const ExperimentConfig& exp, const std::string& filter, const std::string& dir);

}  // namespace mpb
