// Picks the device a run uses: --device cpu | cuda | auto. The one place a
// user's text becomes a DeviceKind (parse_device_kind); everywhere else
// compares the enum, and device_kind_name writes it back out.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/device.h"

namespace mpb {

// "cpu" -> Cpu, "cuda" -> Cuda; anything else (including "auto") -> nullopt.
std::optional<DeviceKind> parse_device_kind(const std::string& text);

// cpu: the CPU backend. cuda: the GPU, or DeviceError with a one-line reason
// (including "built without CUDA"). auto: the GPU when usable, else the CPU,
// with the reason for falling back written to *notice. Anything else:
// DeviceError naming the text and the three words.
std::unique_ptr<Device> make_device(const std::string& kind, std::string* notice = nullptr);

// A fresh device of a kind already decided (e.g. the probe's info().kind):
// the CPU backend, or the GPU or DeviceError as make_device("cuda").
std::unique_ptr<Device> make_device(DeviceKind kind);

}  // namespace mpb
