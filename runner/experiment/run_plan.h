// The order in which a matrix's repeats run. Interleaved (the default): round
// r runs repeat r of every cell, so that drift and noise on a shared machine
// land on every cell alike (Google Benchmark's
// --benchmark_enable_random_interleaving). Even rounds run in a fresh seeded
// random order, odd rounds in the reverse of the round before (ABBA
// counterbalancing: no cell always runs after another). Sequential: every
// repeat of one cell, then the next cell (the baseline first).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/experiment/config.h"

namespace mpb {

enum class RunOrder { Interleaved, Sequential };
RunOrder parse_run_order(const std::string& name);  // "interleaved" | "sequential"; throws std::invalid_argument
const char* run_order_name(RunOrder order);

struct RunUnit {
  const Cell* cell = nullptr;
  int repeat = 0;  // 0-based
};

// Segments of the run between which the machine's load is sampled: a round
// (interleaved) or one cell's repeats (sequential).
struct RunPlan {
  RunOrder order = RunOrder::Interleaved;
  uint64_t seed = 0;
  std::vector<std::vector<RunUnit>> rounds;
  size_t units() const;
};

// `cells` in matrix order with the baseline first. Deterministic for a seed.
RunPlan make_run_plan(const std::vector<const Cell*>& cells, RunOrder order, uint64_t seed);

// {"mode", "seed", "rounds": [[cell id, ...], ...]} for the manifest.
nlohmann::json run_plan_json(const RunPlan& plan);

}  // namespace mpb
