// Matrix expansion (product order, ids, slugs, exclude/include/baseline),
// --filter matching, the resolved-config JSON and its hash.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/precision.h"
#include "runner/experiment/config.h"
#include "tests/runner/config_test_helpers.h"

namespace mpb {
namespace {

using namespace config_test;

std::vector<std::string> ids(const ExperimentConfig& e) {
  std::vector<std::string> out;
  for (const auto& cell : e.cells) out.push_back(cell.id);
  return out;
}

std::string baseline_id(const ExperimentConfig& e) {
  std::string id;
  int count = 0;
  for (const auto& cell : e.cells) {
    if (cell.is_baseline) {
      id = cell.id;
      ++count;
    }
  }
  EXPECT_EQ(count, 1) << "exactly one cell must be the baseline";
  return id;
}

// ---- Expansion ------------------------------------------------------------------------

TEST(Matrix, ProductInWrittenOrderFirstAxisSlowest) {
  const ExperimentConfig e = load(R"(name: m
matrix:
  fusion: [off, on]
  model.width: [512, 1024]
  optimizer.kind: [adamw, sgd]
)");
  EXPECT_EQ(ids(e), (std::vector<std::string>{
                        "fusion=off,model.width=512,optimizer.kind=adamw",
                        "fusion=off,model.width=512,optimizer.kind=sgd",
                        "fusion=off,model.width=1024,optimizer.kind=adamw",
                        "fusion=off,model.width=1024,optimizer.kind=sgd",
                        "fusion=on,model.width=512,optimizer.kind=adamw",
                        "fusion=on,model.width=512,optimizer.kind=sgd",
                        "fusion=on,model.width=1024,optimizer.kind=adamw",
                        "fusion=on,model.width=1024,optimizer.kind=sgd",
                    }));
  const Cell& cell = e.cells[6];
  EXPECT_TRUE(cell.config.fused);
  EXPECT_EQ(cell.config.model.width, 1024);
  EXPECT_EQ(cell.config.optimizer.kind, OptimizerKind::AdamW);
  EXPECT_EQ(cell.axes,
            (std::vector<std::pair<std::string, std::string>>{
                {"fusion", "on"}, {"model.width", "1024"}, {"optimizer.kind", "adamw"}}));
  EXPECT_EQ(cell.slug, "fusion=on__model.width=1024__optimizer.kind=adamw");
  EXPECT_EQ(baseline_id(e), e.cells[0].id);  // default: the first cell
  // The base is untouched by the axes.
  EXPECT_EQ(e.base.model.width, 1024);
  EXPECT_FALSE(e.base.fused);
}

TEST(Matrix, AxisValuesAreCanonical) {
  const ExperimentConfig e = load(R"(name: m
matrix:
  optimizer.lr: [1e-3, 0.01, 2.50, 1.0e-8]
  fusion: [false, "on"]
)");
  EXPECT_EQ(ids(e)[0], "optimizer.lr=0.001,fusion=off");
  EXPECT_EQ(ids(e)[3], "optimizer.lr=0.01,fusion=on");
  EXPECT_EQ(ids(e)[4], "optimizer.lr=2.5,fusion=off");
  EXPECT_EQ(ids(e)[6], "optimizer.lr=1e-8,fusion=off");
  EXPECT_DOUBLE_EQ(e.cells[6].config.optimizer.lr, 1e-8);
}

TEST(Matrix, NoMatrixIsOneBaseCell) {
  for (const char* yaml : {"name: m\n", "name: m\nmatrix:\n", "name: m\nmatrix: {}\n"}) {
    const ExperimentConfig e = load(yaml);
    ASSERT_EQ(e.cells.size(), 1u) << yaml;
    EXPECT_EQ(e.cells[0].id, "base");
    EXPECT_TRUE(e.cells[0].is_baseline);
  }
}

TEST(Matrix, AnyScalarKeyIsAnAxis) {
  const ExperimentConfig e = load(R"(name: m
batch_size: 96
matrix:
  seed: [1, 2]
  steps: [10, 20]
  accumulation: [1, 3]
  data.classes: [2, 10]
  model.activation: [relu]
  checkpoint_k: [4]
  loss_scale.growth_interval: [100]
)");
  EXPECT_EQ(e.cells.size(), 16u);
  EXPECT_EQ(e.cells.back().id,
            "seed=2,steps=20,accumulation=3,data.classes=10,model.activation=relu,checkpoint_k=4,"
            "loss_scale.growth_interval=100");
  EXPECT_EQ(e.cells.back().config.seed, 2u);
  EXPECT_EQ(e.cells.back().config.data.classes, 10);
  EXPECT_EQ(e.cells.back().config.loss_scale.growth_interval, 100);
}

TEST(Matrix, AxisValuesAreValidatedAtTheirPosition) {
  expect_errors({
      {"name: m\nmatrix:\n  model.width: [512, abc]\n", 3, 22, "matrix.model.width[1]",
       "expected an integer, got 'abc'"},
      {"name: m\nmatrix:\n  optimizer.lr: [0.1, 0]\n", 3, 23, "matrix.optimizer.lr[1]",
       "must be > 0, got 0"},
      {"name: m\nmatrix:\n  fusion: [off, maybe]\n", 3, 17, "matrix.fusion[1]",
       "expected one of off, on, got 'maybe'"},
      {"name: m\nmatrix:\n  precision:\n    - fp32\n    - fp33\n", 5, 7, "matrix.precision[1]",
       "unknown precision 'fp33'"},
      {"name: m\nmatrix:\n  steps: [{a: 1}]\n", 3, 11, "matrix.steps[0]",
       "expected an integer, got a map"},
  });
}

TEST(Matrix, EmptyAxisOrNotAList) {
  expect_errors({
      {"name: m\nmatrix:\n  precision: []\n", 3, 14, "matrix.precision", "the axis has no values"},
      {"name: m\nmatrix:\n  fusion: on\n", 3, 11, "matrix.fusion", "expected a list of values"},
      {"name: m\nmatrix:\n  fusion:\n", 3, 3, "matrix.fusion", "expected a list of values"},
      {"name: m\nmatrix: [fusion]\n", 2, 9, "matrix", "expected a map of axis"},
  });
}

TEST(Matrix, DuplicateValuesWouldDuplicateIds) {
  expect_errors({
      {"name: m\nmatrix:\n  fusion: [off, on, false]\n", 3, 21, "matrix.fusion[2]",
       "duplicate value 'off' (same as matrix.fusion[0])"},
      {"name: m\nmatrix:\n  optimizer.lr: [0.001, 1e-3]\n", 3, 25, "matrix.optimizer.lr[1]",
       "duplicate value '0.001'"},
  });
}

TEST(Matrix, TooManyCells) {
  std::string values;
  for (int i = 1; i <= 400; ++i) values += (i > 1 ? ", " : "") + std::to_string(i);
  const ConfigError e =
      error_of("name: m\nmatrix:\n  seed: [" + values + "]\n  model.width: [" + values + "]\n");
  EXPECT_NE(e.message().find("more than 10000 cells"), std::string::npos) << e.what();
}

TEST(Matrix, TooManyValuesOnOneAxisIsRefusedAtTheAxis) {
  std::string values;
  for (int i = 1; i <= 10001; ++i) values += (i > 1 ? "," : "") + std::to_string(i);
  expect_error("name: m\nmatrix:\n  seed: [" + values + "]\n", 3, 9, "matrix.seed",
               "the axis has 10001 values; at most 10000");
}

TEST(Include, MoreThanTheCellLimitIsRefusedAtTheEntryThatCrossesIt) {
  // 100 matrix cells + 9,901 includes: include[9900] is cell 10,001.
  std::string yaml = "name: m\nmatrix:\n  model.width: [";
  for (int i = 1; i <= 100; ++i) yaml += (i > 1 ? "," : "") + std::to_string(i);
  yaml += "]\ninclude:\n";
  for (int i = 0; i < 9901; ++i) yaml += "  - {seed: " + std::to_string(i + 2) + "}\n";
  expect_error(yaml, 9905, 5, "include[9900]", "this include makes more than 10000 cells");
}

TEST(Matrix, MaxCellsOptionLimitsTheProductBeforeExcludes) {
  LoadOptions options;
  options.max_cells = 6;
  const std::string yaml = "name: m\nmatrix:\n  fusion: [off, on]\n  seed: [1, 2, 3]\n";
  EXPECT_EQ(load(yaml, options).cells.size(), 6u);
  expect_error(yaml + "  repeats: [1, 2]\nexclude: [{repeats: 2}]\n", 5, 13, "matrix",
               "the matrix expands to more than 6 cells", options);
}

// ---- Exclude ------------------------------------------------------------------------

TEST(Exclude, DropsCellsMatchingEveryKeyOfAnEntry) {
  const ExperimentConfig e = load(R"(name: m
matrix:
  fusion: [off, on]
  optimizer.lr: [0.001, 0.01]
  model.width: [64, 128]
exclude:
  - {fusion: on, optimizer.lr: 1e-3}   # 1e-3 matches 0.001
  - {model.width: 128, optimizer.lr: 0.01}
)");
  EXPECT_EQ(ids(e), (std::vector<std::string>{
                        "fusion=off,optimizer.lr=0.001,model.width=64",
                        "fusion=off,optimizer.lr=0.001,model.width=128",
                        "fusion=off,optimizer.lr=0.01,model.width=64",
                        "fusion=on,optimizer.lr=0.01,model.width=64",
                    }));
}

TEST(Exclude, KeyThatIsNotAnAxisMatchesTheResolvedConfig) {
  const ExperimentConfig e = load(R"(name: m
batch_size: 96
matrix:
  accumulation: [1, 5, 3]
exclude:
  - {accumulation: 5, batch_size: 96}   # 96 is not divisible by 5: dropped before checks
)");
  EXPECT_EQ(ids(e), (std::vector<std::string>{"accumulation=1", "accumulation=3"}));
}

TEST(Exclude, EntriesWithTheSameKeysInAnyOrderAndWithOtherKeys) {
  // Entries are matched by their set of keys, whatever order they list them in.
  const ExperimentConfig e = load(R"(name: m
matrix:
  fusion: [off, on]
  model.width: [64, 128]
  optimizer.lr: [0.001, 0.01]
exclude:
  - {fusion: on, model.width: 64}
  - {model.width: 128, fusion: off}
  - {optimizer.lr: 0.01}
  - {optimizer.lr: 0.01, fusion: on}   # inside the entry above
)");
  EXPECT_EQ(ids(e), (std::vector<std::string>{"fusion=off,model.width=64,optimizer.lr=0.001",
                                              "fusion=on,model.width=128,optimizer.lr=0.001"}));
}

TEST(Exclude, ZeroCellsLeftIsAnError) {
  expect_errors({
      {"name: m\nmatrix:\n  fusion: [off, on]\nexclude:\n  - {optimizer.kind: adamw}\n", 5, 3,
       "exclude",
       "the matrix expands to zero cells after excludes"},
      {"name: m\nexclude:\n  - {fusion: off}\n", 3, 3, "exclude", "zero cells"},
  });
}

TEST(Exclude, BadEntries) {
  expect_errors({
      {"name: m\nmatrix:\n  fusion: [off, on]\nexclude:\n  - {fuson: on}\n", 5, 6,
       "exclude[0].fuson",
       "unknown key 'fuson'; did you mean 'fusion'?"},
      {"name: m\nmatrix:\n  fusion: [off, on]\nexclude:\n  - {fusion: maybe}\n", 5, 14,
       "exclude[0].fusion",
       "expected one of off, on"},
      {"name: m\nexclude: {fusion: on}\n", 2, 10, "exclude", "expected a list of maps"},
      {"name: m\nexclude:\n  - {}\n", 3, 5, "exclude[0]", "got an empty map"},
  });
}

TEST(Exclude, UnsupportedValuesThatNoCellRunsAreFine) {
  const ExperimentConfig e = load(R"(name: m
matrix:
  checkpointing: [off, sqrt]
  fusion: [off, on]
exclude:
  - {checkpointing: sqrt}
)");
  EXPECT_EQ(ids(e), (std::vector<std::string>{"checkpointing=off,fusion=off",
                                              "checkpointing=off,fusion=on"}));
}

// ---- Include ----------------------------------------------------------------------

TEST(Include, AppendsBasePlusItsKeysInWrittenOrder) {
  const ExperimentConfig e = load(R"(name: m
batch_size: 256
matrix:
  fusion: [off, on]
  model.width: [64, 128]
include:
  - {batch_size: 512, fusion: on}
  - {optimizer.lr: 1e-2}
)");
  ASSERT_EQ(e.cells.size(), 6u);
  const Cell& first = e.cells[4];
  EXPECT_EQ(first.id, "batch_size=512,fusion=on");
  EXPECT_EQ(first.slug, "batch_size=512__fusion=on");
  EXPECT_EQ(first.config.batch_size, 512);
  EXPECT_TRUE(first.config.fused);
  EXPECT_EQ(first.config.model.width, 1024);  // the base, not a matrix value
  EXPECT_EQ(e.cells[5].id, "optimizer.lr=0.01");
  EXPECT_FALSE(e.cells[5].config.fused);
}

TEST(Include, MayAddBackAnExcludedCell) {
  const ExperimentConfig e = load(R"(name: m
matrix:
  fusion: [off, on]
  model.width: [64, 128]
exclude:
  - {fusion: on}
include:
  - {model.width: 64, fusion: on}
)");
  EXPECT_EQ(ids(e),
            (std::vector<std::string>{"fusion=off,model.width=64", "fusion=off,model.width=128",
                                      "model.width=64,fusion=on"}));
}

TEST(Include, WithoutAMatrix) {
  const ExperimentConfig e = load("name: m\ninclude:\n  - {fusion: on}\n");
  EXPECT_EQ(ids(e), (std::vector<std::string>{"base", "fusion=on"}));
}

TEST(Include, EqualToAnExistingCellIsADuplicate) {
  // Same keys in another order: same configuration.
  expect_error(R"(name: m
matrix:
  fusion: [off, on]
  model.width: [64, 128]
include:
  - {model.width: 128, fusion: on}
)",
               6, 5, "include[0]",
               "duplicate cell: 'model.width=128,fusion=on' has the same configuration as "
               "'fusion=on,model.width=128'");
  // Same id.
  expect_error("name: m\nmatrix:\n  fusion: [off, on]\ninclude:\n  - {fusion: on}\n", 5, 5,
               "include[0]", "duplicate cell id 'fusion=on'");
  // A key set to the base value is the base cell.
  expect_error("name: m\ninclude:\n  - {steps: 60}\n", 3, 5, "include[0]",
               "duplicate cell: 'steps=60' has the same configuration as 'base'");
}

TEST(Include, BadEntries) {
  expect_errors({
      {"name: m\ninclude:\n  - {batch_sise: 512}\n", 3, 6, "include[0].batch_sise",
       "did you mean 'batch_size'?"},
      {"name: m\ninclude:\n  - {batch_size: 0}\n", 3, 18, "include[0].batch_size",
       "must be >= 1, got 0"},
      {"name: m\ninclude:\n  - fusion\n", 3, 5, "include[0]", "expected a map"},
  });
}

// ---- Per-cell checks --------------------------------------------------------------

TEST(CellChecks, AccumulationMustDivideBatchSizeNamesTheCell) {
  expect_errors({
      {"name: m\nbatch_size: 256\nmatrix:\n  accumulation: [1, 3]\n", 4, 21,
       "matrix.accumulation[1]",
       "cell 'accumulation=3': batch_size (256) is not divisible by accumulation (3)"},
      {"name: m\naccumulation: 3\nbatch_size: 96\nmatrix:\n  batch_size: [96, 100]\n", 5, 20,
       "matrix.batch_size[1]",
       "cell 'batch_size=100': batch_size (100) is not divisible"},
      {"name: m\naccumulation: 3\nbatch_size: 96\ninclude:\n  - {batch_size: 64}\n", 5, 18,
       "include[0].batch_size",
       "cell 'batch_size=64'"},
  });
}

TEST(CellChecks, WarmupBelowStepsNamesTheCell) {
  expect_error("name: m\nwarmup_steps: 5\nmatrix:\n  steps: [100, 5]\n", 4, 16, "matrix.steps[1]",
               "cell 'steps=5': warmup_steps (5) must be less than steps (5)");
}

// The not-supported-yet table is empty since LAMB landed; a cell check of
// two keys points at the matrix value the failing cell took the same way.
TEST(CellChecks, ProblemNamesItsMatrixPosition) {
  expect_error("name: m\nmatrix:\n  optimizer.kind: [lamb, adamw]\n  optimizer.bias_correction: [off]\n", 4, 31,
               "matrix.optimizer.bias_correction[0]", "optimizer.bias_correction off applies to LAMB only");
}

// ---- Baseline ----------------------------------------------------------------------

TEST(Baseline, MatchesExactlyOneCell) {
  const ExperimentConfig e = load(R"(name: m
matrix:
  fusion: [off, on]
  model.width: [64, 128]
baseline: {fusion: on, model.width: 64}
)");
  EXPECT_EQ(baseline_id(e), "fusion=on,model.width=64");
}

TEST(Baseline, CanUseCanonicalValuesAndNonAxisKeys) {
  const ExperimentConfig e = load(R"(name: m
matrix:
  optimizer.lr: [0.001, 0.01]
include:
  - {optimizer.lr: 0.001, batch_size: 512}
baseline: {optimizer.lr: 1e-3, batch_size: 256}
)");
  EXPECT_EQ(baseline_id(e), "optimizer.lr=0.001");
}

TEST(Baseline, CanBeAnIncludeCell) {
  const ExperimentConfig e = load(R"(name: m
matrix:
  fusion: [off, on]
include:
  - {fusion: on, batch_size: 512}
baseline: {batch_size: 512}
)");
  EXPECT_EQ(baseline_id(e), "fusion=on,batch_size=512");
}

TEST(Baseline, MatchingNoCellOrManyIsAnError) {
  expect_errors({
      {"name: m\nmatrix:\n  fusion: [off, on]\nbaseline: {model.width: 64}\n", 4, 11, "baseline",
       "{model.width: 64} matches none of the 2 cells; nearest: 'fusion=off' (model.width is 1024), "
       "'fusion=on' (model.width is 1024)"},
      {"name: m\nmatrix:\n  fusion: [off, on]\n  model.width: [64, 128]\nbaseline: {fusion: off}\n", 5, 11,
       "baseline",
       "{fusion: off} matches 2 cells ('fusion=off,model.width=64', 'fusion=off,model.width=128')"},
  });
}

// A generated matrix can have thousands of cells: the message names a few.
TEST(Baseline, MessagesNameTheNearestFewCellsAndTheCount) {
  std::string values;
  for (int i = 1; i <= 100; ++i) values += (i > 1 ? ", " : "") + std::to_string(i);
  const std::string matrix = "name: m\nmatrix:\n  seed: [" + values + "]\n  model.width: [" + values + "]\n";
  // 10,000 cells; one key differs in the cells of width 100 (listed first:
  // the earlier cell wins a tie), both in every other.
  const ConfigError none = error_of(matrix + "baseline: {seed: 0, model.width: 100}\n");
  EXPECT_EQ(none.message(),
            "{seed: 0, model.width: 100} matches none of the 10000 cells; nearest: "
            "'seed=1,model.width=100' (seed is 1), 'seed=2,model.width=100' (seed is 2), "
            "'seed=3,model.width=100' (seed is 3), 'seed=4,model.width=100' (seed is 4), "
            "'seed=5,model.width=100' (seed is 5), ...");
  const ConfigError many = error_of(matrix + "baseline: {seed: 7}\n");
  EXPECT_EQ(many.message(),
            "{seed: 7} matches 100 cells ('seed=7,model.width=1', 'seed=7,model.width=2', "
            "'seed=7,model.width=3', 'seed=7,model.width=4', 'seed=7,model.width=5', and 95 more); "
            "add keys so that it matches exactly one");
}

TEST(Baseline, BadEntries) {
  expect_errors({
      {"name: m\nbaseline: {precison: fp32}\n", 2, 12, "baseline.precison",
       "did you mean 'precision'?"},
      {"name: m\nbaseline: fp32\n", 2, 11, "baseline", "expected a map"},
  });
}

// ---- loss_scale as an axis ---------------------------------------------------------

TEST(LossScaleAxis, StringNumberAndMapValues) {
  const ExperimentConfig e = load(R"(name: m
matrix:
  loss_scale: [none, dynamic, 1024, {mode: dynamic, init: 1024, growth_interval: 100}, static]
)");
  EXPECT_EQ(ids(e), (std::vector<std::string>{
                        "loss_scale=none", "loss_scale=dynamic", "loss_scale=static{value:1024}",
                        "loss_scale=dynamic{init:1024;growth_interval:100}", "loss_scale=static"}));
  EXPECT_EQ(e.cells[3].slug, "loss_scale=dynamic_init_1024_growth_interval_100_-fee87dec");  // braces replaced: hashed
  EXPECT_DOUBLE_EQ(e.cells[2].config.loss_scale.value, 1024.0);
  EXPECT_EQ(e.cells[3].config.loss_scale.growth_interval, 100);
}

TEST(LossScaleAxis, ValueReplacesTheWholeLossScale) {
  const ExperimentConfig e = load(R"(name: m
loss_scale: {mode: dynamic, init: 1024}
matrix:
  loss_scale: [dynamic, none]
)");
  EXPECT_DOUBLE_EQ(e.cells[0].config.loss_scale.init, 65536.0);
}

TEST(LossScaleAxis, SameScaleWrittenTwoWaysIsADuplicate) {
  const ConfigError e = error_of("name: m\nmatrix:\n  loss_scale: [static, 65536]\n");
  EXPECT_EQ(e.key(), "matrix.loss_scale[1]");
  EXPECT_NE(e.message().find("duplicate value 'static'"), std::string::npos) << e.what();
}

TEST(LossScaleAxis, ErrorsInsideAMapValue) {
  expect_errors({
      {"name: m\nmatrix:\n  loss_scale: [none, {mode: dynamic, inti: 8}]\n", 3, 38,
       "matrix.loss_scale[1].inti",
       "did you mean 'loss_scale.init'?"},
      {"name: m\nmatrix:\n  loss_scale: [none, {mode: static, value: -1}]\n", 3, 44,
       "matrix.loss_scale[1].value",
       "must be > 0, got -1"},
  });
}

// ---- inject_nonfinite as an axis: its values are lists ------------------------------

TEST(InjectNonfiniteAxis, ListValuesWithCanonicalIds) {
  const ExperimentConfig e = load(R"(name: m
matrix:
  inject_nonfinite: [[], [5], [9, 5]]
  fusion: [off, on]
)");
  EXPECT_EQ(ids(e), (std::vector<std::string>{
                        "inject_nonfinite=[],fusion=off", "inject_nonfinite=[],fusion=on",
                        "inject_nonfinite=[5],fusion=off", "inject_nonfinite=[5],fusion=on",
                        "inject_nonfinite=[5,9],fusion=off", "inject_nonfinite=[5,9],fusion=on"}));
  EXPECT_EQ(e.cells[0].slug, "inject_nonfinite=____fusion=off-1d272934");
  EXPECT_EQ(e.cells[5].slug, "inject_nonfinite=_5__9___fusion=on-f326f7e3");
  EXPECT_TRUE(e.cells[0].config.inject_nonfinite.empty());
  EXPECT_EQ(e.cells[5].config.inject_nonfinite, (std::vector<int>{5, 9}));
  EXPECT_EQ(e.cells[5].axes.front(),
            (std::pair<std::string, std::string>{"inject_nonfinite", "[5,9]"}));
  EXPECT_EQ(cell_config_to_json(e.cells[5].config)["inject_nonfinite"],
            nlohmann::json::array({5, 9}));
}

TEST(InjectNonfiniteAxis, BlockListsOfLists) {
  const ExperimentConfig e = load(R"(name: m
matrix:
  inject_nonfinite:
    - []
    - [3, 10]
    -
      - 7
)");
  EXPECT_EQ(ids(e), (std::vector<std::string>{"inject_nonfinite=[]", "inject_nonfinite=[3,10]",
                                              "inject_nonfinite=[7]"}));
}

TEST(InjectNonfiniteAxis, BadValues) {
  // A flat list is a common slip: the axis values are lists.
  expect_errors({
      {"name: m\nmatrix:\n  inject_nonfinite: [5, 9]\n", 3, 22, "matrix.inject_nonfinite[0]",
       "expected a list of steps such as [5], got '5'; an inject_nonfinite axis is a list "
               "of lists, such as [[], [5], [5, 9]]"},
      {"name: m\nmatrix:\n  inject_nonfinite: [[], {a: 1}]\n", 3, 26, "matrix.inject_nonfinite[1]",
       "got a map; an inject_nonfinite axis is a list of lists"},
      {"name: m\nmatrix:\n  inject_nonfinite: [[], [0]]\n", 3, 27, "matrix.inject_nonfinite[1][0]",
       "must be >= 1, got 0"},
      {"name: m\nmatrix:\n  inject_nonfinite: [[2], [4, x]]\n", 3, 31,
       "matrix.inject_nonfinite[1][1]",
       "expected an integer, got 'x'"},
      {"name: m\nmatrix:\n  inject_nonfinite: [[2, 2]]\n", 3, 26, "matrix.inject_nonfinite[0][1]",
       "step 2 is listed twice"},
      {"name: m\nmatrix:\n  inject_nonfinite: [[5, 9], [9, 5]]\n", 3, 30,
       "matrix.inject_nonfinite[1]",
       "duplicate value '[5,9]' (same as matrix.inject_nonfinite[0])"},
      {"name: m\nmatrix:\n  inject_nonfinite: []\n", 3, 21, "matrix.inject_nonfinite",
       "the axis has no values"},
  });
}

TEST(InjectNonfiniteAxis, StepsBeyondTheCellsStepsNameTheCell) {
  expect_error("name: m\nmatrix:\n  inject_nonfinite: [[], [100]]\n", 3, 26,
               "matrix.inject_nonfinite[1]",
               "cell 'inject_nonfinite=[100]': inject_nonfinite step 100 is beyond steps (60)");
  // The steps axis is the more specific value: it is the one pointed at.
  expect_errors({
      {"name: m\ninject_nonfinite: [8]\nmatrix:\n  steps: [100, 6]\n", 4, 16, "matrix.steps[1]",
       "cell 'steps=6': inject_nonfinite step 8 is beyond steps (6)"},
      {"name: m\ninject_nonfinite: [8]\nwarmup_steps: 0\ninclude:\n  - {steps: 7}\n", 5, 13,
       "include[0].steps",
       "cell 'steps=7': inject_nonfinite step 8 is beyond steps"},
  });
}

TEST(InjectNonfiniteAxis, ExcludeIncludeAndBaseline) {
  const ExperimentConfig e = load(R"(name: m
matrix:
  inject_nonfinite: [[], [5]]
  fusion: [off, on]
exclude:
  - {inject_nonfinite: [5], fusion: on}
include:
  - {inject_nonfinite: [3, 4]}
baseline: {inject_nonfinite: [], fusion: off}
)");
  EXPECT_EQ(ids(e), (std::vector<std::string>{"inject_nonfinite=[],fusion=off",
                                              "inject_nonfinite=[],fusion=on",
                                              "inject_nonfinite=[5],fusion=off",
                                              "inject_nonfinite=[3,4]"}));
  EXPECT_EQ(baseline_id(e), "inject_nonfinite=[],fusion=off");
  // Not an axis: matched against the resolved config.
  const ExperimentConfig f =
      load("name: m\nmatrix:\n  fusion: [off, on]\nbaseline: {fusion: on, inject_nonfinite: []}\n");
  EXPECT_EQ(baseline_id(f), "fusion=on");
  expect_error("name: m\nexclude:\n  - {inject_nonfinite: 5}\n", 3, 24,
               "exclude[0].inject_nonfinite", "expected a list of optimizer steps");
  // The same list in another order is the same cell.
  expect_error("name: m\ninject_nonfinite: [1, 2]\ninclude:\n  - {inject_nonfinite: [2, 1]}\n", 4,
               5, "include[0]",
               "duplicate cell: 'inject_nonfinite=[1,2]' has the same configuration as 'base'");
}

// ---- cell_matches_filter ----------------------------------------------------------

Cell filter_cell() {
  return load(R"(name: m
matrix:
  fusion: [off, on]
  optimizer.lr: [0.001, 0.01]
)")
      .cells[1];  // fusion=off,optimizer.lr=0.01
}

// Checks filter_cell() against filters it must match and filters it must not.
void expect_filters(const std::vector<const char*>& matching,
                    const std::vector<const char*>& not_matching) {
  const Cell cell = filter_cell();
  for (const char* f : matching) EXPECT_TRUE(cell_matches_filter(cell, f)) << f;
  for (const char* f : not_matching) EXPECT_FALSE(cell_matches_filter(cell, f)) << f;
}

TEST(Filter, MatchesAxesCanonically) {
  ASSERT_EQ(filter_cell().id, "fusion=off,optimizer.lr=0.01");
  expect_filters({"fusion=off", "fusion=false", "optimizer.lr=1e-2",
                  " fusion = off , optimizer.lr=0.010 "},
                 {"fusion=on", "fusion=off,optimizer.lr=0.001"});
}

TEST(Filter, NonAxisKeysMatchTheResolvedConfig) {
  expect_filters({"precision=fp32", "model.width=1024,fusion=off", "loss_scale=none"},
                 {"precision=tf32", "batch_size=512"});
}

TEST(Filter, EmptyFilterMatchesEverything) {
  EXPECT_TRUE(cell_matches_filter(filter_cell(), ""));
  EXPECT_TRUE(cell_matches_filter(filter_cell(), "  "));
}

TEST(Filter, MalformedThrowsInvalidArgument) {
  const Cell cell = filter_cell();
  for (const char* bad : {"fusion", "=on", "fusion=", "fusion=on,", "fusion=on,,steps=1",
                          "fushion=on", "optimizer.lr=abc", "fusion=maybe", "steps=0"}) {
    EXPECT_THROW(cell_matches_filter(cell, bad), std::invalid_argument) << bad;
  }
  // A bad later term is reported even when an earlier term already fails to match.
  EXPECT_THROW(cell_matches_filter(cell, "fusion=on,steps=x"), std::invalid_argument);
  try {
    cell_matches_filter(cell, "fushion=on");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'fusion'?"), std::string::npos) << e.what();
  }
  try {
    cell_matches_filter(cell, "precision");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("is not key=value"), std::string::npos) << e.what();
  }
}

