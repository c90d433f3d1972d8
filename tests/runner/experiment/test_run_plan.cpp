// The run order: interleaved rounds cover every repeat once, in a seeded
// order that differs between rounds; sequential keeps cells together.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "runner/experiment/run_plan.h"

namespace mpb {
namespace {

std::vector<Cell> make_cells(const std::vector<int>& repeats) {
  std::vector<Cell> cells(repeats.size());
  for (size_t i = 0; i < cells.size(); ++i) {
    cells[i].id = "cell=" + std::to_string(i);
    cells[i].config.repeats = repeats[i];
  }
  return cells;
}

std::vector<const Cell*> pointers(const std::vector<Cell>& cells) {
  std::vector<const Cell*> p;
  for (const Cell& c : cells) p.push_back(&c);
  return p;
}

TEST(RunPlan, InterleavedRoundsRunEveryRepeatOnce) {
  const auto cells = make_cells({3, 3, 2, 1, 3, 3, 3, 3});
  const RunPlan plan = make_run_plan(pointers(cells), RunOrder::Interleaved, 7);
  ASSERT_EQ(plan.rounds.size(), 3u);
  EXPECT_EQ(plan.units(), 21u);
  std::map<const Cell*, std::vector<int>> seen;
  for (size_t r = 0; r < plan.rounds.size(); ++r)
    for (const RunUnit& u : plan.rounds[r]) {
      EXPECT_EQ(u.repeat, int(r)) << "round r runs repeat r";
      seen[u.cell].push_back(u.repeat);
    }
  for (const Cell& c : cells) EXPECT_EQ(int(seen[&c].size()), c.config.repeats) << c.id;
}

TEST(RunPlan, InterleavedOrderIsSeededAndDiffersBetweenRounds) {
  const auto cells = make_cells(std::vector<int>(10, 3));
  const RunPlan a = make_run_plan(pointers(cells), RunOrder::Interleaved, 42);
  const RunPlan b = make_run_plan(pointers(cells), RunOrder::Interleaved, 42);
  const RunPlan c = make_run_plan(pointers(cells), RunOrder::Interleaved, 43);
  EXPECT_EQ(run_plan_json(a), run_plan_json(b));
  EXPECT_NE(run_plan_json(a), run_plan_json(c));
  const auto j = run_plan_json(a);
  EXPECT_NE(j["rounds"][0], j["rounds"][1]);
  EXPECT_EQ(j["mode"], "interleaved");
  EXPECT_EQ(j["seed"], 42);
}

// A position effect (the second run of a pair is faster) must not bias a
// paired ratio: over each pair of rounds every cell runs before and after
// every other cell, so with an even number of rounds positions balance.
TEST(RunPlan, InterleavedOddRoundsReverseTheRoundBefore) {
  const auto cells = make_cells({4, 4, 3, 4, 1});
  const RunPlan plan = make_run_plan(pointers(cells), RunOrder::Interleaved, 5);
  ASSERT_EQ(plan.rounds.size(), 4u);
  for (size_t r = 1; r < plan.rounds.size(); r += 2) {
    std::vector<const Cell*> expected;
    for (auto u = plan.rounds[r - 1].rbegin(); u != plan.rounds[r - 1].rend(); ++u)
      if (int(r) < u->cell->config.repeats) expected.push_back(u->cell);
    std::vector<const Cell*> got;
    for (const RunUnit& u : plan.rounds[r]) got.push_back(u.cell);
    EXPECT_EQ(got, expected) << "round " << r;
  }
  // Cells with 4 repeats: the positions of cell 0 and cell 1 sum the same.
  int ran_before = 0;
  for (const auto& round : plan.rounds) {
    size_t p0 = 0, p1 = 0;
    for (size_t i = 0; i < round.size(); ++i) {
      if (round[i].cell == &cells[0]) p0 = i;
      if (round[i].cell == &cells[1]) p1 = i;
    }
    ran_before += p0 < p1;
  }
  EXPECT_EQ(ran_before, 2) << "cell 0 runs first in exactly half of the 4 rounds";
}

TEST(RunPlan, SequentialKeepsEachCellsRepeatsTogetherInMatrixOrder) {
  const auto cells = make_cells({2, 1, 3});
  const RunPlan plan = make_run_plan(pointers(cells), RunOrder::Sequential, 1);
  ASSERT_EQ(plan.rounds.size(), 3u);
  for (size_t i = 0; i < cells.size(); ++i) {
    ASSERT_EQ(int(plan.rounds[i].size()), cells[i].config.repeats);
    for (int r = 0; r < cells[i].config.repeats; ++r) {
      EXPECT_EQ(plan.rounds[i][size_t(r)].cell, &cells[i]);
      EXPECT_EQ(plan.rounds[i][size_t(r)].repeat, r);
    }
  }
}

TEST(RunPlan, ParsesOrderNames) {
  EXPECT_EQ(parse_run_order("interleaved"), RunOrder::Interleaved);
  EXPECT_EQ(parse_run_order("sequential"), RunOrder::Sequential);
  EXPECT_THROW(parse_run_order("random"), std::invalid_argument);
}

}  // namespace
}  // namespace mpb
