// GPU telemetry per measured window, through NVML: SM and memory clocks,
// temperature, power and the enforced power limit, device memory in use, and
// the reasons the driver gives for holding clocks down (power cap, thermal
// slowdown, ...). Throttling costs up to 15% mid-run (flashinfer#2899); a
// result must say when it happened, and never drop the samples
// (nvbench#206). NVML is loaded at run time (runner/machine/nvml_library.h), so the
// runner links and runs where there is none.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/machine/nvml_library.h"

namespace mpb {

// NVML's clock event ("throttle") reason bits (nvml.h, stable since NVML 7).
namespace nvml_reason {
constexpr unsigned long long kGpuIdle = 0x1, kApplicationsClocks = 0x2, kSwPowerCap = 0x4, kHwSlowdown = 0x8,
                             kSyncBoost = 0x10, kSwThermal = 0x20, kHwThermal = 0x40, kHwPowerBrake = 0x80,
                             kDisplayClock = 0x100;
// The reasons that mean the GPU ran slower than it could for this work.
constexpr unsigned long long kSlowing = kSwPowerCap | kHwSlowdown | kSwThermal | kHwThermal | kHwPowerBrake;
}  // namespace nvml_reason

struct GpuSample {
  double sm_mhz = -1, mem_mhz = -1, temperature_c = -1, power_w = -1, power_limit_w = -1;
  double memory_used_bytes = -1;  // -1: not readable
  unsigned long long reasons = 0;
};

// {"samples", "interval_ms", "sm_clock_mhz": {min, median, max}, "mem_clock_mhz",
//  "temperature_c": {median, max}, "power_w": {median, max}, "power_limit_w",
//  "memory_used_peak_bytes", "throttled_fraction", "throttle_reasons": [names],
//  "throttled": bool}. Pure: tested with made-up samples.
nlohmann::json summarize_gpu_samples(const std::vector<GpuSample>& samples, double interval_ms);

// Names of the reason bits set in `reasons` ("sw_power_cap", "hw_thermal_slowdown", ...).
std::vector<std::string> nvml_reason_names(unsigned long long reasons);

class GpuTelemetry {
 public:
  // NVML for the GPU at `pci_bus_id` ("00000000:3B:00.0"); nullptr, with
  // *why set, when NVML or the device cannot be opened.
  static std::unique_ptr<GpuTelemetry> open(const std::string& pci_bus_id, std::string* why);
  ~GpuTelemetry();
  GpuTelemetry(const GpuTelemetry&) = delete;
  GpuTelemetry& operator=(const GpuTelemetry&) = delete;

  // Sample every `interval_ms` on a thread of its own from begin() to end().
  void begin(double interval_ms = 100.0);
  nlohmann::json end();  // summarize_gpu_samples over the window

  // The NVML handle, for the GPU's fixed facts and clock locking
  // (runner/machine/gpu_environment.h). Not to be used while sampling.
  NvmlLibrary& nvml() { return *api_; }

 private:
  explicit GpuTelemetry(std::unique_ptr<NvmlLibrary> api);
  GpuSample sample() const;

  std::unique_ptr<NvmlLibrary> api_;
  double interval_ms_ = 100.0;
  std::atomic<bool> running_{false};
  std::mutex mu_;
  std::vector<GpuSample> samples_;
  std::thread thread_;
};

}  // namespace mpb
