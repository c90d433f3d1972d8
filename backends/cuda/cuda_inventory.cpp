#include "backends/cuda/cuda_inventory.h"

#include <cuda_runtime.h>

#include <exception>

namespace mpb {

namespace {

// "13.0" from 13000 (the cudaRuntimeGetVersion / cudaDriverGetVersion encoding).
std::string version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

// Records a failed call in `problems` and clears the runtime's sticky last
// error, so one failed query does not fail the next call. True on success.
bool ok(cudaError_t err, const char* call, std::vector<std::string>& problems) {
  if (err == cudaSuccess) return true;
  (void)cudaGetLastError();
  problems.push_back(std::string(call) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
  return false;
}

CudaGpuInfo describe(int ordinal) {
  CudaGpuInfo g;
  g.ordinal = ordinal;
  cudaDeviceProp prop{};
  if (ok(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties", g.problems)) {
    g.name = prop.name;
    g.compute_capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
    g.memory_bytes = prop.totalGlobalMem;
    g.multiprocessors = prop.multiProcessorCount;
  }
  int khz = 0;
  if (ok(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, ordinal), "cudaDeviceGetAttribute(ClockRate)",
         g.problems))
    g.peak_clock_mhz = khz / 1000;
  int ecc = 0;
  if (ok(cudaDeviceGetAttribute(&ecc, cudaDevAttrEccEnabled, ordinal), "cudaDeviceGetAttribute(EccEnabled)",
         g.problems))
    g.ecc = ecc != 0;
  size_t free_b = 0, total_b = 0;
  if (ok(cudaSetDevice(ordinal), "cudaSetDevice", g.problems) &&
      ok(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo", g.problems))
    g.free_bytes = free_b;
  return g;
}

}  // namespace

CudaInventory cuda_inventory() {
  CudaInventory inv;
  try {
    int runtime = 0, driver = 0;
    if (ok(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion", inv.problems))
      inv.runtime_version = version_string(runtime);
    if (ok(cudaDriverGetVersion(&driver), "cudaDriverGetVersion", inv.problems))
      inv.driver_version = driver > 0 ? version_string(driver) : "none";  // 0: no driver installed
    const cudaError_t err = cudaGetDeviceCount(&inv.device_count);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      inv.device_count = 0;
      inv.error = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
      return inv;
    }
    for (int i = 0; i < inv.device_count; ++i) inv.gpus.push_back(describe(i));
    // describe() made each device current in turn; device 0 is the one the runner uses.
    if (inv.device_count > 0) ok(cudaSetDevice(0), "cudaSetDevice(0)", inv.problems);
  } catch (const std::exception& e) {  // std::bad_alloc from the strings, in theory
    inv.error = e.what();
  }
  return inv;
}

}  // namespace mpb