// The error for a filter that matches no cell names the values a user can pick (issue 41).
TEST(Filter, NoMatchReasonListsTheValues) {
  const ExperimentConfig e = load(R"(name: m
matrix:
  precision: [fp32, amp_fp16, amp_bf16]
  fusion: [off, on]
exclude:
  - {precision: fp32, fusion: on}
)");
  EXPECT_EQ(filter_no_match_reason(e.cells, "precision=bf16"),
            "no cell has precision=bf16 (did you mean precision=amp_bf16?); its values here: fp32, amp_fp16, amp_bf16");
  EXPECT_EQ(filter_no_match_reason(e.cells, "fusion=on,precision=tf32"),
            "no cell has precision=tf32; its values here: fp32, amp_fp16, amp_bf16");
  EXPECT_EQ(filter_no_match_reason(e.cells, "precision=fp32,fusion=on"),
            "each value occurs, but no cell has them all together (precision is fp32, amp_fp16, amp_bf16; "
            "fusion is off, on)");
  EXPECT_THROW(filter_no_match_reason(e.cells, "fusion=maybe"), std::invalid_argument);
}

TEST(Filter, PolicyPrecisionWithCommas) {
  // Filter values are validated like YAML values, so by resolve_policy.
  for (const char* policy : {"params=float32,compute=float16", "params=float32,compute=bfloat16"}) {
    try {
      resolve_policy(policy);
    } catch (const std::invalid_argument& e) {
      GTEST_SKIP() << "core/precision does not resolve '" << policy << "' (yet): " << e.what();
    }
  }
  Cell cell;
  set_precision(cell.config, "params=float32,compute=float16");
  cell.axes = {{"precision", "params=float32,compute=float16"}, {"fusion", "on"}};
  EXPECT_TRUE(cell_matches_filter(cell, "precision=params=float32,compute=float16,fusion=on"));
  EXPECT_FALSE(cell_matches_filter(cell, "precision=params=float32,compute=bfloat16"));
}

