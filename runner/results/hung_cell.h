// What the runner does when its watchdog (runner/results/watchdog.h) finds a repeat
// hung: it writes failed/<slug>.json (the cell, its config hash, the repeat,
// the last completed step and why), then replaces itself with a fresh runner
// with the same command line plus --resume (and what is left of a
// --max-minutes budget). A hung thread cannot be
// cancelled, but exec ends every thread of the process (and its device
// context); the new runner skips the hung cell, keeps every finished cell
// and repeat, and runs the rest of the matrix.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/experiment/config.h"
#include "runner/results/watchdog.h"

namespace mpb {

// Kept by main() for the restart: the runner's own command line, and when it
// started (the restart's --max-minutes is what is left of the budget).
void remember_command_line(int argc, char** argv);

// The restart's command line: `args` with --resume, and --max-minutes N (or
// --max-minutes=N) lowered by the `elapsed_s` seconds this process ran (to
// 1e-6 at least: 0 would mean no limit), so that a hang restart does not
// grant a time slice a new budget.
std::vector<std::string> restart_arguments(std::vector<std::string> args, double elapsed_s);

// The failed/<slug>.json record ("schema": "mpbench.failed/1").
nlohmann::json hung_cell_record(const Cell& cell, int repeat, const WatchdogReport& report);

// Writes the record, says so on stderr, and execs the runner again with
// --resume. Returns only if exec failed (then the caller must end the process).
void record_hang_and_restart(const std::filesystem::path& record_path, const nlohmann::json& record);

}  // namespace mpb
