// This ISA's CPU device, made by the function CMakeLists.txt names
// (MPB_CPU_KERNELS_ENTRY: mpb_cpu_kernels_scalar, mpb_cpu_kernels_avx2, ...;
// declared in backends/cpu/cpu_isa.h).
#include <memory>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/kernels.h"

#ifndef MPB_CPU_KERNELS_ENTRY
#error "MPB_CPU_KERNELS_ENTRY names this ISA's device factory (CMakeLists.txt)"
#endif

namespace mpb::cpu {

std::unique_ptr<CpuDevice> MPB_CPU_KERNELS_ENTRY(const CpuIsaChoice& isa) {
  return std::make_unique<MPB_CPU_ISA_NS::Kernels>(isa);
}

}  // namespace mpb::cpu
