// The measured window before a run: a cell whose repeats would time too few
// steps for the statistics is an error for that cell, found before anything
// runs, not a throughput of 0 or a median of one step after an hour of work
// (issue 18; DeepLearningExamples#834 reported a throughput of 0 from an
// empty window).
#pragma once

#include <optional>
#include <vector>

#include "runner/experiment/config.h"

namespace mpb {

// The fewest steps a repeat's measured window may hold. Five: the
// steady-state rule (runner/measure/steady_state.h) compares the median of five
// unprobed steps with the rest, so a shorter window cannot be shown to be
// past start-up; and below five the p10/p90 and the robust CV of
// summary.noise are the extremes or undefined.
constexpr int kMinMeasuredSteps = 5;

// Steps the configuration leaves to time in each repeat: from warmup_steps
// on, those that do not sample numerics (every numerics_every-th step
// does), or every step from warmup_steps on when all of them sample (the
// runner then times the probed steps: runner/results/results.cpp). The steady-state
// rule may start the window later, but never past the middle of these.
int planned_measured_steps(const CellConfig& c);

// The first of `cells` with fewer than kMinMeasuredSteps planned measured
// steps, as an error at the value to change (steps where the file sets it,
// else warmup_steps or numerics_every), naming the cell and the count.
std::optional<ConfigError> short_window_error(const ExperimentConfig& exp, const std::vector<const Cell*>& cells);

}  // namespace mpb
