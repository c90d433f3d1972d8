// --shard i/N (issue 14): one share of an experiment's cells, so that N
// runners (a Slurm array, a Kubernetes Indexed Job) train the matrix together
// and `runner merge` (runner/commands/merge.h) makes one result set of their results.
//
// Every shard computes the same assignment on its own, from the experiment
// file alone: nothing about the machine it runs on enters it, so shards on
// different nodes agree without talking to each other.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/experiment/config.h"

namespace mpb {

struct ShardSpec {
  int index = 0;  // 0-based, as SLURM_ARRAY_TASK_ID (--array=0-N-1) and JOB_COMPLETION_INDEX count
  int count = 1;
};

// "i/N" with 0 <= i < N; nullopt with `error` saying what is wrong.
std::optional<ShardSpec> parse_shard(const std::string& text, std::string* error);

// The balancing weight of a cell: its GEMM FLOPs per step (with what
// checkpointing recomputes) x steps x repeats, the numerator of the dry-run's
// time estimate (runner/measure/cost_estimate.h) without the device's rate, which
// would make the assignment depend on the machine.
double shard_weight(const CellConfig& cfg);

// The whole assignment, for every shard.
struct ShardAssignment {
  std::vector<int> owner;            // per cell of `cells`: the shard whose results stand for it
  std::vector<bool> needs_baseline;  // per shard: runs a copy of the baseline for its speed-ups
  std::vector<double> weight;        // per shard: its cells' weights, baseline copy included
};

// `cells`: the cells to run (after --filter), in matrix order. The baseline
// (if among them) belongs to shard 0; the other cells go, heaviest first (ties:
// matrix order), to the shard whose weight grows least by taking them, counting
// the baseline copy a shard must add when it takes its first cell of the
// baseline's model (speed-ups only compare within a model, runner/results/results.h).
// While as many cells are left as shards are empty, only an empty shard may
// take the next one, so no share is empty. Throws std::invalid_argument when
// there are fewer cells than shards.
ShardAssignment assign_shards(const std::vector<const Cell*>& cells, int count);

// One shard's part of an assignment.
struct ShardShare {
  ShardSpec spec;
  std::vector<const Cell*> owned;       // matrix order
  const Cell* baseline_copy = nullptr;  // the baseline, run here only for speed-ups (shard 0 owns it)
  double weight = 0, total_weight = 0;  // this shard's and the whole matrix's (copies included)
  std::vector<const Cell*> to_run() const;  // the baseline copy first, then `owned`
};

ShardShare shard_share(const std::vector<const Cell*>& cells, const ShardSpec& spec);  // throws as assign_shards

// manifest.shard (docs/SCALE.md): index, count, cells, baseline_copy, weights.
nlohmann::json shard_json(const ShardShare& share, const std::string& filter);

// The scheduler's variables that say which job and task ran a shard
// (SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID, SLURM_RESTART_COUNT, ...,
// JOB_COMPLETION_INDEX): name -> value for those set, so that a merged set
// can be traced back to its jobs and a requeued task shows its restarts.
nlohmann::json scheduler_environment_json();

// The run directory of a shard: <name>.shard-<i>-of-<N> beside where the
// unsharded run's <name>/ would be, so that shards sharing a file system
// never share a directory (one runner per directory, runner/results/result_dir.h).
std::string shard_dir_name(const std::string& experiment, const ShardSpec& spec);

}  // namespace mpb
