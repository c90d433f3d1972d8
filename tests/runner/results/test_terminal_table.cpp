// The progress line's ETA reads like the dry run's estimate: hours first (issue 41 saw
// "ETA 187:12" for a three-hour run).
#include <gtest/gtest.h>

#include <cmath>

#include "runner/results/terminal_table.h"

namespace mpb {
namespace {

TEST(TerminalTable, EtaIsHoursMinutesSeconds) {
  EXPECT_EQ(format_eta(0), "0:00:00");
  EXPECT_EQ(format_eta(59.4), "0:00:59");
  EXPECT_EQ(format_eta(61), "0:01:01");
  EXPECT_EQ(format_eta(187 * 60 + 12), "3:07:12");
  EXPECT_EQ(format_eta(-1), "--:--");
  EXPECT_EQ(format_eta(NAN), "--:--");
  EXPECT_EQ(format_eta(INFINITY), "--:--");
}

}  // namespace
}  // namespace mpb
