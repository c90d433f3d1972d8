// Which build of the hand-written CPU kernels runs: the best ISA path this CPU
// (cpuid, with the OS's register-state support from xgetbv) runs, or the one
// MPB_CPU_ISA names. Internal to the CPU backend; what the runner sees is in
// DeviceInfo (core/device.h) and cpu_device.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_device_impl.h"

namespace mpb::cpu {

enum class CpuIsa {
  Scalar,      // the portable build (x86-64 baseline, or any other CPU): the reference path
  Avx2,        // AVX2 + FMA + F16C (Haswell, Zen 1-3)
  Avx512,      // + AVX-512 F/BW/VL (Skylake-SP, Zen 4-5)
  Avx512Bf16,  // + AVX512-BF16 (Cooper Lake, Sapphire Rapids, Zen 4-5)
};

const char* cpu_isa_name(CpuIsa isa);

// The paths built into this binary, from the plainest up.
std::vector<CpuIsa> built_cpu_isas();

// The CPU features `isa` needs that this CPU (or its OS) lacks, comma-separated;
// empty when it runs the path.
std::string cpu_isa_missing_features(CpuIsa isa);

struct CpuIsaChoice {
  CpuIsa isa = CpuIsa::Scalar;
  std::string source;                // "cpuid" or "MPB_CPU_ISA"
  std::vector<std::string> runnable;  // every built path this CPU runs
};

// MPB_CPU_ISA when it is set and not empty, else the best path this CPU runs.
// Throws DeviceError naming MPB_CPU_ISA when it names an unknown path or one
// this CPU can't run: never a silent fall-back to another path.
CpuIsaChoice choose_cpu_isa();

// The CPU device whose kernel ops are `choice.isa`'s build (throws
// DeviceError when this binary has none).
std::unique_ptr<CpuDevice> make_cpu_device_for(const CpuIsaChoice& choice);

// Each ISA build's factory (backends/cpu/kernels/entry.cpp, under the name
// CMakeLists.txt gives it).
std::unique_ptr<CpuDevice> mpb_cpu_kernels_scalar(const CpuIsaChoice& isa);
#if defined(MPB_CPU_X86_ISAS)
std::unique_ptr<CpuDevice> mpb_cpu_kernels_avx2(const CpuIsaChoice& isa);
std::unique_ptr<CpuDevice> mpb_cpu_kernels_avx512(const CpuIsaChoice& isa);  // avx512_bf16's too
#endif

}  // namespace mpb::cpu
