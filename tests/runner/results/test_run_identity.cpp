// Which run a result file belongs to (runner/results/run_identity.h): the run id's
// form, the reasons a file is a stranger (what differs, both values), and the
// directory scan --resume refuses strangers by. The runner's use of it (resume,
// a fresh --filter run, the hung-cell record): tests/e2e/test_run_identity.py.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "runner/results/run_identity.h"
#include "tests/runner/fixture_tree.h"

using nlohmann::json;

namespace mpb {
namespace {

TEST(RunIdentity, NewIdsAreTimeAndRandomBitsAndDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string id = new_run_id();
    EXPECT_TRUE(std::regex_match(id, std::regex("[0-9]{8}T[0-9]{6}Z-[0-9a-f]{16}"))) << id;
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 100u);  // the same second, still 100 runs
}

TEST(RunIdentity, RecordedIdIsAStringOrNothing) {
  EXPECT_EQ(recorded_run_id(json{{"run_id", "r1"}}), "r1");
  EXPECT_EQ(recorded_run_id(json{{"experiment", "e"}}), "");
  EXPECT_EQ(recorded_run_id(json{{"run_id", 7}}), "");
  EXPECT_EQ(recorded_run_id(json::array()), "");
}

TEST(RunIdentity, AStrangerIsNamedByWhatDiffers) {
  const RunMembership run{"tiny", {"r1"}, false};
  EXPECT_EQ(stranger_reason(json{{"experiment", "tiny"}, {"run_id", "r1"}}, run), "");
  EXPECT_EQ(stranger_reason(json{{"experiment", "tinyb"}, {"run_id", "r1"}}, run),
            "experiment 'tinyb', this run's is 'tiny'");
  EXPECT_EQ(stranger_reason(json{{"experiment", "tiny"}, {"run_id", "r0"}}, run), "run_id 'r0', this run's is 'r1'");
  EXPECT_EQ(stranger_reason(json{{"experiment", "tiny"}}, run), "no run_id, this run's is 'r1'");
  EXPECT_EQ(stranger_reason(json{{"experiment", 3}, {"run_id", "r1"}}, run), "experiment 3, this run's is 'tiny'");
  EXPECT_EQ(stranger_reason(json{{"run_id", 5}}, run), "run_id 5, this run's is 'r1'");
  EXPECT_EQ(stranger_reason(json::array(), run), "not a JSON object");
  // A merged set accepts each shard's id; a set from before run ids, files without one.
  const RunMembership merged{"tiny", {"s0", "s1"}, false};
  EXPECT_EQ(stranger_reason(json{{"run_id", "s1"}}, merged), "");
  EXPECT_EQ(stranger_reason(json{{"run_id", "x"}}, merged), "run_id 'x', this run's is one of 's0', 's1'");
  const RunMembership legacy{"tiny", {}, true};
  EXPECT_EQ(stranger_reason(json{{"experiment", "tiny"}}, legacy), "");
  EXPECT_EQ(stranger_reason(json{{"run_id", "r1"}}, legacy),
            "run_id 'r1', this run's is none (a set from before run ids)");
}

TEST(RunIdentity, StrangerFilesScansCellsPartialAndFailed) {
  test::FixtureTree tree;
  tree.write("d/cells/a.json", json{{"experiment", "e"}, {"run_id", "r1"}}.dump());
  tree.write("d/cells/b.json", json{{"experiment", "other"}, {"run_id", "r1"}}.dump());
  tree.write("d/partial/c.json", json{{"experiment", "e"}, {"run_id", "r0"}}.dump());
  tree.write("d/failed/d.json", json{{"run_id", "r1"}}.dump());
  tree.write("d/cells/e.json", "{ cut sho");       // stale/'s business, not a stranger
  tree.write("d/cells/notes.txt", "not a result");
  const auto found = stranger_files(tree.path("d"), RunMembership{"e", {"r1"}, false});
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0], tree.path("d/cells/b.json") + ": experiment 'other', this run's is 'e'");
  EXPECT_EQ(found[1], tree.path("d/partial/c.json") + ": run_id 'r0', this run's is 'r1'");
  EXPECT_TRUE(stranger_files(tree.path("nowhere"), RunMembership{"e", {"r1"}, false}).empty());
}

}  // namespace
}  // namespace mpb
