// CpuKernels: the hand-written CPU kernels as one table of virtual calls, so
// that one binary carries them built for several ISAs and picks one at run time
// (backends/cpu/cpu_isa.cpp). Each ISA's table is the same sources
// (backends/cpu/kernels/) compiled with that ISA's flags, in its own namespace;
// CMakeLists.txt builds one per ISA it knows the compiler can target.
#pragma once

#include <cstdint>
#include <vector>

#include "core/device.h"

namespace mpb::cpu {

class CpuKernels {
 public:
  virtual ~CpuKernels() = default;

  // dst[i] = src[i] converted (any float dtypes, same element count; unchecked):
  // the loop behind cast(), for the ops that convert internally (the GEMM's
  // operand widening, the optimizers' parameter copies).
  virtual void convert(const Tensor& dst, const Tensor& src) = 0;

#define MPB_CPU_KERNEL = 0
#include "backends/cpu/kernels/kernel_list.inc"
#undef MPB_CPU_KERNEL
};

}  // namespace mpb::cpu

// Each ISA's table (backends/cpu/kernels/entry.cpp): a static object, never null.
// extern "C" so the names are the plain symbols CMakeLists.txt names them by.
extern "C" mpb::cpu::CpuKernels* mpb_cpu_kernels_scalar();
#if defined(MPB_CPU_X86_ISAS)
extern "C" mpb::cpu::CpuKernels* mpb_cpu_kernels_avx2();
extern "C" mpb::cpu::CpuKernels* mpb_cpu_kernels_avx512();
extern "C" mpb::cpu::CpuKernels* mpb_cpu_kernels_avx512_bf16();
#endif
