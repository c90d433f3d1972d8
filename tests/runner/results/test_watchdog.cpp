// The watchdog's rule and its firing (runner/results/watchdog.h). The waits below are
// limits for a thread to notice a condition, not speed targets: each
// assertion has seconds of slack over what it needs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "runner/results/watchdog.h"

namespace mpb {
namespace {

using namespace std::chrono_literals;

TEST(Watchdog, AutomaticLimitIsTwentyMediansAtLeastAMinute) {
  EXPECT_EQ(stall_limit_seconds({}, 0.0), 600.0) << "before the first step: set-up time";
  EXPECT_EQ(stall_limit_seconds({0.1, 0.2, 0.1}, 0.0), 60.0);
  EXPECT_EQ(stall_limit_seconds({5.0, 4.0, 100.0}, 0.0), 100.0) << "20 x the median 5 s, one slow step ignored";
  EXPECT_EQ(stall_limit_seconds({5.0}, 2.5), 2.5) << "--stall-timeout replaces the rule";
}

// Waits up to `limit` for `flag`.
bool wait_for(const std::atomic<int>& flag, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (flag.load() == 0 && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(5ms);
  return flag.load() != 0;
}

// A handler that counts its calls and keeps the last report.
struct Recorder {
  std::atomic<int> fired{0};
  WatchdogReport seen;
  Watchdog::Handler handler() {
    return [this](const WatchdogReport& r) {
      seen = r;
      fired.fetch_add(1);
    };
  }
};

TEST(Watchdog, FiresOnceWhenNoStepCompletesInTime) {
  Recorder rec;
  Watchdog dog({0.2, 0.0}, rec.handler());
  dog.arm("cell x repeat 1", 10);
  dog.progress(1);
  dog.progress(2);
  ASSERT_TRUE(wait_for(rec.fired, 10000ms));
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(rec.fired.load(), 1) << "at most once per arm()";
  EXPECT_EQ(rec.seen.last_step, 2);
  EXPECT_EQ(rec.seen.steps, 10);
  EXPECT_FALSE(rec.seen.repeat_limit);
  EXPECT_GE(rec.seen.waited_s, 0.2);
  EXPECT_NE(rec.seen.reason().find("no step completed"), std::string::npos) << rec.seen.reason();
}

TEST(Watchdog, StaysQuietWhileStepsComplete_AndWhenDisarmed) {
  std::atomic<int> fired{0};
  Watchdog dog({2.0, 0.0}, [&](const WatchdogReport&) { fired.fetch_add(1); });
  dog.arm("cell x repeat 1", 100);
  for (int s = 1; s <= 50; ++s) {
    dog.progress(s);
    std::this_thread::sleep_for(10ms);
  }
  dog.disarm();
  std::this_thread::sleep_for(2500ms);  // past the limit, but disarmed
  EXPECT_EQ(fired.load(), 0);
}

// An evaluation pass longer than the limit is no hang while its chunks come
// in; after the last chunk the limit counts again.
TEST(Watchdog, EvaluationChunksAreProgress) {
  Recorder rec;
  Watchdog dog({0.5, 0.0}, rec.handler());
  dog.arm("cell x repeat 1", 10);
  dog.progress(1);
  for (int chunk = 0; chunk < 15; ++chunk) {  // 1.5 s of evaluation, 0.1 s per chunk
    std::this_thread::sleep_for(100ms);
    dog.alive();
  }
  EXPECT_EQ(rec.fired.load(), 0) << rec.seen.reason();
  dog.progress(2);
  ASSERT_TRUE(wait_for(rec.fired, 10000ms)) << "no step and no chunk: a hang";
  EXPECT_EQ(rec.seen.last_step, 2);
  EXPECT_NE(rec.seen.reason().find("nor evaluation chunk"), std::string::npos) << rec.seen.reason();
}

TEST(Watchdog, RepeatLimitFiresEvenWithProgress) {
  Recorder rec;
  Watchdog dog({60.0, 0.3}, rec.handler());
  dog.arm("cell x repeat 1", 1000);
  for (int s = 1; s <= 2000 && rec.fired.load() == 0; ++s) {
    dog.progress(s);
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(rec.fired.load(), 1);
  EXPECT_TRUE(rec.seen.repeat_limit);
  EXPECT_NE(rec.seen.reason().find("--cell-timeout"), std::string::npos) << rec.seen.reason();
}

}  // namespace
}  // namespace mpb
