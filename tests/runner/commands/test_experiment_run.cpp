// ExperimentRun's phases alone (runner/commands/experiment_run.h), each run
// up to the phase under test on an experiment loaded from text and a results
// directory written here by hand; no device is opened. Whole runs:
// tests/e2e (kill/resume, shard/merge, max-minutes, run identity).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/schema.h"
#include "runner/commands/experiment_run.h"
#include "runner/experiment/config.h"
#include "runner/io/atomic_file.h"
#include "tests/runner/config_test_helpers.h"
#include "tests/runner/fixture_tree.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mpb {
namespace {

// Three cells, the baseline (width 64) last in matrix order, two repeats each.
ExperimentConfig three_cells() {
  return config_test::load(R"(name: e
repeats: 2
matrix:
  model.width: [16, 32, 64]
baseline: {model.width: 64}
)");
}

std::vector<std::string> ids(const std::vector<const Cell*>& cells) {
  std::vector<std::string> out;
  for (const Cell* c : cells) out.push_back(c->id);
  return out;
}

const Cell& cell_of(const ExperimentConfig& exp, const std::string& id) {
  for (const Cell& c : exp.cells)
    if (c.id == id) return c;
  throw std::logic_error("no cell " + id);
}

// What a finished cell, a partial sidecar or a failed record says about itself.
json own_file(const Cell& c, const std::string& run_id, json extra = json::object()) {
  extra["cell_id"] = c.id;
  extra["config_hash"] = config_hash(cell_config_to_json(c.config));
  extra["experiment"] = "e";
  extra["run_id"] = run_id;
  return extra;
}

void write_json(const fs::path& p, const json& j) {
  fs::create_directories(p.parent_path());
  write_file_atomic(p.string(), j.dump(1) + "\n");
}

// ---- select_cells: --filter and the baseline first ------------------------------------

TEST(ExperimentRunSelectCells, BaselineFirstThenMatrixOrder) {
  const ExperimentConfig exp = three_cells();
  RunOptions opt;
  ExperimentRun run(exp, opt);
  EXPECT_EQ(run.select_cells(), std::nullopt);
  EXPECT_EQ(ids(run.cells()), (std::vector<std::string>{"model.width=64", "model.width=16", "model.width=32"}));
}

TEST(ExperimentRunSelectCells, FilterKeepsMatchingCellsOnly) {
  const ExperimentConfig exp = three_cells();
  RunOptions opt;
  opt.filter = "model.width=32";
  ExperimentRun run(exp, opt);
  EXPECT_EQ(run.select_cells(), std::nullopt);
  EXPECT_EQ(ids(run.cells()), (std::vector<std::string>{"model.width=32"}));
}

TEST(ExperimentRunSelectCells, FilterMatchingNothingOrMalformedIsBadInput) {
  const ExperimentConfig exp = three_cells();
  for (const std::string filter : {"model.width=48", "model.width=wide"}) {
    RunOptions opt;
    opt.filter = filter;
    ExperimentRun run(exp, opt);
    testing::internal::CaptureStderr();
    EXPECT_EQ(run.select_cells(), std::optional<int>(kExitBadInput)) << filter;
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find(filter), std::string::npos) << err;  // the message names what was asked
  }
}

// ---- take_shard: the share, the directory and the plan's seed ----------------------------

TEST(ExperimentRunTakeShard, ShardDirectoryAndSeedFromTheWholeExperiment) {
  const ExperimentConfig exp = three_cells();
  RunOptions whole;
  whole.out_dir = "out";
  ExperimentRun unsharded(exp, whole);
  ASSERT_EQ(unsharded.select_cells(), std::nullopt);
  ASSERT_EQ(unsharded.take_shard(), std::nullopt);
  EXPECT_EQ(unsharded.dir(), fs::path("out") / "e");
  EXPECT_EQ(unsharded.plan().units(), 6u);  // 3 cells x 2 repeats

  RunOptions sharded = whole;
  sharded.shard = ShardSpec{1, 2};
  ExperimentRun shard(exp, sharded);
  ASSERT_EQ(shard.select_cells(), std::nullopt);
  ASSERT_EQ(shard.take_shard(), std::nullopt);
  EXPECT_EQ(shard.dir(), fs::path("out") / shard_dir_name("e", *sharded.shard));
  EXPECT_LT(shard.cells().size(), 3u + 1u);
  // The order seed is the whole experiment's, whichever share runs.
  EXPECT_EQ(shard.order_seed(), unsharded.order_seed());
}

// ---- prepare_result_dir: the run id kept or new, foreign files refused ------------------

class ExperimentRunResultDir : public ::testing::Test {
 protected:
  test::FixtureTree tree_;
  ExperimentConfig exp_ = three_cells();
  RunOptions opt_;

  void SetUp() override { opt_.out_dir = tree_.root(); }
  fs::path dir() const { return fs::path(tree_.root()) / "e"; }
  void write_manifest(const std::string& run_id) const {
    write_json(dir() / "manifest.json", {{"experiment", "e"}, {"run_id", run_id}});
  }
};

TEST_F(ExperimentRunResultDir, ResumeKeepsTheEarlierRunIdWhileItsResultsStay) {
  opt_.resume = true;
  const Cell& done = cell_of(exp_, "model.width=16");
  write_manifest("run-1");
  write_json(dir() / "cells" / (done.slug + ".json"), own_file(done, "run-1"));
  ExperimentRun run(exp_, opt_);
  ASSERT_EQ(run.select_cells(), std::nullopt);
  ASSERT_EQ(run.take_shard(), std::nullopt);
  EXPECT_EQ(run.prepare_result_dir(), std::nullopt);
  EXPECT_EQ(run.run_id(), "run-1");
}

