// One ISA's kernels: included only by the sources in backends/cpu/kernels/,
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

#include "backends/cpu/cpu_kernels.h"

namespace mpb::cpu::MPB_CPU_ISA_NS {

class Kernels final : public CpuKernels {
 public:
  void convert(const Tensor& dst, const Tensor& src) override;

#define MPB_CPU_KERNEL override
#include "backends/cpu/kernels/kernel_list.inc"
#undef MPB_CPU_KERNEL
};

// Kernels::convert as a free function, for the kernels that convert internally.
void convert(const Tensor& dst, const Tensor& src);

}  // namespace mpb::cpu::MPB_CPU_ISA_NS
