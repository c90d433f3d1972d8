// manifest.json: what machine, software and configuration produced a result
// set (docs/RESULTS.md).
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/device.h"
#include "runner/experiment/config.h"

namespace mpb {

nlohmann::json machine_json();    // hostname, CPU model, cores, flags, memory, OS, kernel, CPU clocks
nlohmann::json libraries_json(const DeviceInfo& dev);
// manifest.device.cpu_kernels: which build of the CPU kernels runs, why, the builds this CPU
// runs, oneDNN's GEMM ISA (docs/RESULTS.md); null for a CUDA device.
nlohmann::json cpu_kernels_json(const DeviceInfo& dev);
std::string utc_now_iso8601();

nlohmann::json build_manifest(const ExperimentConfig& exp, const DeviceInfo& dev,
                              const std::map<std::string, double>& ceiling_gflops);

}  // namespace mpb
