// CPU feature detection and the choice of kernel build (backends/cpu/cpu_isa.h).
// Compiled for the baseline ISA like the rest of the binary: it must run, and
// say what is missing, on any x86-64 CPU.
#include "backends/cpu/cpu_isa.h"

#include <cstdint>
#include <cstdlib>

#include "core/device.h"

#if defined(MPB_CPU_X86_ISAS)
#include <cpuid.h>
#endif

namespace mpb::cpu {

namespace {

#if defined(MPB_CPU_X86_ISAS)
struct X86Features {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512bf16 = false;
};

// cpuid says what the CPU has; xgetbv says which register state the OS saves
// on a context switch. A feature counts only with both (an OS that does not
// save the ZMM registers makes AVX-512 unusable however the CPU reports it).
X86Features detect() {
  X86Features f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1u, avx = (c >> 28) & 1u;
  const bool fma = (c >> 12) & 1u, f16c = (c >> 29) & 1u;
  uint64_t xcr0 = 0;
  if (osxsave) {
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
  }
  const bool os_ymm = (xcr0 & 0x6u) == 0x6u;     // SSE and AVX state
  const bool os_zmm = (xcr0 & 0xE6u) == 0xE6u;   // + opmask, ZMM_Hi256, Hi16_ZMM
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  const bool avx2 = (b >> 5) & 1u, avx512f = (b >> 16) & 1u;
  const bool avx512bw = (b >> 30) & 1u, avx512vl = (b >> 31) & 1u;
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  const bool leaf7_1 = a >= 1 && __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1);
  const bool avx512bf16 = leaf7_1 && ((a1 >> 5) & 1u);
  f.avx2 = avx && avx2 && os_ymm;
  f.fma = avx && fma && os_ymm;
  f.f16c = avx && f16c && os_ymm;
  f.avx512f = avx512f && os_zmm;
  f.avx512bw = avx512bw && os_zmm;
  f.avx512vl = avx512vl && os_zmm;
  f.avx512bf16 = avx512bf16 && os_zmm;
  return f;
}

const X86Features& features() {
  static const X86Features f = detect();
  return f;
}
#endif

constexpr CpuIsa kAll[] = {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Avx512Bf16};

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar: return "scalar";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
    case CpuIsa::Avx512Bf16: return "avx512_bf16";
  }
  return "?";
}

std::vector<CpuIsa> built_cpu_isas() {
#if defined(MPB_CPU_X86_ISAS)
  return {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Avx512Bf16};
#else
  return {CpuIsa::Scalar};
#endif
}

std::string cpu_isa_missing_features(CpuIsa isa) {
  std::string missing;
  const auto need = [&missing](bool have, const char* name) {
    if (!have) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  if (isa == CpuIsa::Scalar) return missing;
#if defined(MPB_CPU_X86_ISAS)
  const X86Features& f = features();
  need(f.avx2, "avx2");
  need(f.fma, "fma");
  need(f.f16c, "f16c");
  if (isa == CpuIsa::Avx512 || isa == CpuIsa::Avx512Bf16) {
    need(f.avx512f, "avx512f");
    need(f.avx512bw, "avx512bw");
    need(f.avx512vl, "avx512vl");
  }
  if (isa == CpuIsa::Avx512Bf16) need(f.avx512bf16, "avx512_bf16");
#else
  need(false, "an x86-64 CPU (this build has only the scalar path)");
#endif
  return missing;
}

CpuIsaChoice choose_cpu_isa() {
  CpuIsaChoice choice;
  for (CpuIsa isa : built_cpu_isas())
    if (cpu_isa_missing_features(isa).empty()) choice.runnable.emplace_back(cpu_isa_name(isa));
  const char* env = std::getenv("MPB_CPU_ISA");
  if (env == nullptr || *env == '\0') {
    for (CpuIsa isa : built_cpu_isas())
      if (cpu_isa_missing_features(isa).empty()) choice.isa = isa;  // the last runnable is the widest
    choice.source = "cpuid";
    return choice;
  }
  const std::string want = env;
  std::string names;
  for (CpuIsa isa : kAll) {
    names += (names.empty() ? "" : ", ") + std::string(cpu_isa_name(isa));
    if (want != cpu_isa_name(isa)) continue;
    bool built = false;
    for (CpuIsa b : built_cpu_isas()) built = built || b == isa;
    if (!built) throw DeviceError("MPB_CPU_ISA=" + want + ": this binary has no " + want + " build of the CPU kernels");
    const std::string missing = cpu_isa_missing_features(isa);
    if (!missing.empty()) {
      std::string runs;
      for (const std::string& r : choice.runnable) runs += (runs.empty() ? "" : ", ") + r;
      throw DeviceError("MPB_CPU_ISA=" + want + ": this CPU lacks " + missing + " (it runs " + runs + ")");
    }
    choice.isa = isa;
    choice.source = "MPB_CPU_ISA";
    return choice;
  }
  throw DeviceError("MPB_CPU_ISA=" + want + ": unknown CPU kernel path (one of " + names + ", or unset for the best)");
}

std::unique_ptr<CpuDevice> make_cpu_device_for(const CpuIsaChoice& choice) {
  switch (choice.isa) {
    case CpuIsa::Scalar: return mpb_cpu_kernels_scalar(choice);
#if defined(MPB_CPU_X86_ISAS)
    case CpuIsa::Avx2: return mpb_cpu_kernels_avx2(choice);
    case CpuIsa::Avx512: return mpb_cpu_kernels_avx512(choice);
    // The same code as avx512 (CMakeLists.txt): that build, under this choice's name.
    case CpuIsa::Avx512Bf16: return mpb_cpu_kernels_avx512(choice);
#endif
    default: break;
  }
  throw DeviceError(std::string("cpu: no ") + cpu_isa_name(choice.isa) + " build of the CPU kernels in this binary");
}

}  // namespace mpb::cpu
