// runner merge's checks and its merged manifest (runner/commands/merge.h), on shard
// directories written here by hand: what it refuses and says, what the
// merged manifest keeps of each shard, and how machines are counted. A merge
// of real runs against an unsharded run: tests/e2e/test_shard_merge.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/experiment/config.h"
#include "runner/commands/merge.h"
#include "tests/runner/fixture_tree.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mpb {
namespace {

const std::vector<std::string> kMatrix = {"x=1", "x=2", "x=3", "x=4"};  // x=1: the baseline

// Shard `i` of 2: shard 0 owns x=1 and x=3, shard 1 owns x=2 and x=4 and ran a baseline copy.
json shard_manifest(int i) {
  json hashes = json::object();
  for (const auto& id : kMatrix) hashes[id] = "hash-" + id;
  const std::vector<std::string> owned = i == 0 ? std::vector<std::string>{"x=1", "x=3"}
                                                : std::vector<std::string>{"x=2", "x=4"};
  return {{"schema", "mpbench.manifest/1"},
          {"experiment", "e"},
          {"config_hash", "cfg"},
          {"git_commit", "abc"},
          {"mpbench_version", "0.1.0"},
          {"started", i == 0 ? "2026-11-24T00:00:05Z" : "2026-11-24T00:00:01Z"},
          {"finished", i == 0 ? "2026-11-24T00:10:00Z" : "2026-11-24T00:20:00Z"},
          {"machine", {{"hostname", "node" + std::to_string(i)}, {"cpu_model", "EPYC"}, {"cores", 2}}},
          {"device", {{"kind", "cuda"}, {"name", "A100"}, {"gpu", {{"name", "A100"}}},
                      {"ceiling_gflops", {{"fp32", 100.0 + i}}}}},
          {"cells", kMatrix},
          {"cell_config_hashes", hashes},
          {"order", {{"mode", "interleaved"}, {"seed", 7},
                     {"rounds", json::array({i == 0 ? json::array({"x=1", "x=3"})
                                                   : json::array({"x=1", "x=2", "x=4"})})}}},
          {"noise", {{"busy", i == 1}, {"rounds", json::array({{{"round", 0}, {"busy", i == 1}}})},
                     {"warnings", i == 1 ? json{"machine busy during round 1"} : json::array()}}},
          {"shard", {{"index", i}, {"count", 2}, {"cells", owned},
                     {"baseline_copy", i == 1 ? json("x=1") : json(nullptr)}, {"filter", ""}}}};
}

class Merge : public ::testing::Test {
 protected:
  test::FixtureTree tree_;
  std::vector<fs::path> dirs_;

