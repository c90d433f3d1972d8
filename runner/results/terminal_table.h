// What the runner prints: progress times, byte sizes, the results table at
// the end of a run and the machine-load warning. Text only; nothing here
// decides anything.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/machine/machine_load.h"

namespace mpb {

// printf into a std::string: fmt("%.1f GiB", 3.25) -> "3.2 GiB".
std::string fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));

std::string format_eta(double seconds);  // "h:mm:ss" (like the dry run's h:mm), "--:--" when unknown
std::string human_bytes(double bytes);   // "1.5 MiB"
std::string percent(double fraction);    // "42%"

// A cell id for the terminal table: long ones (an include with many keys)
// keep their start and end; the files have the full id.
std::string table_id(const std::string& id, size_t width);

// One row per finished cell (their JSON): speed, speed-up and interval, step
// time, fraction of the GEMM ceiling, peak memory, eval loss or "diverged".
void print_table(const std::vector<nlohmann::json>& cells);

// "machine busy WHEN: other processes used N% of the CPU time ...".
std::string load_warning(const std::string& when, const LoadWindow& w);

}  // namespace mpb
