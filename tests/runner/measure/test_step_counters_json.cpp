// The step counters in the cell JSON (runner/measure/step_counters.h, docs/RESULTS.md):
// which steps each field reads, and the summary over repeats.
#include <gtest/gtest.h>

#include "runner/measure/step_counters.h"

namespace mpb {
namespace {

// Five steps, two of warm-up; step 4 (index 3) probed.
RunRecord record() {
  RunRecord r;
  r.probed = {0, 0, 0, 1, 0};
  r.host_syncs = {9, 4, 3, 40, 3};
  r.allocs = {5, 1, 0, 2, 0};
  r.plans_created = {7, 0, 1, 0, 0};
  r.gemm_fallbacks = {{"BIAS", 3}};
  return r;
}

TEST(StepCountersJson, RepeatFieldsReadTheStepsAfterWarmUp) {
  nlohmann::json j;
  add_step_counters(j, record(), /*warmup_steps=*/2);
  EXPECT_EQ(j.at("host_syncs_per_step"), 3);          // unprobed steps 3 and 5
  EXPECT_EQ(j.at("host_syncs_per_probed_step"), 40);
  EXPECT_EQ(j.at("allocs_in_timed_steps"), 2);        // the probed step counts
  EXPECT_EQ(j.at("plans_created_in_timed_steps"), 1);
  EXPECT_EQ(j.at("gemm_fallbacks").at("BIAS"), 3);
  EXPECT_EQ(j.at("step_counters").at("host_syncs").size(), 5u);

  nlohmann::json none;
  add_step_counters(none, record(), /*warmup_steps=*/5);
  EXPECT_EQ(none.at("host_syncs_per_step"), 0);
  EXPECT_TRUE(none.at("host_syncs_per_probed_step").is_null());
  EXPECT_EQ(none.at("allocs_in_timed_steps"), 0);
}

TEST(StepCountersJson, SummaryTakesTheMostSyncsAndSumsTheRest) {
  nlohmann::json a, b;
  add_step_counters(a, record(), 2);
  RunRecord r = record();
  r.host_syncs[4] = 6;
  r.gemm_fallbacks = {{"BIAS", 1}, {"GELU_AUX_BIAS", 2}};
  add_step_counters(b, r, 2);
  nlohmann::json old_repeat = {{"repeat", 2}};  // written before the counters existed
  nlohmann::json s;
  add_step_counter_summary(s, {a, b, old_repeat});
  EXPECT_EQ(s.at("host_syncs_per_step"), 6);
  EXPECT_EQ(s.at("allocs_in_timed_steps"), 4);
  EXPECT_EQ(s.at("plans_created_in_timed_steps"), 2);
  EXPECT_EQ(s.at("gemm_fallbacks").at("BIAS"), 4);
  EXPECT_EQ(s.at("gemm_fallbacks").at("GELU_AUX_BIAS"), 2);

  nlohmann::json only_old;
  add_step_counter_summary(only_old, {old_repeat});
  EXPECT_TRUE(only_old.at("host_syncs_per_step").is_null());
  EXPECT_TRUE(only_old.at("allocs_in_timed_steps").is_null());
}

}  // namespace
}  // namespace mpb
