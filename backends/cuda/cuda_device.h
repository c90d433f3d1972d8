// The CUDA backend's public entry points. Plain C++ (no CUDA headers), so the
// runner and the tests can include it whether or not they are compiled by nvcc.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"

namespace mpb {

// Why no usable CUDA device 0 exists ("no CUDA device: <reason>"), or nullopt
// when one does. Never throws. Usable means: the driver and runtime load, a
// device is present, and its compute capability is one this build targets
// (>= 8.0).
std::optional<std::string> cuda_unavailable_reason();

// The CUDA device `ordinal`: one stream, cuBLASLt GEMMs, the element-wise ops
// as CUDA kernels over the shared scalar cores (ops/*.h). Throws DeviceError
// with a one-line reason when the device can't be used (for ordinal 0 the
// message is exactly cuda_unavailable_reason()).
//
// Ops are asynchronous on the device's stream; functions that return host
// values synchronise. Errors found on the device by asynchronous ops (an
// out-of-range label in softmax_xent_backward) are raised as DeviceError by
// the next synchronising call (synchronize(), download(), or an op returning a
// host value). Use a device from one host thread at a time.
std::unique_ptr<Device> make_cuda_device(int ordinal = 0);

// The CUDA libraries this build links, readable without a GPU (for the
// manifest of a CPU run): cuda_runtime, cuda_driver ("none" when no driver is
// installed), cublasLt, cublas, cudnn, cudnn_frontend (the pinned version
// whose cuDNN SDPA graphs run fp16/bf16 fused attention, or "absent (...)":
// then the hand-written kernel runs it). Never throws; a failed query is omitted.
std::vector<std::pair<std::string, std::string>> cuda_library_versions();

}  // namespace mpb
