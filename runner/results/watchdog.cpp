#include "runner/results/watchdog.h"

#include <algorithm>
#include <cstdio>

namespace mpb {

double stall_limit_seconds(const std::vector<double>& step_intervals_s, double stall_s) {
  if (stall_s > 0.0) return stall_s;
  if (step_intervals_s.empty()) return 600.0;
  std::vector<double> v = step_intervals_s;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return std::max(60.0, 20.0 * v[v.size() / 2]);
}

std::string WatchdogReport::reason() const {
  char buf[256];
  if (repeat_limit)
    std::snprintf(buf, sizeof buf, "hung: the repeat ran %.1f s, over --cell-timeout %.1f s (last completed step %d/%d)",
                  waited_s, limit_s, last_step, steps);
  else
    std::snprintf(buf, sizeof buf, "hung: no step completed (nor evaluation chunk) for %.1f s (limit %.1f s; last completed step %d/%d)",
                  waited_s, limit_s, last_step, steps);
  return buf;
}

Watchdog::Watchdog(WatchdogLimits limits, Handler on_hang)
    : limits_(limits), on_hang_(std::move(on_hang)), thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::arm(const std::string& what, int steps) {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = true;
  what_ = what;
  steps_ = steps;
  last_step_ = 0;
  intervals_.clear();
  started_ = last_step_at_ = last_progress_ = Clock::now();
}

void Watchdog::progress(int step) {
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point now = Clock::now();
  if (last_step_ > 0) intervals_.push_back(std::chrono::duration<double>(now - last_step_at_).count());
  last_step_at_ = last_progress_ = now;
  last_step_ = step;
}

void Watchdog::alive() {
  std::lock_guard<std::mutex> lock(mu_);
  last_progress_ = Clock::now();
}

void Watchdog::disarm() {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = false;
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (stop_ || !armed_) continue;
    const Clock::time_point now = Clock::now();
    WatchdogReport r;
    r.what = what_;
    r.last_step = last_step_;
    r.steps = steps_;
    r.waited_s = std::chrono::duration<double>(now - last_progress_).count();
    r.limit_s = stall_limit_seconds(intervals_, limits_.stall_s);
    const double ran_s = std::chrono::duration<double>(now - started_).count();
    if (limits_.repeat_s > 0.0 && ran_s > limits_.repeat_s) {
      r.repeat_limit = true;
      r.waited_s = ran_s;
      r.limit_s = limits_.repeat_s;
    } else if (r.waited_s <= r.limit_s) {
      continue;
    }
    armed_ = false;  // once per arm()
    lock.unlock();
    on_hang_(r);
    lock.lock();
  }
}

}  // namespace mpb
