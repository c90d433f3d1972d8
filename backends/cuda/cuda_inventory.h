// What CUDA sees on this machine, for `runner doctor`: the driver and runtime,
// and every GPU with its name, compute capability, memory and clocks. Plain
// C++ (no CUDA headers), like cuda_device.h. Never throws: a failed query is
// recorded as the reason it failed, so a machine without a driver still gets
// a complete answer.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace mpb {

struct CudaGpuInfo {
  int ordinal = 0;
  std::string name;
  std::string compute_capability;  // "9.0"
  size_t memory_bytes = 0;
  std::optional<size_t> free_bytes;      // cudaMemGetInfo (creates a context on the device)
  int multiprocessors = 0;
  std::optional<int> peak_clock_mhz;     // the SM clock's peak (not the current clock)
  std::optional<bool> ecc;
  std::vector<std::string> problems;     // failed queries, one line each
};

struct CudaInventory {
  std::optional<std::string> error;  // cudaGetDeviceCount's failure ("no CUDA-capable device", no driver)
  int device_count = 0;
  std::string runtime_version;       // "13.0"
  std::string driver_version;        // the CUDA version the driver supports, "none" without a driver
  std::vector<CudaGpuInfo> gpus;
  std::vector<std::string> problems;  // failed version queries
};

CudaInventory cuda_inventory();

}  // namespace mpb
