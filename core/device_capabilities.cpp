// The one text form of each capability enum (core/device_capabilities.h).
#include "core/device_capabilities.h"

namespace mpb {

const char* device_kind_name(DeviceKind k) {
  switch (k) {
    case DeviceKind::Cpu: return "cpu";
    case DeviceKind::Cuda: return "cuda";
  }
  return "unknown";
}

const char* feature_name(Feature f) {
  switch (f) {
    case Feature::GemmF32: return "gemm fp32";
    case Feature::GemmTf32: return "gemm tf32";
    case Feature::GemmF16: return "gemm fp16";
    case Feature::GemmBf16: return "gemm bf16";
    case Feature::GemmFp8: return "gemm fp8";
  }
  return "unknown";
}

const char* support_level_name(SupportLevel s) {
  switch (s) {
    case SupportLevel::Native: return "native";
    case SupportLevel::Emulated: return "emulated";
    case SupportLevel::Unsupported: return "unsupported";
  }
  return "unknown";
}

std::string Support::describe() const {
  std::string s = support_level_name(level);
  if (level == SupportLevel::Unsupported && !reason.empty()) s += ": " + reason;
  return s;
}

}  // namespace mpb
