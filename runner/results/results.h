// Turning training records into the result files of docs/RESULTS.md:
// cells/<slug>.json and summary.csv. A cell's summary is computed from its
// repeats' JSON (not from in-memory records), so repeats finished by an
// earlier, interrupted run and repeats finished now are summarised alike.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device.h"
#include "core/precision.h"
#include "runner/experiment/config.h"
#include "train/trainer.h"

namespace mpb {

struct CellContext {
  std::string experiment;
  std::string run_id;            // runner/results/run_identity.h
  const Cell* cell = nullptr;
  const DeviceInfo* device = nullptr;
  PrecisionPolicy policy;
  std::string gemm_support;      // native | emulated for this cell's GEMM mode
  std::string gemm_math;         // Device::gemm_math: what the GEMM library is asked for
  nlohmann::json environment_overrides = nlohmann::json::object();  // manifest environment.overrides
  double ceiling_gflops = 0.0;   // for this cell's GEMM mode
  nlohmann::json estimated_time;  // summary.estimated_time (runner/measure/cost_estimate.h); null: none
};

// One repeat's record (repeats[i] of the cell JSON). The caller adds where it
// ran in the order (round, position, started, started_s).
nlohmann::json repeat_result_json(int repeat, uint64_t seed, const RunRecord& rec, const CellConfig& cfg);

// The whole cell from its repeats' JSON, in repeat order. The speed-up fields
// are null until apply_speedup() sets them.
nlohmann::json cell_result_json(const CellContext& ctx, const std::vector<nlohmann::json>& repeats);

// The timing samples of each repeat: post-warm-up steps that did not also
// sample numerics (all post-warm-up steps when every one was probed).
std::vector<std::vector<double>> timed_steps(const nlohmann::json& cell);
// One repeat's: from its measured_from_step (runner/measure/steady_state.h), or the
// configured warm-up in files written before it existed.
std::vector<double> repeat_timed_steps(const nlohmann::json& rep, int warmup);

// Sets summary.speedup, speedup_interval and speedup_verdict, and
// summary.convergence (runner/results/convergence_json.h), of `cell` against
// `baseline` (the baseline's finished JSON; nullptr when there is none, or it
// is of another model: then the fields are null). The baseline itself gets
// speedup 1 and verdict "baseline".
void apply_speedup(nlohmann::json& cell, const nlohmann::json* baseline);

// The cell's training diverged: its final or eval loss is not a finite
// number (NaN and infinities are written as null), or a repeat diverged by the
// convergence verdict's rule (seed_diverged: ended more than 10% above its
// initial loss). --fail-on-divergence and the terminal table read it.
bool cell_diverged(const nlohmann::json& cell);

// The commit each run was built from, by run id (the manifest's git_commit;
// a merged set's cells keep their shards' run ids, and each shard its commit).
using CommitsByRun = std::map<std::string, std::string>;

// summary.csv from cell result JSONs (in the given order). Each row ends with
// the cell's device, device name, run id and the commit of that run, so rows
// of several machines' sets concatenate without a join against manifest.json.
std::string summary_csv(const std::vector<nlohmann::json>& cells, const CommitsByRun& commits);

}  // namespace mpb
