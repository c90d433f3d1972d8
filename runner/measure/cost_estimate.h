// What a run will cost, before it runs (issue 16): per cell, a step's time x steps x
// repeats. On a known GPU (runner/measure/device_peaks.h: the device's own row, or
// --assume-gpu NAME) a step is two terms (issue 44, kGpuStepModel): its GEMM FLOPs (the
// model's, plus what gradient checkpointing recomputes: the hardware does both) at a
// share of the dense peak of the cell's GEMM mode, plus the memory-bound rest (the
// non-GEMM kernels sweeping the stored activations, the optimizer sweeping the
// parameters) at the memory bandwidth. On the CPU: the GEMM FLOPs at kAssumedMfu of the
// GEMM ceiling measured at start. runner --dry-run prints it as
// h:mm beside the cell list; a real run stores it in each cell's summary
// (estimated_time) beside the measured time of its steps, and report.py shows
// the two side by side: that is the check of the estimate. Left out: set-up,
// evaluation and ceiling measurements (and, on the CPU, anything that is not a GEMM).
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

// The GPU step model's constants, fitted to the nine gpu_smoke cells (BERT-base, every
// precision x fusion) measured on an H200 on 2026-11-27 (results/gpu/20261127-0735-smoke-h200:
// the median steps ran 2-3.5x longer than the GEMM-only estimate at 40%). With them each
// cell's estimate is within 8% of its measured median step (tests/runner/measure/
// test_cost_model_h200.cpp checks 25%). They describe this engine on Hopper, not the
// hardware's limits: as the step gets nearer its floor, refit them to a newer lease.
struct GpuStepModel {
  double gemm_share_16bit;   // of the dense fp16/bf16 peak (cuBLASLt at BERT-base's shapes)
  double gemm_share_tf32;    // of the dense TF32 peak (tf32's attention GEMMs run unfused)
  double gemm_share_fp32;    // of the fp32 (CUDA-core) peak
  double bytes_per_activation_fused;    // device-memory bytes moved per stored activation element per
  double bytes_per_activation_unfused;  // step by the non-GEMM kernels (one element a thread: launch-bound)
  double optimizer_bytes_per_param;     // AdamW: fp32 master, m, v read and written, the gradient, a copy
};
constexpr GpuStepModel kGpuStepModel{0.65, 0.40, 0.65, 50.0, 77.0, 30.0};

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
  std::optional<double> rate_tflops;  // assumed achieved GEMM rate: a share of the peak, or of the ceiling
  double gemm_share = 0;            // that share
  double memory_bytes_per_step = 0;   // GPU: the memory-bound rest's bytes (0 on the CPU)
  std::optional<double> step_seconds;  // one step: the GEMMs, plus the memory-bound rest on a GPU
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
