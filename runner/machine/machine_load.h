// How busy the machine is apart from this process: the load average and the
// CPU time other processes (and, on a VM, the hypervisor: steal) took over a
// window, from /proc/loadavg, /proc/stat and getrusage. A benchmark on a
// shared machine must say when its numbers were taken under load.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpb {

// Other processes (or steal) used more than this share of the machine's CPU time: busy.
constexpr double kBusyOtherCpuFraction = 0.10;

struct LoadWindow {
  std::vector<double> loadavg;        // 1, 5, 15 minutes, at the window's end (empty if unreadable)
  std::optional<double> other_cpu;    // other processes' CPU time / (wall x cores), 0..1
  std::optional<double> steal;        // hypervisor steal time / (wall x cores)
  double seconds = 0.0;
  bool busy() const {
    return (other_cpu && *other_cpu > kBusyOtherCpuFraction) || (steal && *steal > kBusyOtherCpuFraction);
  }
  nlohmann::json to_json() const;
};

// Start a window with begin(); end() reads what happened since.
class LoadSampler {
 public:
  void begin();
  LoadWindow end() const;

 private:
  struct Counters {
    double busy_s = -1.0, steal_s = 0.0, own_s = 0.0, wall_s = 0.0;
  };
  static Counters read();
  Counters start_;
};

// A window over `seconds` of this process sleeping: what the rest of the
// machine does while mpbench is idle.
LoadWindow sample_idle_load(double seconds);

}  // namespace mpb
