// Turning training records into the result files of docs/RESULTS.md:
// cells/<slug>.json and summary.csv.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device.h"
#include "core/precision.h"
#include "runner/config.h"
#include "train/trainer.h"

namespace mpb {

struct CellContext {
  std::string experiment;
  const Cell* cell = nullptr;
  const DeviceInfo* device = nullptr;
  PrecisionPolicy policy;
  std::string gemm_support;      // native | emulated for this cell's GEMM mode
  double ceiling_gflops = 0.0;   // for this cell's GEMM mode
  std::optional<double> baseline_samples_per_s;
};

nlohmann::json cell_result_json(const CellContext& ctx, const std::vector<RunRecord>& repeats);

// summary.csv from cell result JSONs (in the given order).
std::string summary_csv(const std::vector<nlohmann::json>& cells);

// Samples/s of a finished cell JSON (summary.samples_per_s).
double cell_samples_per_s(const nlohmann::json& cell);

}  // namespace mpb