TEST_F(ExperimentRunResultDir, AFreshRunInAnEmptyDirectoryGetsANewId) {
  write_manifest("run-1");  // a manifest alone: no results stay beside this run's
  ExperimentRun run(exp_, opt_);
  ASSERT_EQ(run.select_cells(), std::nullopt);
  ASSERT_EQ(run.take_shard(), std::nullopt);
  EXPECT_EQ(run.prepare_result_dir(), std::nullopt);
  EXPECT_FALSE(run.run_id().empty());
  EXPECT_NE(run.run_id(), "run-1");
}

TEST_F(ExperimentRunResultDir, AnotherRunsCellIsRefusedAndKept) {
  opt_.resume = true;
  const Cell& mine = cell_of(exp_, "model.width=16");
  const Cell& theirs = cell_of(exp_, "model.width=32");
  write_manifest("run-1");
  write_json(dir() / "cells" / (mine.slug + ".json"), own_file(mine, "run-1"));
  const fs::path stranger = dir() / "cells" / (theirs.slug + ".json");
  write_json(stranger, own_file(theirs, "run-2"));
  ExperimentRun run(exp_, opt_);
  ASSERT_EQ(run.select_cells(), std::nullopt);
  ASSERT_EQ(run.take_shard(), std::nullopt);
  testing::internal::CaptureStderr();
  EXPECT_EQ(run.prepare_result_dir(), std::optional<int>(kExitBadInput));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(stranger.string()), std::string::npos) << err;
  EXPECT_NE(err.find("run-2"), std::string::npos) << err;
  EXPECT_TRUE(fs::exists(stranger));  // nothing is lost
}

// ---- load_earlier_progress: what --resume keeps of each cell -------------------------------

TEST_F(ExperimentRunResultDir, ResumeSortsCellsIntoFinishedHungAndPartial) {
  opt_.resume = true;
  const Cell& finished = cell_of(exp_, "model.width=16");
  const Cell& hung = cell_of(exp_, "model.width=32");
  const Cell& partial = cell_of(exp_, "model.width=64");
  write_manifest("run-1");
  write_json(dir() / "cells" / (finished.slug + ".json"), own_file(finished, "run-1"));
  write_json(dir() / "failed" / (hung.slug + ".json"), own_file(hung, "run-1", {{"repeat", 0}}));
  // Repeat 5 is beyond the cell's 2 repeats (the file's repeats were cut since): dropped.
  write_json(dir() / "partial" / (partial.slug + ".json"),
             own_file(partial, "run-1", {{"repeats", json::array({{{"repeat", 1}}, {{"repeat", 5}}})}}));
  ExperimentRun run(exp_, opt_);
  ASSERT_EQ(run.select_cells(), std::nullopt);
  ASSERT_EQ(run.take_shard(), std::nullopt);
  ASSERT_EQ(run.prepare_result_dir(), std::nullopt);
  run.load_earlier_progress();
  const CellProgress& p = run.progress();
  EXPECT_EQ(p.finished, (std::set<const Cell*>{&finished}));
  EXPECT_EQ(p.hung, (std::set<const Cell*>{&hung}));
  ASSERT_EQ(p.partial.count(&partial), 1u);
  ASSERT_EQ(p.partial.at(&partial).size(), 1u);
  EXPECT_EQ(p.partial.at(&partial)[0].at("repeat"), 1);
}

TEST_F(ExperimentRunResultDir, ResumeIgnoresAFileOfAnEditedCell) {
  opt_.resume = true;
  const Cell& edited = cell_of(exp_, "model.width=16");
  write_manifest("run-1");
  json file = own_file(edited, "run-1");
  file["config_hash"] = "0000000000000000";  // the cell's config changed since
  write_json(dir() / "cells" / (edited.slug + ".json"), file);
  ExperimentRun run(exp_, opt_);
  ASSERT_EQ(run.select_cells(), std::nullopt);
  ASSERT_EQ(run.take_shard(), std::nullopt);
  testing::internal::CaptureStderr();  // the sweep says where the edited cell's file went
  ASSERT_EQ(run.prepare_result_dir(), std::nullopt);
  testing::internal::GetCapturedStderr();
  run.load_earlier_progress();
  EXPECT_TRUE(run.progress().finished.empty());
}

TEST_F(ExperimentRunResultDir, WithoutResumeNothingEarlierIsKept) {
  const Cell& finished = cell_of(exp_, "model.width=16");
  write_manifest("run-1");
  write_json(dir() / "cells" / (finished.slug + ".json"), own_file(finished, "run-1"));
  ExperimentRun run(exp_, opt_);
  ASSERT_EQ(run.select_cells(), std::nullopt);
  ASSERT_EQ(run.take_shard(), std::nullopt);
  testing::internal::CaptureStderr();  // the sweep moves the earlier file to stale/ and says so
  ASSERT_EQ(run.prepare_result_dir(), std::nullopt);
  testing::internal::GetCapturedStderr();
  run.load_earlier_progress();
  EXPECT_TRUE(run.progress().finished.empty());
  EXPECT_FALSE(fs::exists(dir() / "cells" / (finished.slug + ".json")));
}

}  // namespace
}  // namespace mpb
