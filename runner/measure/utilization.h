// Model and hardware FLOP utilisation of a cell (summary.utilization in
// docs/RESULTS.md). MFU counts the FLOPs the model needs (forward and
// backward GEMMs); HFU adds the forward GEMMs that gradient checkpointing
// recomputes: work the hardware does that the model does not need. Both are
// divided by the dense peak of the cell's GEMM mode from a table of known
// GPUs (runner/measure/device_peaks.h); on a CPU or an unknown GPU they are null with
// the reason, and the fractions of the measured GEMM ceiling stand in.
#pragma once

#include <nlohmann/json.hpp>

#include "core/device.h"

namespace mpb {

struct UtilizationInputs {
  const DeviceInfo* device = nullptr;
  GemmCompute gemm = GemmCompute::F32;
  double model_flops_per_step = 0.0;
  double recompute_flops_per_step = 0.0;
  double median_step_ms = 0.0;
  double ceiling_gflops = 0.0;  // measured, this cell's GEMM mode (0: none)
};

// {"model_flops_per_step", "hardware_flops_per_step", "formula",
//  "peak_tflops", "peak_source", "mfu", "hfu", "why" (null or why MFU/HFU are
//  null), "ceiling_fraction_model", "ceiling_fraction_hardware",
//  "warning" (null, or the fp32-faster-than-its-peak sign of hidden TF32)}.
nlohmann::json utilization_json(const UtilizationInputs& in);

}  // namespace mpb
