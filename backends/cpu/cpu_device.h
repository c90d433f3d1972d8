// The CPU backend: oneDNN matmul for GEMMs (primitives cached per shape),
// OpenMP loops over the shared scalar cores for everything else.
#pragma once

#include <memory>

#include "core/device.h"

namespace mpb {

std::unique_ptr<Device> make_cpu_device();

}  // namespace mpb
