// This ISA's kernel table, under the name CMakeLists.txt gives it
// (MPB_CPU_KERNELS_ENTRY: mpb_cpu_kernels_scalar, mpb_cpu_kernels_avx2, ...).
#include "backends/cpu/kernels/kernels.h"

#ifndef MPB_CPU_KERNELS_ENTRY
#error "MPB_CPU_KERNELS_ENTRY names this ISA's table (CMakeLists.txt)"
#endif

extern "C" mpb::cpu::CpuKernels* MPB_CPU_KERNELS_ENTRY() {
  // Stateless: one shared object serves every CpuDevice and thread.
  static mpb::cpu::MPB_CPU_ISA_NS::Kernels kernels;
  return &kernels;
}
