// The GPU's fixed facts for the manifest, from NVML (issue 18): the card
// (UUID, VBIOS), its modes (ECC, MIG, persistence), its clocks (application
// and maximum), and its links (PCIe generation and width, active NVLinks).
// Two results on "the same GPU" with different VBIOS, ECC or PCIe width are
// not the same measurement (JAX-Toolbox#414, cugraph#1583); compare.py names
// the fields that differ. And --lock-clocks: the SM clock held at the base
// clock or a given MHz for the run, and released after it.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "runner/machine/nvml_library.h"

namespace mpb {

// manifest.device.gpu.nvml: {"uuid", "vbios", "ecc": {current, pending},
// "mig": {current, pending}, "persistence_mode", "applications_clocks_mhz":
// {sm, mem}, "max_clocks_mhz": {sm, mem}, "pcie": {generation, width,
// max_generation, max_width}, "nvlink_active_links"}. A fact the driver
// can't give is null (a consumer GPU has no ECC, MIG or NVLink).
nlohmann::json gpu_environment_json(const NvmlLibrary& nvml);

// --lock-clocks VALUE: "base" (the GPU's base clock, what MLPerf-style runs
// lock to: steady under power and heat) or an SM clock in MHz.
struct ClockLockRequest {
  bool base = false;
  unsigned mhz = 0;
  std::string text() const;  // "base" | "1755 MHz"
};
// nullopt, with *error set, for anything else.
std::optional<ClockLockRequest> parse_clock_lock(const std::string& value, std::string* error);

// Holds the SM clock locked from construction to destruction
// (nvmlDeviceSetGpuLockedClocks / nvmlDeviceResetGpuLockedClocks). Locking
// needs root or an unrestricted clock policy: a refusal throws
// std::runtime_error with NVML's reason and how to allow it, because a run
// that asked for locked clocks must not silently run with free ones.
class GpuClockLock {
 public:
  GpuClockLock(NvmlLibrary& nvml, const ClockLockRequest& request);
  ~GpuClockLock();
  GpuClockLock(const GpuClockLock&) = delete;
  GpuClockLock& operator=(const GpuClockLock&) = delete;
  // manifest.device.clock_lock: {"requested", "applied", "sm_clock_mhz_after_lock"}.
  nlohmann::json to_json() const;

 private:
  NvmlLibrary& nvml_;
  ClockLockRequest request_;
  double sm_mhz_after_ = -1;
};

}  // namespace mpb