TEST(Filter, LossScaleInItsCanonicalForm) {
  Cell cell;
  cell.config.loss_scale.mode = LossScaleMode::Dynamic;
  cell.config.loss_scale.init = 1024;
  cell.axes = {{"loss_scale", "dynamic{init:1024}"}};
  EXPECT_TRUE(cell_matches_filter(cell, "loss_scale=dynamic{init:1024}"));
  EXPECT_FALSE(cell_matches_filter(cell, "loss_scale=dynamic"));
  EXPECT_TRUE(cell_matches_filter(cell, "loss_scale.init=1024"));
}

TEST(Filter, ListValues) {
  const ExperimentConfig e =
      load("name: m\nmatrix:\n  inject_nonfinite: [[], [5, 9]]\n  fusion: [off, on]\n");
  const Cell& cell = e.cells[3];
  ASSERT_EQ(cell.id, "inject_nonfinite=[5,9],fusion=on");
  EXPECT_TRUE(cell_matches_filter(cell, "inject_nonfinite=[5,9]"));
  EXPECT_TRUE(cell_matches_filter(cell, "inject_nonfinite=[9, 5],fusion=on"));
  EXPECT_TRUE(cell_matches_filter(cell, "fusion=on, inject_nonfinite = [5,9] "));
  EXPECT_FALSE(cell_matches_filter(cell, "inject_nonfinite=[]"));
  EXPECT_FALSE(cell_matches_filter(cell, "inject_nonfinite=[5]"));
  EXPECT_TRUE(cell_matches_filter(e.cells[0], "inject_nonfinite=[],fusion=off"));
  // Not an axis: the resolved config.
  EXPECT_TRUE(cell_matches_filter(filter_cell(), "inject_nonfinite=[]"));
  EXPECT_TRUE(cell_matches_filter(filter_cell(), "numerics_every=10"));
  for (const char* bad : {"inject_nonfinite=[5,9", "inject_nonfinite=5", "inject_nonfinite=[0]",
                          "inject_nonfinite=[5,9],fusion", "numerics_every=-1"}) {
    EXPECT_THROW(cell_matches_filter(cell, bad), std::invalid_argument) << bad;
  }
}

