// The CPU backend: oneDNN matmul for GEMMs (primitives cached per shape),
// OpenMP loops over the shared scalar cores for everything else.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/device.h"

namespace mpb {

// The CPU device, running the build of the hand-written kernels that
// MPB_CPU_ISA names, else the widest this CPU runs (DeviceInfo says which).
// Throws DeviceError when MPB_CPU_ISA names one it can't run.
std::unique_ptr<Device> make_cpu_device();

// Why make_cpu_device() would throw (a bad MPB_CPU_ISA), or nullopt.
std::optional<std::string> cpu_device_unavailable();

}  // namespace mpb
