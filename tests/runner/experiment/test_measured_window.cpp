// The measured-window check before a run (runner/experiment/measured_window.h, issue 18):
// a cell that would time fewer than kMinMeasuredSteps steps per repeat fails
// with exit 2 before anything is written, pointing at the value to change.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runner/experiment/measured_window.h"
#include "runner/commands/run_experiment.h"
#include "tests/runner/config_test_helpers.h"
#include "tests/runner/refused_run.h"

namespace mpb {
namespace {

using namespace config_test;

TEST(MeasuredWindow, CountsUnprobedStepsAfterWarmup) {
  CellConfig c;
  c.steps = 30;
  c.warmup_steps = 5;
  c.numerics_every = 10;  // steps 10 and 20 probe (0 is in the warm-up)
  EXPECT_EQ(planned_measured_steps(c), 23);
  c.numerics_every = 0;
  EXPECT_EQ(planned_measured_steps(c), 25);
  c.numerics_every = 1;  // every step probes: they are all timed
  EXPECT_EQ(planned_measured_steps(c), 25);
  c.warmup_steps = 0;
  c.numerics_every = 2;  // 0, 2, 4, ... probe: 15 of 30 left
  EXPECT_EQ(planned_measured_steps(c), 15);
}

TEST(MeasuredWindow, TooShortAWindowPointsAtSteps) {
  const ExperimentConfig e = load("name: x\nsteps: 6\nwarmup_steps: 2\nnumerics_every: 0\n");
  const auto error = short_window_error(e, all_cells(e));
  ASSERT_TRUE(error.has_value());
  expect_points_at(*error, 2, 8, "steps");
  EXPECT_EQ(error->message(),
            "cell 'base': steps (6) after warmup_steps (2) leave 4 measured step(s); each repeat needs at least 5 for "
            "its statistics: raise steps to at least 7");
}

TEST(MeasuredWindow, ProbedStepsAreNamedAndTheFixCountsThem) {
  // Steps 2..7 after the warm-up; 2, 4 and 6 sample numerics: 3 left, and
  // every second step added is probed too.
  const ExperimentConfig e = load("name: x\nsteps: 8\nwarmup_steps: 2\nnumerics_every: 2\n");
  const auto error = short_window_error(e, all_cells(e));
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->message().find("leave 3 measured step(s) (3 more sample numerics"), std::string::npos)
      << error->message();
  EXPECT_NE(error->message().find("raise steps to at least 12"), std::string::npos) << error->message();
}

TEST(MeasuredWindow, MatrixValueIsTheOnePointedAt) {
  const ExperimentConfig e = load("name: x\nnumerics_every: 0\nwarmup_steps: 1\nmatrix:\n  steps: [100, 4]\n");
  const auto error = short_window_error(e, all_cells(e));
  ASSERT_TRUE(error.has_value());
  expect_points_at(*error, 5, 16, "matrix.steps[1]");
  EXPECT_NE(error->message().find("cell 'steps=4'"), std::string::npos) << error->message();
}

TEST(MeasuredWindow, LongEnoughWindowsPass) {
  const ExperimentConfig e = load("name: x\nsteps: 6\nwarmup_steps: 1\n");  // 1..5: 5 steps, none probed
  EXPECT_FALSE(short_window_error(e, all_cells(e)).has_value());
}

TEST(MeasuredWindow, RunAndDryRunExitTwoAndWriteNothing) {
  const ExperimentConfig e = load("name: short\ndevice: cpu\nsteps: 3\nwarmup_steps: 1\n");
  RunOptions opt = quiet_run_into_fresh_dir("mpb_measured_window");
  expect_refused_writing_nothing(e, opt);
}

}  // namespace
}  // namespace mpb