// ---- Canonical values, slugs --------------------------------------------------------

TEST(Canonical, ValueStrings) {
  EXPECT_EQ(canonical_value_string("optimizer.lr", "1e-3"), "0.001");
  EXPECT_EQ(canonical_value_string("optimizer.lr", "+1.50"), "1.5");
  EXPECT_EQ(canonical_value_string("optimizer.eps", "1.0e-8"), "1e-8");
  EXPECT_EQ(canonical_value_string("optimizer.grad_clip", "-0.0"), "0");
  EXPECT_EQ(canonical_value_string("loss_scale.max", "1e20"), "1e20");
  EXPECT_EQ(canonical_value_string("steps", "+60"), "60");
  EXPECT_EQ(canonical_value_string("fusion", "true"), "on");
  EXPECT_EQ(canonical_value_string("checkpointing", "false"), "off");
  EXPECT_EQ(canonical_value_string("loss_scale", "4096"), "static{value:4096}");
  EXPECT_EQ(canonical_value_string("loss_scale", "static"), "static");
  EXPECT_EQ(canonical_value_string("precision", " tf32 "), "tf32");
  EXPECT_THROW(canonical_value_string("precision", "fp33"), std::invalid_argument);
  EXPECT_EQ(canonical_value_string("numerics_every", "+0"), "0");
  EXPECT_EQ(canonical_value_string("inject_nonfinite", "[10, 3]"), "[3,10]");
  EXPECT_THROW(canonical_value_string("optimizer.lr", "fast"), std::invalid_argument);
  EXPECT_THROW(canonical_value_string("nope", "1"), std::invalid_argument);

  CellConfig config;
  EXPECT_EQ(config_value_string(config, "optimizer.lr"), "0.001");
  EXPECT_EQ(config_value_string(config, "seed"), "1");
  EXPECT_EQ(config_value_string(config, "loss_scale"), "none");
  config.loss_scale.mode = LossScaleMode::Dynamic;
  config.loss_scale.hysteresis = 2;
  EXPECT_EQ(config_value_string(config, "loss_scale"), "dynamic{hysteresis:2}");
  EXPECT_THROW(config_value_string(config, "name"), std::invalid_argument);
}

