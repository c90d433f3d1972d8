// One ISA's kernels, the CPU device of that ISA: the groups of
// core/device_ops.inc that backends/cpu/cpu_op_owner.h gives to the kernels,
// on top of CpuDevice. Included only by the sources in backends/cpu/kernels/,
// which CMakeLists.txt compiles once per ISA with that ISA's flags and
// MPB_CPU_ISA_NS set to a namespace of its own (isa_scalar, isa_avx2, ...), so
// the copies never share a symbol. The scalar cores they call (ops/*.h,
// core/numerics.h) open an inline namespace of the same name
// (core/isa_namespace.h): an inline function the AVX-512 copy compiled can
// never stand in for the AVX2 copy's at link time.
#pragma once

#ifndef MPB_CPU_ISA_NS
#error "backends/cpu/kernels/ is compiled once per ISA with MPB_CPU_ISA_NS defined (CMakeLists.txt)"
#endif

#include "backends/cpu/cpu_device_impl.h"

namespace mpb::cpu::MPB_CPU_ISA_NS {

class Kernels final : public CpuDevice {
 public:
  using CpuDevice::CpuDevice;
  void convert(const Tensor& dst, const Tensor& src) override;

 protected:
  // Each in the file of its group: backends/cpu/kernels/<group>.cpp
  // (label_positions: its own file).
#define MPB_DEVICE_OP(group, ret, name, params, args) MPB_CPU_OWNER_##group(, ret name##_impl params override;)
#include "core/device_ops.inc"
#undef MPB_DEVICE_OP
};

// Kernels::convert as a free function, for the kernels that convert internally.
void convert(const Tensor& dst, const Tensor& src);

}  // namespace mpb::cpu::MPB_CPU_ISA_NS
