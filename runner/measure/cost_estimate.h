// What a run will cost, before it runs (issue 16): per cell, the GEMM FLOPs
// of a step (the model's, plus what gradient checkpointing recomputes: the
// hardware does both) x steps x repeats, divided by an assumed achieved rate,
// kAssumedMfu of the dense peak of the cell's GEMM mode on a known GPU
// (runner/measure/device_peaks.h: the device's own row, or --assume-gpu NAME), or of
// the GEMM ceiling measured at start on the CPU. runner --dry-run prints it as
// h:mm beside the cell list; a real run stores it in each cell's summary
// (estimated_time) beside the measured time of its steps, and report.py shows
// the two side by side: that is the check of the estimate. Left out: set-up,
// evaluation, ceiling measurements and anything that is not a GEMM.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/cell_config.h"
#include "core/device.h"
#include "runner/measure/device_peaks.h"

namespace mpb {

// The fraction of the peak a training step is assumed to reach: 40%, about
// what well-tuned transformer training reaches on one GPU (model FLOPs
// utilisation; PaLM and Megatron report 40-55% on far larger models, smaller
// models and batches less). A rule of thumb, so the estimate is a budget, not
// a prediction to the minute; the report compares it with the measurement.
constexpr double kAssumedMfu = 0.40;

// What the rates come from.
struct CostBasis {
  std::string device;                     // "GeForce RTX 3090", the CPU's name; empty: none
  std::optional<DevicePeaks> peaks;       // a GPU from the table
  std::map<GemmCompute, double> ceiling;  // else: GFLOP/s measured per GEMM mode (the CPU)
  std::string source;                     // "--assume-gpu rtx3090", "this device", "measured at start"
  std::string why_none;                   // why there is no estimate (no peaks and no ceiling)
};

struct CellCost {
  double flops_per_step = 0;        // model + recomputed GEMM FLOPs
  std::optional<double> rate_tflops;  // assumed achieved: kAssumedMfu x the peak or ceiling
  std::optional<double> seconds;    // flops_per_step x steps x repeats / rate
  std::string why_none;             // when seconds is empty
};

CellCost estimate_cell_cost(const CellConfig& cfg, const CostBasis& basis);

// One line saying what the estimate assumes ("40% of the dense fp16/bf16/...
// peaks of GeForce RTX 3090 (--assume-gpu rtx3090; NVIDIA ... datasheets)").
std::string cost_assumption(const CostBasis& basis);

// summary.estimated_time of a cell's results (docs/RESULTS.md).
nlohmann::json cell_cost_json(const CellConfig& cfg, const CellCost& cost, const CostBasis& basis);

// h:mm, rounded to the minute; "<0:01" below half a minute, "-" for none.
std::string format_hours_minutes(std::optional<double> seconds);

// The basis for the device a run uses: its row of the GPU table when it has
// one, else the GEMM ceilings measured at start (`ceilings`: the CPU, or a GPU
// the table doesn't know), else none, with why.
CostBasis device_cost_basis(const DeviceInfo& info, const std::map<GemmCompute, double>& ceilings);

// --assume-gpu NAME: the basis, or nullopt with `error` naming the known GPUs.
std::optional<CostBasis> assumed_gpu_basis(const std::string& name, std::string* error);

}  // namespace mpb