TEST(Canonical, Slug) {
  EXPECT_EQ(cell_slug("precision=fp32,fusion=off,model.width=512"),
            "precision=fp32__fusion=off__model.width=512");
  EXPECT_EQ(cell_slug("base"), "base");
  EXPECT_EQ(cell_slug("loss_scale=static{value:1024}"), "loss_scale=static_value_1024_-857934b4");
  EXPECT_EQ(cell_slug("a=b/c d"), "a=b_c_d-62aacd79");  // test_slug.cpp: why the hash
  EXPECT_EQ(cell_slug("optimizer.lr=1e-8"), "optimizer.lr=1e-8");
}

// ---- JSON and hash -----------------------------------------------------------------

TEST(ConfigJson, MirrorsTheYaml) {
  CellConfig config;
  config.seed = 42;
  config.model.width = 64;
  config.optimizer.lr = 0.5;
  const nlohmann::json j = cell_config_to_json(config);
  EXPECT_EQ(j["seed"], 42u);
  EXPECT_EQ(j["steps"], 60);
  EXPECT_EQ(j["precision"], "fp32");
  EXPECT_EQ(j["fusion"], "off");
  EXPECT_EQ(j["numerics_every"], 10);
  EXPECT_EQ(j["inject_nonfinite"], nlohmann::json::array());
  EXPECT_EQ(j["checkpointing"], "off");
  EXPECT_EQ(j["model"]["width"], 64);
  EXPECT_EQ(j["model"]["activation"], "gelu");
  EXPECT_EQ(j["data"]["classes"], 16);
  EXPECT_DOUBLE_EQ(j["optimizer"]["lr"].get<double>(), 0.5);
  EXPECT_TRUE(j["optimizer"]["lr"].is_number_float());
  EXPECT_TRUE(j["model"]["width"].is_number_integer());
  // loss_scale is always the full map, even when mode is none.
  const nlohmann::json& ls = j["loss_scale"];
  ASSERT_TRUE(ls.is_object());
  EXPECT_EQ(ls["mode"], "none");
  for (const char* key : {"value", "init", "growth_factor", "backoff_factor", "growth_interval",
                          "min", "max", "hysteresis"}) {
    EXPECT_TRUE(ls.contains(key)) << key;
  }
}

