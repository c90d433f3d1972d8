// A per-repeat watchdog: a thread that notices when training stops making
// progress (a hung kernel, a deadlock, a device that no longer answers) and
// calls a handler, which records the cell as hung and restarts the runner so
// that the rest of the matrix still runs (runner/results/hung_cell.h). Cooperative
// checks cannot do this: the thread that would check is the one that hangs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mpb {

struct WatchdogLimits {
  // Seconds without a completed step that count as a hang; 0: automatic
  // (stall_limit_seconds below).
  double stall_s = 0.0;
  // Seconds a whole repeat may take; 0: no limit (--cell-timeout).
  double repeat_s = 0.0;
};

// The automatic stall limit: before the first step completes, 600 s (it
// includes one-time set-up: oneDNN primitives, cuBLASLt heuristics, cuDNN
// plans); after, 20x the median interval between completed steps so far, at
// least 60 s (a step's own spread or a noisy neighbour stay far inside it).
// An evaluation pass is no stall however long it is (512 eval samples at
// batch 8 are 64 forward passes, over a minute on two busy cores): each of
// its chunks is progress (Watchdog::alive). `stall_s` > 0 replaces the rule.
double stall_limit_seconds(const std::vector<double>& step_intervals_s, double stall_s);

// What was running when the watchdog fired.
struct WatchdogReport {
  std::string what;       // "cell <id> repeat <r>"
  int last_step = 0;      // the last step that completed (0: none)
  int steps = 0;          // steps in the repeat
  double waited_s = 0.0;  // since the last progress (or since arm())
  double limit_s = 0.0;
  bool repeat_limit = false;  // the --cell-timeout limit, not a stall
  std::string reason() const;
};

class Watchdog {
 public:
  using Handler = std::function<void(const WatchdogReport&)>;
  // `on_hang` runs on the watchdog's thread, at most once per arm(); the
  // thread that hangs is still stuck then, so it must not wait for it.
  Watchdog(WatchdogLimits limits, Handler on_hang);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void arm(const std::string& what, int steps);  // a repeat starts
  void progress(int step);                        // step `step` completed
  void alive();                                   // progress between steps (an evaluation chunk)
  void disarm();                                  // the repeat ended

 private:
  using Clock = std::chrono::steady_clock;
  void loop();

  const WatchdogLimits limits_;
  const Handler on_hang_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, armed_ = false;
  std::string what_;
  int steps_ = 0, last_step_ = 0;
  // last_step_at_: when the last step completed (the intervals the limit is
  // made of); last_progress_: the last step or alive(), what the limit is
  // held against.
  Clock::time_point started_, last_step_at_, last_progress_;
  std::vector<double> intervals_;
  std::thread thread_;  // last: starts after the members it reads
};

}  // namespace mpb
