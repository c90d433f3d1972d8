// The memory check before a run (runner/measure/memory_fit.h, issue 13 D6): a cell
// whose estimate can't fit the device fails with exit 2 before anything is
// built or written, in a real run and in --dry-run, at the value that makes it
// big; and the estimate's JSON (summary.estimated_memory_bytes).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "runner/measure/memory_fit.h"
#include "runner/commands/run_experiment.h"
#include "tests/runner/config_test_helpers.h"
#include "tests/runner/refused_run.h"
#include "train/cell_limits.h"

namespace mpb {
namespace {

using namespace config_test;
namespace fs = std::filesystem;

// No machine has the terabytes these cells need; every machine has the
// megabytes of the small ones.
const char* const kWideMatrix = "name: fit\ndevice: cpu\nsteps: 6\nwarmup_steps: 0\nmatrix:\n  model.width: [64, 1000000]\n";

TEST(MemoryFit, RefusesTheCellAtTheValueThatMakesItBig) {
  const ExperimentConfig e = load(kWideMatrix);
  const std::unique_ptr<Device> cpu = make_cpu_device();
  const auto error = memory_fit_error(e, all_cells(e), *cpu);
  ASSERT_TRUE(error.has_value());
  expect_points_at(*error, 6, 21, "matrix.model.width[1]");
  for (const char* part : {"cell 'model.width=1000000' needs an estimated 43.7 TiB (params 10.9 TiB, grads 10.9 TiB, "
                           "optimizer 21.8 TiB, activations ", "but the cpu device has ", " available"}) {
    EXPECT_NE(error->message().find(part), std::string::npos) << error->message();
  }
}

TEST(MemoryFit, PointsAtTheBiggestOfTheBaseValues) {
  // 2^31 - 1 classes: the teacher alone is 512 GiB on the host; the batch size
  // is bigger than the default but not what makes the cell big.
  const ExperimentConfig e = load("name: fit\nbatch_size: 512\ndata:\n  classes: 2147483647\n");
  const auto error = memory_fit_error(e, all_cells(e), *make_cpu_device());
  ASSERT_TRUE(error.has_value());
  expect_points_at(*error, 4, 12, "data.classes");
  EXPECT_NE(error->message().find("host data 512.0 GiB"), std::string::npos) << error->message();
}

TEST(MemoryFit, SmallCellsFit) {
  const ExperimentConfig e = load(
      "name: fit\nmodel: {kind: bert, size: mini}\ndata: {kind: markov}\nmatrix:\n  precision: [fp32, O2]\n");
  EXPECT_FALSE(memory_fit_error(e, all_cells(e), *make_cpu_device()).has_value());
}

TEST(MemoryFit, RunAndDryRunExitTwoAndWriteNothing) {
  const ExperimentConfig e = load(kWideMatrix);
  RunOptions opt = quiet_run_into_fresh_dir("mpb_memory_fit");
  expect_refused_writing_nothing(e, opt);
  // --filter leaves the big cell out: the rest lists (and would run).
  opt.dry_run = true;
  opt.filter = "model.width=64";
  EXPECT_EQ(run_experiment(e, opt), 0);
  EXPECT_FALSE(fs::exists(opt.out_dir));
}

TEST(MemoryFit, EstimateJsonHasThePeakCategoriesTotalAndHost) {
  const ExperimentConfig e = load("name: fit\n");
  const MemoryEstimate estimate = estimate_cell_memory(e.cells[0].config);
  const nlohmann::json j = memory_estimate_json(estimate);
  for (const char* key : {"params", "grads", "optimizer", "activations", "workspace", "total", "host"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["total"].get<double>(), std::ceil(estimate.device_total()));
  // The default MLP: 256-(1024 x 4)-16 with AdamW, fp32: params, grads and two moments.
  const double params = 256 * 1024 + 1024 + 3 * (1024 * 1024 + 1024) + 1024 * 16 + 16;
  EXPECT_EQ(j["params"].get<double>(), params * 4);
  EXPECT_EQ(j["optimizer"].get<double>(), params * 8);
}

}  // namespace
}  // namespace mpb