TEST(ConfigJson, HasEveryKeyOfTheSchema) {
  const CellConfig
      defaults;  // a named object: GCC 12 -O2 warns falsely on a CellConfig{} temporary
  const nlohmann::json j = cell_config_to_json(defaults);
  EXPECT_EQ(j.size(), 18u);  // 14 scalar keys + model, data, optimizer, loss_scale
  EXPECT_EQ(j["model"].size(), 15u);  // kind + 4 MLP keys + 10 BERT keys
  EXPECT_EQ(j["data"].size(), 7u);
  EXPECT_EQ(j["optimizer"].size(), 10u);  // decay_exclude is left out while it excludes nothing
  EXPECT_EQ(j["loss_scale"].size(), 9u);
}

TEST(ConfigHash, Fnv1a64OfTheDump) {
  // Expected values from an independent FNV-1a 64 over the dump() text.
  EXPECT_EQ(config_hash(nlohmann::json::object()), "08f44b07b5901a25");  // "{}"
  EXPECT_EQ(config_hash(nlohmann::json{{"a", 1}}), "9c3e82dd6fcae8b1");  // {"a":1}
  EXPECT_EQ(config_hash(nlohmann::json("a")), "d4272417d7c77eea");       // "\"a\""
  // Key order as built does not matter: objects dump sorted.
  nlohmann::json j;
  j["b"] = {1, 2.5, "x"};
  j["a"] = nullptr;
  EXPECT_EQ(config_hash(j), "99e7b20a8ea72c23");  // {"a":null,"b":[1,2.5,"x"]}
}

TEST(ConfigHash, OfCellConfigs) {
  const CellConfig defaults;
  const std::string h = config_hash(cell_config_to_json(defaults));
  EXPECT_EQ(h.size(), 16u);
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(h, config_hash(cell_config_to_json(defaults)));
  CellConfig other;
  other.optimizer.lr = 0.002;
  EXPECT_NE(h, config_hash(cell_config_to_json(other)));
}

}  // namespace
}  // namespace mpb
