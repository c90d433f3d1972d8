#include "runner/machine/device_factory.h"

#include "backends/cpu/cpu_device.h"
#ifdef MPB_HAVE_CUDA
#include "backends/cuda/cuda_device.h"
#endif

namespace mpb {

namespace {
std::optional<std::string> why_no_cuda() {
#ifdef MPB_HAVE_CUDA
  return cuda_unavailable_reason();
#else
  return std::string("no CUDA device: this runner was built without the CUDA backend");
#endif
}
}  // namespace

std::optional<DeviceKind> parse_device_kind(const std::string& text) {
  if (text == "cpu") return DeviceKind::Cpu;
  if (text == "cuda") return DeviceKind::Cuda;
  return std::nullopt;
}

std::unique_ptr<Device> make_device(DeviceKind kind) {
  if (kind == DeviceKind::Cpu) return make_cpu_device();
  if (auto reason = why_no_cuda()) throw DeviceError(*reason);
#ifdef MPB_HAVE_CUDA
  return make_cuda_device(0);
#else
  return nullptr;  // unreachable: why_no_cuda() always has a reason without the CUDA backend
#endif
}

std::unique_ptr<Device> make_device(const std::string& kind, std::string* notice) {
  if (const std::optional<DeviceKind> k = parse_device_kind(kind)) return make_device(*k);
  if (kind == "auto") {
    if (auto reason = why_no_cuda()) {
      if (notice) *notice = *reason + "; using the CPU device";
      return make_cpu_device();
    }
#ifdef MPB_HAVE_CUDA
    return make_cuda_device(0);
#endif
  }
  throw DeviceError("unknown device '" + kind + "' (expected cpu, cuda or auto)");
}

}  // namespace mpb
