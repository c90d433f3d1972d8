// Dense peak FLOP rates of known GPUs, per GEMM compute mode, for model and
// hardware FLOP utilisation (runner/measure/utilization.h). Dense only, never the
// "with sparsity" figures datasheets print beside them (fms-fsdp#89), at
// boost clock, tensor-core modes with fp32 accumulation (how mpbench's GEMMs
// accumulate). A GPU that is not in the table gets no MFU: guessing a peak
// gives numbers that look precise and are not (llm.c#796); the measured GEMM
// ceiling (ceiling_fraction) stands in for it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/device.h"

namespace mpb {

struct DevicePeaks {
  std::string model;   // the table's row, e.g. "H100 SXM"
  std::string source;  // where the numbers come from
  // TFLOP/s; nullopt where the mode has no tensor-core path (V100, T4: tf32, bf16).
  std::optional<double> fp32, tf32, fp16, bf16;
  double bandwidth_tbs = 0;  // device memory bandwidth, TB/s (datasheet): the cost estimate's memory term
  std::optional<double> tflops(GemmCompute mode) const;
};

// The row for a CUDA device name as cudaGetDeviceProperties spells it
// ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "Tesla T4"); nullopt
// when none matches.
std::optional<DevicePeaks> known_gpu_peaks(const std::string& device_name);

// The row a short name picks, for runner --assume-gpu: "rtx3090", "a100",
// "h100", "h100-pcie", "l4", "rtx4090", ... (known_gpu_names), compared
// without case, blanks, '-' or '_' ("RTX 3090" and "rtx_3090" are rtx3090).
std::optional<DevicePeaks> gpu_peaks_by_name(const std::string& name);
std::vector<std::string> known_gpu_names();  // in the table's order

}  // namespace mpb
