// Energy per training step, from a hardware energy counter read at the edges
// of a repeat's measured steps (issue 11): on a GPU NVML's total-energy
// counter (nvmlDeviceGetTotalEnergyConsumption: millijoules since the driver
// loaded, Volta and later); on the CPU RAPL's package counters in
// /sys/class/powercap (intel-rapl:N, which the kernel's RAPL driver also
// exposes for AMD Zen), summed over packages, wrap-arounds at
// max_energy_range_uj undone. Where neither can be read the repeat records
// energy null with the reason (a VM without RAPL; energy_uj is root-only
// since Linux 5.10; a GPU before Volta).
//
// The per-step figure is the window's mean power times the median step time:
// the energy of a typical step, as samples/s is the speed of a typical step.
// A counter's read needs no synchronization of its own: the edges are the
// callbacks after a step, whose loss read has already waited for the device.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device_capabilities.h"
#include "runner/machine/nvml_library.h"

namespace mpb {

class EnergyMeter {
 public:
  virtual ~EnergyMeter() = default;
  // "nvml_total_energy", "rapl (package-0, package-1)".
  virtual std::string source() const = 0;
  // Joules since some fixed point (only differences mean anything); nullopt
  // when a read failed (the why in *why).
  virtual std::optional<double> joules(std::string* why) = 0;
};

// RAPL's package zones under `powercap_root` (/sys/class/powercap): nullptr,
// with *why, where there are none or they can't be read.
std::unique_ptr<EnergyMeter> open_rapl_meter(const std::string& powercap_root, std::string* why);
// NVML's total-energy counter of the GPU `nvml` opened (borrowed: it must
// outlive the meter; NVML is thread-safe, so the telemetry thread may sample
// meanwhile): nullptr, with *why, where the driver or the GPU lacks it.
std::unique_ptr<EnergyMeter> open_nvml_energy_meter(NvmlLibrary& nvml, std::string* why);

// The meter runs on `kind` use: NVML's counter through `nvml` on Cuda
// (nullptr: no NVML, `nvml_why` says why), RAPL under /sys/class/powercap on
// Cpu; nullptr with *why where there is none. (The runner and doctor.)
std::unique_ptr<EnergyMeter> open_energy_meter(DeviceKind kind, NvmlLibrary* nvml,
                                               const std::string& nvml_why, std::string* why);

// One repeat's reading: the counter after step `first_step` and after the
// last step, with the wall time of each (seconds, any common origin).
struct EnergyWindow {
  int first_step = 0, last_step = 0;  // the window is steps first_step+1 .. last_step
  double joules_begin = 0, joules_end = 0, seconds_begin = 0, seconds_end = 0;
};

// {"source", "steps": [first, last], "joules", "seconds", "mean_power_w",
//  "j_per_step", "samples_per_joule"}: the window's energy and the per-step
// figures for `median_step_ms` and `batch_size`. Pure: tested with made-up windows.
nlohmann::json energy_json(const std::string& source, const EnergyWindow& w, double median_step_ms, int batch_size);

}  // namespace mpb
