// Which run a result file belongs to (docs/RESULTS.md, "Guarantees"). A cell's
// speed-up is only meaningful against the baseline of its own run (the
// interleaved rounds of docs/SCALE.md), so a cell file copied from another
// experiment or another run must never join a result set, even when its
// config_hash matches (issue 33 defect 3).
//
// A run has an id, written into manifest.json and into every file it writes
// under cells/, partial/ and failed/ ("run_id"). A fresh run draws a new one;
// --resume, and a --filter run that keeps the other cells' earlier results,
// keep the id of the manifest already there. Shards are launched separately,
// so each has its own id; `runner merge` checks each shard's files against its
// own manifest and lists every shard's id in the merged manifest's shards[].
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpb {

// A new run's id: the start time (UTC) and 64 random bits, "20261126T230512Z-9f3a0c...".
// Two runs started in the same second still differ (the random part).
std::string new_run_id();

// manifest["run_id"] when it is a non-empty string, else "" (no manifest, or one
// from before run ids).
std::string recorded_run_id(const nlohmann::json& manifest);

// The ids a result set accepts in its files, and whether files without one are
// accepted (a set started before run ids existed).
struct RunMembership {
  std::string experiment;
  std::vector<std::string> run_ids;
  bool accept_missing_id = false;
};

// Why the parsed result file `file` is not a file of that run ("" when it is):
// its "experiment" differs, or its "run_id" is missing or not one of the ids.
// The text says what differs, with both values.
std::string stranger_reason(const nlohmann::json& file, const RunMembership& run);

// Every *.json under dir/cells, dir/partial and dir/failed that is a regular
// file (never followed: links and special files are sweep_result_dir's), parses
// and is a stranger to `run`, as "PATH: reason". Unparseable files are not
// judged here (sweep_result_dir moves them to stale/), nor those `leaving`
// names ("cells/x.json", relative to dir: what the sweep will move away).
std::vector<std::string> stranger_files(const std::filesystem::path& dir, const RunMembership& run,
                                        const std::set<std::string>& leaving = {});

}  // namespace mpb
