// Picks the device a run uses: --device cpu | cuda | auto.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/device.h"

namespace mpb {

// cpu: the CPU backend. cuda: the GPU, or DeviceError with a one-line reason
// (including "built without CUDA"). auto: the GPU when usable, else the CPU,
// with the reason for falling back written to *notice.
std::unique_ptr<Device> make_device(const std::string& kind, std::string* notice = nullptr);

}  // namespace mpb
