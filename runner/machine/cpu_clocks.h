// The CPU's clocks as the kernel reports them: the cpufreq governor of every
// CPU and the current frequency. A governor other than "performance" lets the
// clock ramp with load, so the first cells of a run (or short ones) can run
// slower than the rest for reasons unrelated to what they measure. VMs and
// containers usually expose no cpufreq at all: then the fields are null and
// `why` says so (the host sets the clocks, which nothing here can see).
//
// Every reader takes a root directory that prefixes /sys and /proc, so tests
// read fixture trees instead of the machine they run on.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpb {

struct CpuClocks {
  int cpus = 0;                              // CPUs listed under <root>/sys/devices/system/cpu
  std::map<std::string, int> governors;      // governor -> CPUs using it (empty: not readable)
  std::optional<std::string> governor;       // the governor, when every CPU with cpufreq agrees
  std::optional<double> mhz, mhz_min, mhz_max;  // current clock: mean, min, max over the CPUs read
  int mhz_cpus = 0;                          // CPUs the MHz figures cover
  std::string mhz_source;                    // "cpufreq scaling_cur_freq" | "/proc/cpuinfo cpu MHz"
  std::string governor_why, mhz_why;         // why governor / mhz is null (empty when it is not)
  bool hypervisor = false;                   // /proc/cpuinfo's flags include "hypervisor" (a VM)

  bool performance() const { return governor && *governor == "performance"; }
  // {"governor", "governors", "mhz", "mhz_min", "mhz_max", "mhz_source", "why"}: why is null
  // when both governor and mhz were read, else the reasons joined by "; ".
  nlohmann::json to_json() const;
};

// Reads <root>/sys/devices/system/cpu/cpu*/cpufreq/{scaling_governor,scaling_cur_freq}
// and, when no CPU has scaling_cur_freq, <root>/proc/cpuinfo's "cpu MHz" lines.
// root "" is the machine itself. Never throws.
CpuClocks read_cpu_clocks(const std::string& root = "");

// Parsers, exposed for tests.
// Every "cpu MHz : 2596.144" value in /proc/cpuinfo text, in order.
std::vector<double> parse_cpuinfo_mhz(const std::string& cpuinfo);
// A cpufreq frequency file (kHz, e.g. "2596144\n") in MHz; nullopt if it is not a number.
std::optional<double> parse_cpufreq_khz(const std::string& text);
// Whether the first "flags" line of /proc/cpuinfo text lists "hypervisor".
bool cpuinfo_has_hypervisor_flag(const std::string& cpuinfo);

}  // namespace mpb
