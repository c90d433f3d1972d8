// The experiment file's `convergence:` key (runner/experiment/convergence_settings.h):
// defaults, every cell gets the experiment's settings, and bad values fail
// naming file:line:col and the dotted key.
#include <gtest/gtest.h>

#include "tests/runner/config_test_helpers.h"
#include "runner/experiment/config.h"

namespace mpb {
namespace {

using config_test::error_of;
using config_test::expect_points_at;
using config_test::load;

TEST(ConvergenceSettings, DefaultsWithoutTheKey) {
  const ExperimentConfig e = load("name: x\n");
  EXPECT_FALSE(e.convergence.margin.has_value());
  EXPECT_EQ(e.convergence.metric, "eval_loss");
  EXPECT_DOUBLE_EQ(e.convergence.alpha, 0.05);
  EXPECT_DOUBLE_EQ(e.convergence.max_skipped_fraction, 0.01);
}

TEST(ConvergenceSettings, MaxSkippedFractionTakesZeroButNotOne) {
  EXPECT_DOUBLE_EQ(load("name: x\nconvergence: {max_skipped_fraction: 0}\n").convergence.max_skipped_fraction, 0.0);
  EXPECT_DOUBLE_EQ(load("name: x\nconvergence: {max_skipped_fraction: 0.2}\n").convergence.max_skipped_fraction, 0.2);
  expect_points_at(error_of("name: x\nconvergence:\n  max_skipped_fraction: 1\n"), 3, 25,
                   "convergence.max_skipped_fraction");
  expect_points_at(error_of("name: x\nconvergence:\n  max_skipped_fraction: -0.1\n"), 3, 25,
                   "convergence.max_skipped_fraction");
}

TEST(ConvergenceSettings, AnAbsoluteMarginIsInTheMetricsUnits) {
  const ExperimentConfig e = load("name: x\nconvergence: {margin_abs: 0.05}\n");
  ASSERT_TRUE(e.convergence.margin_abs.has_value());
  EXPECT_DOUBLE_EQ(*e.convergence.margin_abs, 0.05);
  EXPECT_FALSE(e.convergence.margin.has_value());
}

TEST(ConvergenceSettings, EveryCellGetsTheExperimentsSettings) {
  const ExperimentConfig e =
      load("name: x\nconvergence: {margin: 0.02, metric: eval_accuracy, alpha: 0.1}\nmatrix:\n  batch_size: [8, 16]\n");
  ASSERT_EQ(e.cells.size(), 2u);
  for (const Cell& c : e.cells) {
    ASSERT_TRUE(c.convergence.margin.has_value());
    EXPECT_DOUBLE_EQ(*c.convergence.margin, 0.02);
    EXPECT_EQ(c.convergence.metric, "eval_accuracy");
    EXPECT_DOUBLE_EQ(c.convergence.alpha, 0.1);
  }
}

TEST(ConvergenceSettings, BadValuesNameFileLineColAndKey) {
  expect_points_at(error_of("name: x\nconvergence:\n  alpha: 0.7\n"), 3, 10, "convergence.alpha");
  expect_points_at(error_of("name: x\nconvergence:\n  margin: abc\n"), 3, 11, "convergence.margin");
  expect_points_at(error_of("name: x\nconvergence:\n  margin: 0\n"), 3, 11, "convergence.margin");
  expect_points_at(error_of("name: x\nconvergence:\n  metric: eval_los\n"), 3, 11, "convergence.metric");
  expect_points_at(error_of("name: x\nconvergence:\n  margin_abs: -0.1\n"), 3, 15, "convergence.margin_abs");
  // Both margins: the second one named is the error.
  expect_points_at(error_of("name: x\nconvergence:\n  margin: 0.01\n  margin_abs: 0.05\n"), 4, 3,
                   "convergence.margin_abs");
  expect_points_at(error_of("name: x\nconvergence:\n  margn: 0.01\n"), 3, 3, "convergence.margn");
  expect_points_at(error_of("name: x\nconvergence: 0.01\n"), 2, 14, "convergence");
  EXPECT_NE(std::string(error_of("name: x\nconvergence:\n  margn: 0.01\n").what()).find("did you mean 'margin'"),
            std::string::npos);
}

}  // namespace
}  // namespace mpb
