// Which other processes use the CPU: per-process CPU time from
// /proc/[pid]/stat, sampled at the start and end of a window. machine_load.h
// says how busy the machine is; this names who makes it busy, so that
// `runner doctor` can say "cc1plus took 95% of a core" instead of "busy".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mpb {

// One /proc/[pid]/stat line, the fields used here.
struct ProcStat {
  int pid = 0;
  std::string comm;             // the command name (at most 15 characters, as the kernel keeps it)
  uint64_t cpu_ticks = 0;       // utime + stime, clock ticks (all threads)
  uint64_t start_ticks = 0;     // starttime: tells a reused PID from the process before
};

// Parses "pid (comm) state ppid ... utime stime ... starttime ...". comm may
// hold spaces and parentheses, so the fields after it are counted from the
// last ')'. nullopt for a line that does not have them.
std::optional<ProcStat> parse_proc_pid_stat(const std::string& line);

// Every process readable under <proc_root>/[0-9]*/stat (those that exit
// while being read are skipped).
std::map<int, ProcStat> read_process_table(const std::string& proc_root = "/proc");

struct ProcessCpu {
  int pid = 0;
  std::string name;
  double cores = 0.0;   // CPU time over the window / the window's length: 1.0 = one core busy
};

// The processes that used the most CPU between two tables, most first, at
// most `top` of them, leaving out `exclude_pid` (the caller) and those under
// `min_cores`. A process that started inside the window counts from zero; one
// that exited is not seen (its time is in /proc/stat's total, not here).
std::vector<ProcessCpu> busiest_processes(const std::map<int, ProcStat>& before,
                                          const std::map<int, ProcStat>& after, double seconds,
                                          double ticks_per_second, int exclude_pid, size_t top,
                                          double min_cores = 0.01);

}  // namespace mpb
