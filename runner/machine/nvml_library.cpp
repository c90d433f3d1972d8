#include "runner/machine/nvml_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <initializer_list>

namespace mpb {

namespace {

template <class F>
bool load(void* lib, F& fn, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (void* p = dlsym(lib, n)) {
      fn = reinterpret_cast<F>(p);
      return true;
    }
  return false;
}

}  // namespace

std::string nvml_error_text(int rc) {
  const char* name = "";
  switch (rc) {  // nvmlReturn_t
    case 1: name = " (not initialized)"; break;
    case 2: name = " (invalid argument)"; break;
    case 3: name = " (not supported)"; break;
    case 4: name = " (no permission)"; break;
    case 6: name = " (not found)"; break;
    case 9: name = " (driver not loaded)"; break;
    case 15: name = " (GPU is lost)"; break;
    case 999: name = " (unknown error)"; break;
    default: break;
  }
  return "NVML error " + std::to_string(rc) + name;
}

NvmlLibrary::~NvmlLibrary() {
  if (shutdown && device) shutdown();
  if (lib) dlclose(lib);
}

std::unique_ptr<NvmlLibrary> NvmlLibrary::open(const std::string& pci_bus_id, std::string* why) {
  const char* path = std::getenv("MPB_NVML_LIBRARY");
  auto api = std::make_unique<NvmlLibrary>();
  api->lib = dlopen(path && *path ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!api->lib) {
    *why = std::string("NVML not available (") + dlerror() + ")";
    return nullptr;
  }
  const bool core = load(api->lib, api->init, {"nvmlInit_v2", "nvmlInit"}) &&
                    load(api->lib, api->shutdown, {"nvmlShutdown"}) &&
                    load(api->lib, api->by_index, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  if (!core) {
    *why = "NVML lacks nvmlInit_v2 / nvmlShutdown / nvmlDeviceGetHandleByIndex";
    return nullptr;
  }
  void* l = api->lib;
  load(l, api->by_bus_id, {"nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId"});
  load(l, api->clock, {"nvmlDeviceGetClockInfo"});
  load(l, api->temperature, {"nvmlDeviceGetTemperature"});
  load(l, api->power, {"nvmlDeviceGetPowerUsage"});
  load(l, api->power_limit, {"nvmlDeviceGetEnforcedPowerLimit"});
  load(l, api->memory, {"nvmlDeviceGetMemoryInfo"});
  // NVML 13 renamed "throttle" reasons to "event" reasons; older drivers have the old name only.
  load(l, api->reasons, {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
  load(l, api->total_energy, {"nvmlDeviceGetTotalEnergyConsumption"});
  load(l, api->uuid, {"nvmlDeviceGetUUID"});
  load(l, api->vbios, {"nvmlDeviceGetVbiosVersion"});
  load(l, api->ecc_mode, {"nvmlDeviceGetEccMode"});
  load(l, api->mig_mode, {"nvmlDeviceGetMigMode"});
  load(l, api->persistence, {"nvmlDeviceGetPersistenceMode"});
  load(l, api->applications_clock, {"nvmlDeviceGetApplicationsClock"});
  load(l, api->max_clock, {"nvmlDeviceGetMaxClockInfo"});
  load(l, api->pcie_gen, {"nvmlDeviceGetCurrPcieLinkGeneration"});
  load(l, api->pcie_width, {"nvmlDeviceGetCurrPcieLinkWidth"});
  load(l, api->pcie_max_gen, {"nvmlDeviceGetMaxPcieLinkGeneration"});
  load(l, api->pcie_max_width, {"nvmlDeviceGetMaxPcieLinkWidth"});
  load(l, api->nvlink_state, {"nvmlDeviceGetNvLinkState"});
  load(l, api->lock_gpu_clocks, {"nvmlDeviceSetGpuLockedClocks"});
  load(l, api->reset_gpu_clocks, {"nvmlDeviceResetGpuLockedClocks"});
  if (const int rc = api->init(); rc != 0) {
    *why = "nvmlInit failed (" + nvml_error_text(rc) + ")";
    return nullptr;
  }
  Device dev = nullptr;
  int rc = -1;
  if (api->by_bus_id && !pci_bus_id.empty()) rc = api->by_bus_id(pci_bus_id.c_str(), &dev);
  if (rc != 0 && pci_bus_id.empty()) rc = api->by_index(0, &dev);
  if (rc != 0 || !dev) {
    api->shutdown();
    *why = "NVML has no device at PCI bus id '" + pci_bus_id + "' (" + nvml_error_text(rc) + ")";
    return nullptr;
  }
  api->device = dev;
  return api;
}

}  // namespace mpb
