// runner FILE --find-max-batch: the largest batch_size each cell can train
// with on this device (issue 18: "what is the biggest batch that fits" is the
// first question on a new GPU). Batch sizes stay multiples of the cell's
// accumulation. A batch fits when the cell's memory estimate
// (train/cell_limits.h) fits the device's free memory (runner/measure/memory_fit.h)
// and, on a GPU, when a real trial (the model, data and two training steps
// at that batch) runs without a failed cudaMalloc. On the CPU no trial runs:
// the kernel overcommits memory, so an allocation does not fail where the
// machine would start swapping; the estimate is the answer, and says so.
// Nothing is written; the answer is a table on stdout.
#pragma once

#include <functional>
#include <string>

#include "runner/experiment/config.h"
#include "runner/commands/run_experiment.h"

namespace mpb {

struct MaxBatch {
  int configured = 0;
  int largest = 0;       // 0: not even one micro-batch of samples fits
  bool capped = false;   // the search stopped at kMaxBatchSearched, not at the memory
  int trials = 0;        // fits() calls
};

// The largest batch b = k * accumulation (1 <= k, b <= kMaxBatchSearched)
// with fits(b), assuming fits is monotone: doubling from the configured batch,
// then bisection. Pure: the device enters through `fits`.
constexpr int kMaxBatchSearched = 1 << 20;
MaxBatch search_max_batch(int configured, int accumulation, const std::function<bool(int)>& fits);

// The mode: one row per cell (after --filter) on --device's device. Returns
// the exit code (ExitCode).
int run_find_max_batch(const ExperimentConfig& exp, const RunOptions& opt);

}  // namespace mpb
