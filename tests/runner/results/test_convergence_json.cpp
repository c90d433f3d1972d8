// summary.convergence as the cell files carry it (runner/results/convergence_json.h),
// on constructed cell JSON: the time to target when some seeds never arrive
// (issue 40: censoring seen, no speed-up from the lucky few), and the family
// pass that Holm-adjusts the verdicts of the cells judged against one baseline.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/results/convergence_json.h"

namespace mpb {
namespace {

// One repeat: 50 steps of `step_ms` each, training loss 3.0 until its last
// step, eval points at steps 10..50 falling linearly from 3 to `final_loss`.
nlohmann::json repeat(uint64_t seed, double final_loss, double step_ms) {
  nlohmann::json eval = nlohmann::json::array();
  for (int k = 1; k <= 5; ++k) eval.push_back({{"step", 10 * k}, {"loss", 3.0 + (final_loss - 3.0) * k / 5.0}});
  std::vector<double> loss(50, 3.0);
  loss.back() = final_loss;
  return {{"seed", seed},
          {"eval", eval},
          {"step_time_ms", std::vector<double>(50, step_ms)},
          {"loss", loss},
          {"skipped", std::vector<int>(50, 0)}};
}

// A cell with one repeat per entry of `finals` (seeds 0, 1, ...).
nlohmann::json cell(const std::string& id, bool is_baseline, const std::vector<double>& finals, double step_ms) {
  nlohmann::json repeats = nlohmann::json::array();
  for (size_t i = 0; i < finals.size(); ++i) repeats.push_back(repeat(uint64_t(i), finals[i], step_ms));
  return {{"cell_id", id},
          {"is_baseline", is_baseline},
          {"config", {{"batch_size", 8}, {"model", {{"kind", "mlp"}}}, {"data", {{"kind", "synthetic"}}}}},
          {"repeats", repeats},
          {"summary", nlohmann::json::object()}};
}

const nlohmann::json& time_to_target_of(const nlohmann::json& c) {
  return c.at("summary").at("convergence").at("time_to_target");
}

// Every baseline seed reaches fp32's loss + delta; one of the cell's five does.
// Its one arrival is fast, but a cell that gets there on 1 seed of 5 is not
// faster training: no speed-up, and the note says why.
TEST(ConvergenceJson, NoSpeedUpWhenTheCellReachesTheTargetLessOften) {
  const nlohmann::json base = cell("base", true, {2.0, 2.0, 2.0, 2.0, 2.0}, 2.0);
  nlohmann::json c = cell("cell", false, {2.0, 2.5, 2.5, 2.5, 2.5}, 0.5);
  apply_convergence(c, &base);
  const nlohmann::json& t = time_to_target_of(c);
  EXPECT_EQ(t.at("reached"), 1);
  EXPECT_EQ(t.at("baseline_reached"), 5);
  EXPECT_TRUE(t.at("speedup").is_null()) << t.dump();
  EXPECT_EQ(t.at("speedup_note"), "1 of 5 seeds reached the target, the baseline's 5 of 5: no speed-up is claimed");
  EXPECT_TRUE(t.at("median_seconds").is_null());  // fewer than half arrived
}

// Four of five seeds arrive on each side: the speed-up is the ratio of the
// Kaplan-Meier medians (the censored seed counted), without an interval.
// Every arrival is at step 50: 0.1 s for the baseline (2 ms a step), 0.05 s
// for the cell (1 ms).
TEST(ConvergenceJson, CensoredSeedsGiveAKaplanMeierMedianSpeedUp) {
  const nlohmann::json base = cell("base", true, {2.0, 2.0, 2.0, 2.0, 2.5}, 2.0);
  nlohmann::json c = cell("cell", false, {2.0, 2.0, 2.0, 2.0, 2.5}, 1.0);
  apply_convergence(c, &base);
  const nlohmann::json& t = time_to_target_of(c);
  ASSERT_EQ(t.at("reached"), 4) << t.dump();
  ASSERT_EQ(t.at("baseline_reached"), 4);
  ASSERT_TRUE(t.at("speedup").is_object()) << t.dump();
  EXPECT_EQ(t.at("speedup").at("estimate"), "kaplan_meier_median");
  EXPECT_NEAR(t.at("speedup").at("speedup").get<double>(), 2.0, 1e-12);
  EXPECT_TRUE(t.at("speedup").at("lo").is_null());
  EXPECT_NEAR(t.at("median_seconds").get<double>(), 0.05, 1e-12);
  EXPECT_NEAR(t.at("baseline_median_seconds").get<double>(), 0.1, 1e-12);
}

// Every seed on both sides arrives: the paired estimate with its interval, as before.
TEST(ConvergenceJson, EverySeedArrivingGivesThePairedSpeedUp) {
  const nlohmann::json base = cell("base", true, {2.0, 2.0, 2.0}, 2.0);
  nlohmann::json c = cell("cell", false, {2.0, 2.0, 2.0}, 1.0);
  apply_convergence(c, &base);
  const nlohmann::json& s = time_to_target_of(c).at("speedup");
  EXPECT_EQ(s.at("estimate"), "paired");
  EXPECT_NEAR(s.at("speedup").get<double>(), 2.0, 1e-12);
}

// The family pass adjusts the judged cells together, leaves the baseline and
// cells without a verdict alone, and a family of one keeps its raw p values.
TEST(ConvergenceJson, TheFamilyPassHolmAdjustsTheJudgedCells) {
  nlohmann::json base = cell("base", true, {2.0, 2.01, 1.99, 2.005, 1.995}, 2.0);
  apply_convergence(base, nullptr);
  nlohmann::json a = cell("a", false, {2.01, 2.0, 1.99, 2.0, 1.999}, 2.0);
  nlohmann::json b = cell("b", false, {2.3, 2.31, 2.29, 2.305, 2.295}, 2.0);
  apply_convergence(a, &base);
  apply_convergence(b, &base);
  const double raw_a = a["summary"]["convergence"]["p_equivalence"].get<double>();
  const double raw_b = b["summary"]["convergence"]["p_equivalence"].get<double>();
  EXPECT_EQ(a["summary"]["convergence"]["family"]["size"], 1);
  EXPECT_DOUBLE_EQ(a["summary"]["convergence"]["p_adjusted"]["equivalence"].get<double>(), raw_a);
  nlohmann::json without_summary = {{"cell_id", "hung"}};
  apply_convergence_family({&base, &a, &b, &without_summary});
  EXPECT_TRUE(base["summary"]["convergence"]["family"].is_null());
  EXPECT_EQ(base["summary"]["convergence"]["verdict"], "baseline");
  EXPECT_EQ(a["summary"]["convergence"]["family"]["size"], 2);
  // Two p values: the smaller doubled, the larger kept (Holm's step down), both capped at 1.
  const double lo = std::min(raw_a, raw_b), hi = std::max(raw_a, raw_b);
  const double want_a = raw_a == lo ? std::min(1.0, 2 * lo) : std::max(std::min(1.0, 2 * lo), hi);
  EXPECT_DOUBLE_EQ(a["summary"]["convergence"]["p_adjusted"]["equivalence"].get<double>(), want_a);
  EXPECT_EQ(b["summary"]["convergence"]["verdict"], "worse");
  EXPECT_EQ(without_summary, nlohmann::json({{"cell_id", "hung"}}));
}

}  // namespace
}  // namespace mpb
