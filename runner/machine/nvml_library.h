// NVML, the driver's management library, loaded with dlopen at run time
// (libnvidia-ml.so.1, part of the driver; MPB_NVML_LIBRARY overrides the path,
// for tests), so the runner links and runs where there is none. One GPU's
// handle and the entry points the runner uses, with NVML's ABI (nvml.h):
// int returns (0 = NVML_SUCCESS), an opaque device handle, unsigned outputs.
// Every entry point but init/shutdown/handle is optional: a driver that lacks
// one gives nullptr, and its readings are "not available", never a failure.
// Users: runner/machine/gpu_telemetry.cpp (samples during a repeat),
// runner/machine/gpu_environment.cpp (the GPU's fixed facts, clock locking) and
// runner/machine/energy_meter.cpp (the total-energy counter).
#pragma once

#include <memory>
#include <string>

namespace mpb {

struct NvmlLibrary {
  using Device = void*;
  struct Memory {
    unsigned long long total, free, used;
  };
  // nvmlClockType_t and the special clock ids of nvmlDeviceSetGpuLockedClocks.
  static constexpr int kClockSm = 1, kClockMem = 2;
  static constexpr unsigned kClockLimitTdp = 0xffffff01u;  // NVML_CLOCK_LIMIT_ID_TDP: the base clock

  void* lib = nullptr;
  Device device = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*by_bus_id)(const char*, Device*) = nullptr;
  int (*by_index)(unsigned, Device*) = nullptr;
  // Samples (gpu_telemetry)
  int (*clock)(Device, int, unsigned*) = nullptr;        // current MHz
  int (*temperature)(Device, int, unsigned*) = nullptr;  // NVML_TEMPERATURE_GPU = 0
  int (*power)(Device, unsigned*) = nullptr;             // milliwatts
  int (*power_limit)(Device, unsigned*) = nullptr;       // milliwatts
  int (*memory)(Device, Memory*) = nullptr;
  int (*reasons)(Device, unsigned long long*) = nullptr;
  int (*total_energy)(Device, unsigned long long*) = nullptr;  // millijoules since the driver loaded (energy_meter)
  // Fixed facts (gpu_environment)
  int (*uuid)(Device, char*, unsigned) = nullptr;
  int (*vbios)(Device, char*, unsigned) = nullptr;
  int (*ecc_mode)(Device, int*, int*) = nullptr;            // current, pending (nvmlEnableState_t)
  int (*mig_mode)(Device, unsigned*, unsigned*) = nullptr;  // current, pending
  int (*persistence)(Device, int*) = nullptr;
  int (*applications_clock)(Device, int, unsigned*) = nullptr;
  int (*max_clock)(Device, int, unsigned*) = nullptr;
  int (*pcie_gen)(Device, unsigned*) = nullptr;
  int (*pcie_width)(Device, unsigned*) = nullptr;
  int (*pcie_max_gen)(Device, unsigned*) = nullptr;
  int (*pcie_max_width)(Device, unsigned*) = nullptr;
  int (*nvlink_state)(Device, unsigned, int*) = nullptr;  // link, isActive
  // Clock locking (--lock-clocks)
  int (*lock_gpu_clocks)(Device, unsigned, unsigned) = nullptr;  // min, max MHz (or kClockLimit* ids)
  int (*reset_gpu_clocks)(Device) = nullptr;

  // NVML for the GPU at `pci_bus_id` ("00000000:3B:00.0"; empty: GPU 0);
  // nullptr, with *why set, when NVML or the device cannot be opened.
  static std::unique_ptr<NvmlLibrary> open(const std::string& pci_bus_id, std::string* why);
  NvmlLibrary() = default;
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;
  ~NvmlLibrary();
};

// "NVML error 4 (no permission)": the return codes users meet, by name.
std::string nvml_error_text(int rc);

}  // namespace mpb
