// The machine checks of `runner doctor`: build, CPU clocks, load, memory,
// disk, environment. Each turns what was read into a status and a sentence
// about what it means for measurements.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "runner/io/build_info.h"
#include "runner/commands/doctor_checks.h"
#include "runner/results/terminal_table.h"

namespace mpb::doctor {

namespace {

DoctorCheck make(const std::string& name, CheckStatus s, std::string finding, std::string meaning = "") {
  DoctorCheck c;
  c.name = name;
  c.status = s;
  c.finding = std::move(finding);
  c.meaning = std::move(meaning);
  return c;
}

}  // namespace

DoctorCheck check_build() {
  const nlohmann::json git = git_json(), build = build_json();
  std::string finding = "mpbench " + mpbench_version() + ", commit " + git["commit"].get<std::string>();
  if (git["dirty"].is_boolean()) finding += git["dirty"].get<bool>() ? " with uncommitted changes" : " (clean)";
  else finding += " (as of configuring; uncommitted changes not recorded by this build)";
  finding += ", " + build["compiler"].get<std::string>();
  if (build["type"].is_string()) finding += " " + build["type"].get<std::string>();
  finding += build["compiled_with"]["optimized"].get<bool>() ? ", optimized" : ", NOT optimized";
#ifdef MPB_HAVE_CUDA
  finding += ", CUDA backend built";
#else
  finding += ", built without the CUDA backend";
#endif
  DoctorCheck c = make("build", CheckStatus::Ok, finding);
  c.data = {{"git", git}, {"build", build}};
  if (!build["compiled_with"]["optimized"].get<bool>()) {
    c.status = CheckStatus::Warn;
    c.meaning = "an unoptimized build: its timings say nothing about the code's speed (build with "
                "-DCMAKE_BUILD_TYPE=Release)";
  } else if (git["dirty"].is_boolean() && git["dirty"].get<bool>()) {
    c.status = CheckStatus::Warn;
    c.meaning = "results from this build can't be traced to a commit (the manifest records dirty: true)";
  }
  return c;
}

DoctorCheck check_cpu_governor(const CpuClocks& clocks) {
  DoctorCheck c = make("cpu governor", CheckStatus::Ok, "");
  c.data = clocks.to_json();
  if (clocks.performance()) {
    c.finding = "performance on every CPU with cpufreq (" + std::to_string(clocks.governors.begin()->second) + ")";
    return c;
  }
  c.status = CheckStatus::Warn;
  if (clocks.governor) {
    c.finding = *clocks.governor + " on every CPU with cpufreq (" + std::to_string(clocks.governors.begin()->second) + ")";
    c.meaning = "the clock follows the load: early steps and short cells run at another clock than the rest; "
                "for stable numbers: sudo cpupower frequency-set -g performance";
  } else if (!clocks.governors.empty()) {
    c.finding = clocks.governor_why;
    c.meaning = "cells may run at different clocks depending on which CPU they land on; set one governor "
                "(performance) on every CPU";
  } else {
    c.finding = "not readable: " + clocks.governor_why;
    c.meaning = "whatever scales the clock is invisible from here; interleaved repeats are the defence "
                "(not a blocker)";
  }
  return c;
}

DoctorCheck check_cpu_clock(const CpuClocks& clocks) {
  DoctorCheck c = make("cpu clock", CheckStatus::Ok, "");
  c.data = clocks.to_json();
  if (!clocks.mhz) {
    c.status = CheckStatus::Warn;
    c.finding = "not readable: " + clocks.mhz_why;
    c.meaning = "clock changes during a run can't be seen (not a blocker)";
    return c;
  }
  std::string spread;
  if (clocks.mhz_cpus > 1) {
    spread = "mean of " + std::to_string(clocks.mhz_cpus) + " CPUs, ";
    if (*clocks.mhz_max - *clocks.mhz_min >= 1.0)
      spread += fmt("%.0f", *clocks.mhz_min) + "-" + fmt("%.0f", *clocks.mhz_max) + ", ";
  }
  c.finding = fmt("%.0f MHz now", *clocks.mhz) + " (" + spread + clocks.mhz_source + ")";
  c.meaning = clocks.hypervisor && clocks.mhz_source.rfind("/proc/cpuinfo", 0) == 0
                  ? "a VM's nominal clock, not necessarily the one its cores run at"
                  : "an idle snapshot: under load the clock can differ (boost, thermal limits)";
  return c;
}

DoctorCheck check_machine_load(const LoadWindow& w, const std::vector<ProcessCpu>& top) {
  DoctorCheck c = make("machine load", CheckStatus::Ok, "");
  c.data = w.to_json();
  nlohmann::json procs = nlohmann::json::array();
  std::string busiest;
  for (const ProcessCpu& p : top) {
    procs.push_back({{"pid", p.pid}, {"name", p.name}, {"cores", p.cores}});
    busiest += (busiest.empty() ? "" : ", ") + p.name + " (pid " + std::to_string(p.pid) + ") " + fmt("%.2f", p.cores) +
               " cores";
  }
  c.data["busiest_processes"] = procs;
  if (!w.other_cpu) {
    c.status = CheckStatus::Warn;
    c.finding = "not measurable (/proc/stat not readable)";
    c.meaning = "runs can't tell when other processes took CPU time from them (not a blocker)";
    return c;
  }
  c.finding = "other processes used " + percent(*w.other_cpu) + " of the CPU time over " + fmt("%.1f s", w.seconds);
  if (w.steal && *w.steal > 0.005) c.finding += ", hypervisor steal " + percent(*w.steal);
  if (w.loadavg.size() == 3)
    c.finding += fmt(" (load average %.2f", w.loadavg[0]) + fmt(" %.2f", w.loadavg[1]) + fmt(" %.2f)", w.loadavg[2]);
  if (!busiest.empty()) c.finding += "; busiest: " + busiest;
  if (w.busy()) {
    c.status = CheckStatus::Warn;
    c.meaning = "a run now would time that load with its cells (interleaving spreads it over every cell, the "
                "manifest records it): wait for a quiet machine for numbers to trust";
  }
  return c;
}

DoctorCheck sample_machine_load(double seconds) {
  const long hz = sysconf(_SC_CLK_TCK);
  const std::map<int, ProcStat> before = read_process_table();
  LoadSampler sampler;
  sampler.begin();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const LoadWindow w = sampler.end();
  const std::map<int, ProcStat> after = read_process_table();
  // Processes using at least 5% of a core: below that a name is noise.
  const std::vector<ProcessCpu> top =
      hz > 0 ? busiest_processes(before, after, w.seconds, double(hz), int(getpid()), 3, 0.05) : std::vector<ProcessCpu>{};
  return check_machine_load(w, top);
}

DoctorCheck check_memory(const MemoryInfo& m) {
  DoctorCheck c = make("memory", CheckStatus::Ok, "");
  c.data = {{"available_bytes", m.available_bytes ? nlohmann::json(*m.available_bytes) : nlohmann::json(nullptr)},
            {"total_bytes", m.total_bytes ? nlohmann::json(*m.total_bytes) : nlohmann::json(nullptr)},
            {"min_bytes", kDoctorMinFreeBytes}};
  if (!m.available_bytes) {
    c.status = CheckStatus::Warn;
    c.finding = "not readable: " + m.why;
    c.meaning = "can't tell whether a run fits in memory (not a blocker)";
    return c;
  }
  c.finding = human_bytes(double(*m.available_bytes)) + " available" +
              (m.total_bytes ? " of " + human_bytes(double(*m.total_bytes)) : std::string());
  if (double(*m.available_bytes) < kDoctorMinFreeBytes) {
    c.status = CheckStatus::Fail;
    c.meaning = "less than " + human_bytes(kDoctorMinFreeBytes) +
                ": runs may fail or swap, and swapping makes every step time meaningless";
  }
  return c;
}

DoctorCheck check_disk(const DiskSpace& d) {
  DoctorCheck c = make("disk", CheckStatus::Ok, "");
  c.data = {{"dir", d.dir}, {"checked", d.checked},
            {"free_bytes", d.free_bytes ? nlohmann::json(*d.free_bytes) : nlohmann::json(nullptr)},
            {"total_bytes", d.total_bytes ? nlohmann::json(*d.total_bytes) : nlohmann::json(nullptr)},
            {"min_bytes", kDoctorMinFreeBytes}};
  if (!d.free_bytes) {
    c.status = CheckStatus::Warn;
    c.finding = "not readable for " + d.dir + ": " + d.why;
    c.meaning = "can't tell whether results fit (not a blocker)";
    return c;
  }
  c.finding = human_bytes(double(*d.free_bytes)) + " free for " + d.dir +
              (d.checked.empty() || d.checked == d.dir ? std::string() : " (checked " + d.checked + ")");
  if (double(*d.free_bytes) < kDoctorMinFreeBytes) {
    c.status = CheckStatus::Fail;
    c.meaning = "less than " + human_bytes(kDoctorMinFreeBytes) + ": result files could not be written (--out DIR elsewhere)";
  }
  return c;
}

DoctorCheck check_environment(const std::vector<EnvOverride>& found) {
  DoctorCheck c = make("environment", CheckStatus::Ok, "");
  c.data = overrides_json(found);
  if (found.empty()) {
    c.finding = "none of the " + std::to_string(override_rules().size()) +
                " variables that change GEMM math or timing is set (NVIDIA_TF32_OVERRIDE, CUBLAS_*, "
                "CUDA_LAUNCH_BLOCKING, ONEDNN_*, OMP_*, ...)";
    return c;
  }
  c.status = CheckStatus::Warn;
  for (const EnvOverride& e : found)
    c.finding += (c.finding.empty() ? "" : "; ") + e.name + "=" + e.value + " (" + e.effect + ")";
  c.meaning = "results measure these settings, not the defaults (the manifest records them: environment.overrides)";
  return c;
}

}  // namespace mpb::doctor
