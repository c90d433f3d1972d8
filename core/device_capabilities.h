// What a device is and what it can do, as types: DeviceKind (DeviceInfo::kind)
// and Support (Device::supports(Feature)), so callers switch on enums and no
// code compares strings to learn either. The names written into result files
// (manifest.json's device.kind, a cell's device.emulated.gemm and
// precision.gemm_impl) come from device_kind_name and support_level_name, the
// one place each enum becomes text.
#pragma once

#include <string>
#include <utility>

namespace mpb {

enum class DeviceKind { Cpu, Cuda };
const char* device_kind_name(DeviceKind k);  // "cpu" | "cuda"

// What Device::supports is asked about.
enum class Feature {
  GemmF32,   // GemmCompute::F32
  GemmTf32,  // GemmCompute::TF32
  GemmF16,   // GemmCompute::F16
  GemmBf16,  // GemmCompute::BF16
  GemmFp8,   // FP8 operands (GemmFp8Operand)
};
const char* feature_name(Feature f);  // "gemm fp32", ..., "gemm fp8"

// Native: the hardware computes it. Emulated: operands are rounded to the
// format and multiplied in fp32 (what tensor cores compute), so the numbers
// are the format's but the speed is not. Unsupported: this device can't run
// it; `reason` says why (the CUDA backend names the GPU's compute capability).
enum class SupportLevel { Native, Emulated, Unsupported };
const char* support_level_name(SupportLevel s);  // "native" | "emulated" | "unsupported"

struct Support {
  SupportLevel level = SupportLevel::Unsupported;
  std::string reason;  // empty unless unsupported

  static Support native() { return {SupportLevel::Native, {}}; }
  static Support emulated() { return {SupportLevel::Emulated, {}}; }
  static Support unsupported(std::string why) { return {SupportLevel::Unsupported, std::move(why)}; }
  bool runs() const { return level != SupportLevel::Unsupported; }
  // "native", "emulated" or "unsupported: <reason>", for messages.
  std::string describe() const;
};

}  // namespace mpb