  void SetUp() override {
    for (int i = 0; i < 2; ++i) write_shard(i, shard_manifest(i));
  }
  void write_shard(int i, const json& manifest) {
    const std::string dir = "e.shard-" + std::to_string(i) + "-of-2";
    tree_.write(dir + "/manifest.json", manifest.dump(2));
    std::vector<std::string> files;
    if (manifest.contains("shard")) {
      files = manifest.at("shard").at("cells").get<std::vector<std::string>>();
      if (!manifest.at("shard").at("baseline_copy").is_null()) files.push_back("x=1");
    }
    for (const auto& id : files)
      tree_.write(dir + "/cells/" + cell_slug(id) + ".json",
                  json{{"cell_id", id}, {"config_hash", "hash-" + id}, {"shard", i}}.dump());
    if (dirs_.size() <= size_t(i)) dirs_.resize(size_t(i) + 1);
    dirs_[size_t(i)] = tree_.path(dir);
  }
  json manifest(int i) const { return json::parse(read(dirs_[size_t(i)] / "manifest.json")); }
  static std::string read(const fs::path& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  // The MergeError merge_shards throws for `dirs`; fails the test if there is none.
  std::string refusal(const std::vector<fs::path>& dirs, const MergeOptions& opt = {}) {
    try {
      merge_shards(dirs, opt);
    } catch (const MergeError& e) {
      return e.what();
    }
    ADD_FAILURE() << "the merge was not refused";
    return "";
  }
};

TEST_F(Merge, EveryCellFromItsOwnerAndEachShardKept) {
  const MergedSet set = merge_shards({dirs_[1], dirs_[0]}, {});  // any order
  ASSERT_EQ(set.cells.size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(set.cells[k]["cell_id"], kMatrix[k]);  // matrix order
    EXPECT_EQ(set.cells[k]["shard"], k % 2 == 0 ? 0 : 1) << kMatrix[k];  // the baseline: shard 0's, not the copy
  }
  const json& m = set.manifest;
  EXPECT_FALSE(m.contains("shard"));
  EXPECT_EQ(m["cells"], kMatrix);
  EXPECT_EQ(m["started"], "2026-11-24T00:00:01Z");
  EXPECT_EQ(m["finished"], "2026-11-24T00:20:00Z");
  EXPECT_EQ(m["machine"]["hostname"], "node0, node1");  // every host
  EXPECT_EQ(m["machine"]["cpu_model"], "EPYC");          // what they agree on
  EXPECT_EQ(m["device"]["name"], "A100");
  EXPECT_DOUBLE_EQ(m["device"]["ceiling_gflops"]["fp32"].get<double>(), 101.0);  // the best measured
  EXPECT_EQ(m["order"]["rounds"], json::array({json::array({"x=1", "x=3", "x=2", "x=4"})}));  // no baseline copy
  EXPECT_TRUE(m["noise"]["busy"].get<bool>());
  EXPECT_EQ(m["noise"]["warnings"][0], "shard 1 (node1): machine busy during round 1");
  EXPECT_EQ(m["noise"]["rounds"][1]["shard"], 1);
  ASSERT_EQ(m["shards"].size(), 2u);
  EXPECT_EQ(m["shards"][1]["machine"]["hostname"], "node1");
  EXPECT_EQ(m["shards"][1]["baseline_copy"], "x=1");
  EXPECT_FALSE(m["merged"]["mixed_machines"].get<bool>());
  EXPECT_EQ(m["merged"]["shards"], 2);
  ASSERT_EQ(set.notes.size(), 1u);
  EXPECT_NE(set.notes[0].find("copy of the baseline x=1"), std::string::npos) << set.notes[0];
}

TEST_F(Merge, DifferentMachinesAreSaidSo) {
  json m = manifest(1);
  m["device"]["name"] = "H100";
  m["device"]["gpu"]["name"] = "H100";
  write_shard(1, m);
  const json merged = merge_shards(dirs_, {}).manifest;
  EXPECT_TRUE(merged["merged"]["mixed_machines"].get<bool>());
  EXPECT_EQ(merged["device"]["name"], "mixed: A100 (shard 0); H100 (shard 1)");
  EXPECT_EQ(merged["device"]["kind"], "cuda");
  EXPECT_TRUE(merged["device"]["gpu"].is_null());
  EXPECT_EQ(merged["merged"]["machines"].size(), 2u);
}

TEST_F(Merge, RefusesAMissingOrDoubledShard) {
  EXPECT_NE(refusal({dirs_[0]}).find("shard(s) 1/2 not given"), std::string::npos);
  EXPECT_NE(refusal({dirs_[0], dirs_[1], dirs_[1]}).find("shard 1/2 is given twice"), std::string::npos);
}

TEST_F(Merge, RefusesOtherConfigOrCommitUnlessAllowMixed) {
  for (const char* key : {"config_hash", "git_commit", "mpbench_version"}) {
    json m = shard_manifest(1);
    m[key] = "other";
    write_shard(1, m);
    const std::string why = refusal(dirs_);
    EXPECT_NE(why.find(std::string(key) + ": shard 0/2"), std::string::npos) << why;
    EXPECT_NE(why.find("--allow-mixed"), std::string::npos) << why;
    MergeOptions allow;
    allow.allow_mixed = true;
    const json merged = merge_shards(dirs_, allow).manifest;
    ASSERT_EQ(merged["merged"]["mixed"].size(), 1u) << key;
    EXPECT_TRUE(merged[key].is_null()) << key;  // no one value stands for both
    write_shard(1, shard_manifest(1));
  }
}

TEST_F(Merge, RefusesAnotherExperimentOrSplitEvenWithAllowMixed) {
  MergeOptions allow;
  allow.allow_mixed = true;
  json m = shard_manifest(1);
  m["experiment"] = "other";
  write_shard(1, m);
  EXPECT_NE(refusal(dirs_, allow).find("one merge is one experiment"), std::string::npos);
  m = shard_manifest(1);
  m["shard"]["count"] = 3;
  write_shard(1, m);
  EXPECT_NE(refusal(dirs_, allow).find("shares of different splits overlap"), std::string::npos);
}

TEST_F(Merge, RefusesAMissingDoubledOrForeignCell) {
  fs::remove(dirs_[1] / "cells" / (cell_slug("x=4") + ".json"));
  std::string why = refusal(dirs_);
  EXPECT_NE(why.find("'x=4' has no result in shard 1/2"), std::string::npos) << why;
  EXPECT_NE(why.find("--resume"), std::string::npos) << why;

  json m = shard_manifest(1);
  m["shard"]["cells"] = {"x=2", "x=3", "x=4"};
  write_shard(1, m);
  why = refusal(dirs_);
  EXPECT_NE(why.find("cell 'x=3' is in the shares of both shard 0/2"), std::string::npos) << why;

  m = shard_manifest(1);
  m["shard"]["cells"] = {"x=2"};
  write_shard(1, m);
  why = refusal(dirs_);
  EXPECT_NE(why.find("'x=4' is in no shard's share"), std::string::npos) << why;

  write_shard(1, shard_manifest(1));
  tree_.write("e.shard-1-of-2/cells/" + cell_slug("x=2") + ".json",
              json{{"cell_id", "x=2"}, {"config_hash", "edited"}}.dump());
  why = refusal(dirs_);
  EXPECT_NE(why.find("not the result of cell 'x=2' with config_hash hash-x=2"), std::string::npos) << why;
}

TEST_F(Merge, RefusesWhatIsNoFinishedShard) {
  json m = shard_manifest(1);
  m["finished"] = nullptr;
  write_shard(1, m);
  EXPECT_NE(refusal(dirs_).find("did not finish"), std::string::npos);
  m = shard_manifest(1);
  m.erase("shard");
  write_shard(1, m);
  EXPECT_NE(refusal(dirs_).find("no \"shard\""), std::string::npos);
  m = shard_manifest(1);
  m["order"]["rounds"] = {{"x", 1}};  // an object where rounds are a list of lists
  write_shard(1, m);
  EXPECT_NE(refusal(dirs_).find("unexpected shape"), std::string::npos);
  tree_.write("e.shard-1-of-2/manifest.json", "{ not json");
  EXPECT_NE(refusal(dirs_).find("not valid JSON"), std::string::npos);
  EXPECT_NE(refusal({dirs_[0], tree_.path("nowhere")}).find("no such directory"), std::string::npos);
}

TEST_F(Merge, NeverWritesOverAnExistingSet) {
  const MergedSet set = merge_shards(dirs_, {});
  tree_.write("out/e/manifest.json", "{\"mine\": true}");
  try {
    write_merged_set(tree_.path("out"), set);
    FAIL() << "expected a MergeError";
  } catch (const MergeError& e) {
    EXPECT_NE(std::string(e.what()).find("exists and is not empty"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read(tree_.path("out/e/manifest.json")), "{\"mine\": true}");
}

// Issue 33 defect 3: shards launched separately each have their own run id; a
// cell copied in from another run (an unsharded one) or another experiment has
// the right config_hash but is refused, naming the file and what differs.
TEST_F(Merge, RefusesACellOfAnotherRunOrExperimentEvenWithAllowMixed) {
  auto with_run_ids = [&](int i, const json& cell_edit) {
    json m = shard_manifest(i);
    m["run_id"] = "run-of-shard-" + std::to_string(i);
    write_shard(i, m);
    for (const auto& entry : fs::directory_iterator(dirs_[size_t(i)] / "cells")) {
      json c = json::parse(read(entry.path()));
      c["experiment"] = "e";
      c["run_id"] = m["run_id"];
      if (c["cell_id"] == "x=4") c.update(cell_edit);
      tree_.write(fs::relative(entry.path(), tree_.path("")).string(), c.dump());
    }
  };
  with_run_ids(0, json::object());
  with_run_ids(1, json::object());
  const json merged = merge_shards(dirs_, {}).manifest;
  EXPECT_EQ(merged["shards"][0]["run_id"], "run-of-shard-0");
  EXPECT_EQ(merged["shards"][1]["run_id"], "run-of-shard-1");
  EXPECT_NE(merged["run_id"], "run-of-shard-0");  // the merged set's own
  EXPECT_FALSE(merged["run_id"].get<std::string>().empty());

  MergeOptions allow;
  allow.allow_mixed = true;
  const std::string path = (dirs_[1] / "cells" / (cell_slug("x=4") + ".json")).string();
  with_run_ids(1, json{{"run_id", "unsharded-run"}});
  for (const MergeOptions& opt : {MergeOptions{}, allow}) {
    const std::string why = refusal(dirs_, opt);
    EXPECT_NE(why.find(path + ": not a result of shard 1/2"), std::string::npos) << why;
    EXPECT_NE(why.find("run_id 'unsharded-run', this run's is 'run-of-shard-1'"), std::string::npos) << why;
  }
  with_run_ids(1, json{{"experiment", "tinyb"}, {"run_id", "run-of-shard-1"}});
  std::string why = refusal(dirs_, allow);
  EXPECT_NE(why.find(path + ": not a result of shard 1/2"), std::string::npos) << why;
  EXPECT_NE(why.find("experiment 'tinyb', this run's is 'e'"), std::string::npos) << why;
  with_run_ids(1, json::object());
  json no_id = json::parse(read(path));
  no_id.erase("run_id");
  tree_.write(fs::relative(path, tree_.path("")).string(), no_id.dump());
  why = refusal(dirs_, allow);
  EXPECT_NE(why.find("no run_id, this run's is 'run-of-shard-1'"), std::string::npos) << why;
}

}  // namespace
}  // namespace mpb
