// --shard i/N (runner/experiment/shard.h): every cell in exactly one share, the baseline
// owned by shard 0 and copied where speed-ups need it, the same answer every
// time, balanced by weight, no empty share, and clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "runner/experiment/config.h"
#include "runner/experiment/shard.h"
#include "tests/runner/config_test_helpers.h"

namespace mpb {
namespace {

using config_test::all_cells;

ExperimentConfig load_file(const std::string& name) {
  return load_experiment(std::string(MPB_SOURCE_DIR) + "/experiments/" + name);
}

TEST(Shard, ParsesIndexSlashCountAndNamesWhatIsWrong) {
  std::string error;
  const auto s = parse_shard("2/5", &error);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(s->index, 2);
  EXPECT_EQ(s->count, 5);
  for (const std::string bad : {"5/5", "1/0", "-1/3", "a/3", "1", "", "1/3/4", " 1/3", "1/", "/3", "9999999/3"}) {
    error.clear();
    EXPECT_FALSE(parse_shard(bad, &error)) << bad;
    EXPECT_NE(error.find("--shard '" + bad + "'"), std::string::npos) << error;
  }
  parse_shard("3/3", &error);
  EXPECT_NE(error.find("0/3 to 2/3"), std::string::npos) << error;
  // No shards at all is its own mistake, not an index out of 0/1 to 0/1 (issue 33).
  for (const std::string none : {"0/0", "1/0"}) {
    error.clear();
    EXPECT_FALSE(parse_shard(none, &error));
    EXPECT_NE(error.find("must be >= 1"), std::string::npos) << error;
    EXPECT_EQ(error.find("0/1"), std::string::npos) << error;
  }
}

// For every N up to the number of cells: the union of the shares is the
// matrix, no cell is in two, shard 0 owns the baseline, and a shard runs a
// baseline copy exactly when it owns a cell of the baseline's model.
void check_partitions(const ExperimentConfig& exp) {
  const auto cells = all_cells(exp);
  const Cell* baseline = nullptr;
  for (const Cell* c : cells)
    if (c->is_baseline) baseline = c;
  ASSERT_NE(baseline, nullptr);
  for (int n = 1; n <= int(cells.size()); ++n) {
    std::map<std::string, int> owners;
    for (int i = 0; i < n; ++i) {
      const ShardShare share = shard_share(cells, {i, n});
      EXPECT_FALSE(share.owned.empty()) << i << "/" << n;
      bool same_model = false;
      for (const Cell* c : share.owned) {
        ++owners[c->id];
        same_model = same_model || (c != baseline && c->config.model.kind == baseline->config.model.kind);
      }
      const bool owns_baseline = std::count(share.owned.begin(), share.owned.end(), baseline) == 1;
      EXPECT_EQ(owns_baseline, i == 0) << i << "/" << n;
      EXPECT_EQ(share.baseline_copy != nullptr, i != 0 && same_model) << i << "/" << n;
      const auto run = share.to_run();
      if (share.baseline_copy) {
        EXPECT_EQ(run.front(), baseline);  // run first, as without shards
      }
      EXPECT_EQ(run.size(), share.owned.size() + (share.baseline_copy ? 1 : 0));
    }
    EXPECT_EQ(owners.size(), cells.size()) << n << " shards";
    for (const auto& [id, k] : owners) EXPECT_EQ(k, 1) << id << " in " << k << " of " << n << " shards";
  }
}

TEST(Shard, EveryCellInExactlyOneShareAndTheBaselineWhereSpeedupsNeedIt) {
  check_partitions(load_file("quickstart.yaml"));  // an MLP matrix and one BERT cell
  check_partitions(load_file("3090_bert.yaml"));   // 43 BERT cells
}

TEST(Shard, TheSameAnswerEveryTimeAndFromAFreshLoad) {
  const ExperimentConfig a = load_file("3090_bert.yaml"), b = load_file("3090_bert.yaml");
  for (int i = 0; i < 7; ++i) {
    const ShardShare x = shard_share(all_cells(a), {i, 7}), y = shard_share(all_cells(b), {i, 7});
    ASSERT_EQ(x.owned.size(), y.owned.size());
    for (size_t k = 0; k < x.owned.size(); ++k) EXPECT_EQ(x.owned[k]->id, y.owned[k]->id);
    EXPECT_EQ(shard_json(x, "").dump(), shard_json(y, "").dump());
  }
}

// Greedy by weight keeps every share within one cell's weight (plus the
// baseline copy) of the mean, and far better than cutting by count would.
TEST(Shard, BalancedByWeight) {
  const ExperimentConfig exp = load_file("3090_bert.yaml");
  const auto cells = all_cells(exp);
  double heaviest = 0, base = 0;
  for (const Cell* c : cells) {
    heaviest = std::max(heaviest, shard_weight(c->config));
    if (c->is_baseline) base = shard_weight(c->config);
  }
  for (int n : {2, 3, 5, 8}) {
    const ShardAssignment a = assign_shards(cells, n);
    const double total = std::accumulate(a.weight.begin(), a.weight.end(), 0.0);
    const double most = *std::max_element(a.weight.begin(), a.weight.end());
    EXPECT_LE(most, total / n + heaviest + base) << n << " shards";
    // the weights add up: every cell once, each copy of the baseline once more
    double expected = 0;
    for (const Cell* c : cells) expected += shard_weight(c->config);
    expected += base * double(std::count(a.needs_baseline.begin(), a.needs_baseline.end(), true) - 1);
    EXPECT_NEAR(total, expected, 1e-9 * expected);
  }
}

TEST(Shard, WeightIsFlopsTimesStepsTimesRepeats) {
  const ExperimentConfig exp = load_file("quickstart.yaml");
  CellConfig c = exp.cells.at(0).config;
  const double w = shard_weight(c);
  c.steps *= 2;
  EXPECT_DOUBLE_EQ(shard_weight(c), 2 * w);
  c.repeats *= 3;
  EXPECT_DOUBLE_EQ(shard_weight(c), 6 * w);
}

TEST(Shard, MoreShardsThanCellsIsAnErrorSayingHowMany) {
  const ExperimentConfig exp = load_file("quickstart.yaml");
  const auto cells = all_cells(exp);
  try {
    shard_share(cells, {0, int(cells.size()) + 1});
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("use at most " + std::to_string(cells.size()) + " shards"),
              std::string::npos)
        << e.what();
  }
}

TEST(Shard, ManifestRecordAndDirectoryName) {
  const ExperimentConfig exp = load_file("quickstart.yaml");
  const ShardShare share = shard_share(all_cells(exp), {1, 3});
  const nlohmann::json j = shard_json(share, "fusion=on");
  EXPECT_EQ(j["index"], 1);
  EXPECT_EQ(j["count"], 3);
  EXPECT_EQ(j["cells"].size(), share.owned.size());
  EXPECT_EQ(j["filter"], "fusion=on");
  EXPECT_GT(j["weight"].get<double>(), 0.0);
  EXPECT_LT(j["weight"].get<double>(), j["total_weight"].get<double>());
  EXPECT_EQ(shard_dir_name("quickstart", {1, 3}), "quickstart.shard-1-of-3");
}

}  // namespace
}  // namespace mpb
