// runner merge OUT DIR... (issue 14): the result sets of the shards of one
// experiment (runner --shard i/N, runner/experiment/shard.h) -> one standard result set,
// OUT/<name>/, that report.py and compare.py read as if one run had made it.
//
// It refuses (exit 2, nothing written) unless every shard ran the same
// experiment with the same config hash and mpbench commit (--allow-mixed
// merges anyway and records the differences), shards 0..N-1 are each given
// once and finished, and every cell of the matrix has exactly one result (or
// a failed/ record of a hung cell). Each shard's machine, device, load and
// scheduler variables stay in manifest.shards; shards on different machines
// make manifest.merged.mixed_machines true (compare.py then compares
// generations, not regressions). docs/SCALE.md has the merged manifest.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpb {

// A reason not to merge; the message names the directory or file.
struct MergeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct MergeOptions {
  bool allow_mixed = false;  // merge shards of different config hashes / commits, recording it
  nlohmann::json scheduler;  // --scheduler FILE's JSON (scripts/slurm/job_states.py): manifest.scheduler
};

struct MergedSet {
  std::string experiment;
  nlohmann::json manifest;
  std::vector<nlohmann::json> cells;   // matrix order, each from the shard that owns it
  std::vector<nlohmann::json> failed;  // failed/ records of hung cells, from their owners
  std::vector<std::string> notes;      // what the merge left out and why (baseline copies), for the terminal
};

// Reads and checks the shards' directories (each a run directory holding
// manifest.json). Writes nothing. Throws MergeError.
MergedSet merge_shards(const std::vector<std::filesystem::path>& dirs, const MergeOptions& opt);

// Writes `set` to out_root/<experiment>/, which must not exist yet or be
// empty: everything goes to a temporary directory beside it first, renamed
// into place at the end, so a reader (or a crash) never sees half a set.
// Returns the directory. Throws MergeError when the target holds files.
std::filesystem::path write_merged_set(const std::filesystem::path& out_root, const MergedSet& set);

// `runner merge ...` (argv[0] is "merge"); returns the exit code.
int run_merge(int argc, char** argv);

}  // namespace mpb
