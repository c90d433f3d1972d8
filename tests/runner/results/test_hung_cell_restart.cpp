// The watchdog's restart command line (runner/results/hung_cell.h): --resume added
// once, and a --max-minutes budget lowered by the time the hung process ran,
// so a time slice is not granted a new budget by a hang.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runner/results/hung_cell.h"

namespace mpb {
namespace {

using Args = std::vector<std::string>;

TEST(HungCellRestart, AddsResumeOnce) {
  EXPECT_EQ(restart_arguments({"runner", "x.yaml"}, 5.0), (Args{"runner", "x.yaml", "--resume"}));
  EXPECT_EQ(restart_arguments({"runner", "x.yaml", "--resume"}, 5.0), (Args{"runner", "x.yaml", "--resume"}));
}

TEST(HungCellRestart, MaxMinutesIsWhatIsLeft) {
  EXPECT_EQ(restart_arguments({"runner", "x.yaml", "--max-minutes", "10"}, 240.0),
            (Args{"runner", "x.yaml", "--max-minutes", "6", "--resume"}));
  EXPECT_EQ(restart_arguments({"runner", "--max-minutes=2.5", "x.yaml", "--resume"}, 30.0),
            (Args{"runner", "--max-minutes=2", "x.yaml", "--resume"}));
  // Spent: the smallest budget, never 0 (no limit): one repeat, then exit 5.
  EXPECT_EQ(restart_arguments({"runner", "x.yaml", "--max-minutes", "1"}, 600.0),
            (Args{"runner", "x.yaml", "--max-minutes", "1e-06", "--resume"}));
  // 0 is "no limit" and stays so.
  EXPECT_EQ(restart_arguments({"runner", "x.yaml", "--max-minutes", "0"}, 600.0),
            (Args{"runner", "x.yaml", "--max-minutes", "0", "--resume"}));
  // A --max-minutes without a value (another option's value, say) is left alone.
  EXPECT_EQ(restart_arguments({"runner", "x.yaml", "--filter", "--max-minutes"}, 1.0),
            (Args{"runner", "x.yaml", "--filter", "--max-minutes", "--resume"}));
}

}  // namespace
}  // namespace mpb
