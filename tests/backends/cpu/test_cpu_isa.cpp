// backends/cpu/cpu_isa.h: which build of the CPU kernels runs. The feature
// detection (cpuid + xgetbv) is checked against the kernel's own view in
// /proc/cpuinfo; MPB_CPU_ISA picks a build or fails loudly, never falls back;
// and the element-wise kernels, which round once per element with no sums to
// reorder, give the same bits on every build this CPU runs (the op-check table,
// run per build by the isa.opcheck_* tests, checks everything else against
// float64).
#include "backends/cpu/cpu_isa.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "core/device.h"

namespace mpb::cpu {
namespace {

// The flags line of /proc/cpuinfo (Linux lists a flag only if the CPU has it
// and the kernel enabled its register state): empty where there is none.
std::set<std::string> proc_cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

// Sets MPB_CPU_ISA for one scope and restores what was there.
class ScopedIsaEnv {
 public:
  explicit ScopedIsaEnv(const char* value) {
    if (const char* old = std::getenv("MPB_CPU_ISA")) old_ = old, had_ = true;
    if (value) setenv("MPB_CPU_ISA", value, 1);
    else unsetenv("MPB_CPU_ISA");
  }
  ~ScopedIsaEnv() {
    if (had_) setenv("MPB_CPU_ISA", old_.c_str(), 1);
    else unsetenv("MPB_CPU_ISA");
  }
  ScopedIsaEnv(const ScopedIsaEnv&) = delete;
  ScopedIsaEnv& operator=(const ScopedIsaEnv&) = delete;

 private:
  std::string old_;
  bool had_ = false;
};

std::vector<CpuIsa> runnable_isas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : built_cpu_isas())
    if (cpu_isa_missing_features(isa).empty()) out.push_back(isa);
  return out;
}

TEST(CpuIsa, DetectionAgreesWithProcCpuinfo) {
  const std::set<std::string> flags = proc_cpu_flags();
  if (flags.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  const auto has = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (!flags.count(n)) return false;
    return true;
  };
  EXPECT_TRUE(cpu_isa_missing_features(CpuIsa::Scalar).empty());
#if defined(MPB_CPU_X86_ISAS)
  EXPECT_EQ(cpu_isa_missing_features(CpuIsa::Avx2).empty(), has({"avx2", "fma", "f16c"}));
  EXPECT_EQ(cpu_isa_missing_features(CpuIsa::Avx512).empty(),
            has({"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl"}));
  EXPECT_EQ(cpu_isa_missing_features(CpuIsa::Avx512Bf16).empty(),
            has({"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16"}));
#endif
}

TEST(CpuIsa, UnsetPicksTheWidestRunnableBuild) {
  ScopedIsaEnv env(nullptr);
  const CpuIsaChoice c = choose_cpu_isa();
  EXPECT_EQ(c.isa, runnable_isas().back());
  EXPECT_EQ(c.source, "cpuid");
  EXPECT_EQ(c.runnable.size(), runnable_isas().size());
  const std::unique_ptr<Device> dev = make_cpu_device();
  EXPECT_EQ(dev->info().kernel_isa, cpu_isa_name(c.isa));
  EXPECT_EQ(dev->info().kernel_isa_source, "cpuid");
  EXPECT_EQ(dev->info().gemm_isa.rfind("onednn ", 0), 0u) << dev->info().gemm_isa;
}

TEST(CpuIsa, EnvironmentPicksEachRunnableBuild) {
  for (CpuIsa isa : runnable_isas()) {
    ScopedIsaEnv env(cpu_isa_name(isa));
    const CpuIsaChoice c = choose_cpu_isa();
    EXPECT_EQ(c.isa, isa);
    EXPECT_EQ(c.source, "MPB_CPU_ISA");
    EXPECT_FALSE(cpu_device_unavailable().has_value());
    EXPECT_EQ(make_cpu_device()->info().kernel_isa, cpu_isa_name(isa));
  }
}

TEST(CpuIsa, UnknownOrUnrunnableBuildIsAnErrorNamingTheVariable) {
  {
    ScopedIsaEnv env("avx9000");
    try {
      choose_cpu_isa();
      FAIL() << "MPB_CPU_ISA=avx9000 was accepted";
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("MPB_CPU_ISA=avx9000: unknown"), std::string::npos) << e.what();
    }
    ASSERT_TRUE(cpu_device_unavailable().has_value());
    EXPECT_THROW(make_cpu_device(), DeviceError);
  }
  int lacking = 0;
  for (CpuIsa isa : built_cpu_isas()) {
    const std::string missing = cpu_isa_missing_features(isa);
    if (missing.empty()) continue;
    ++lacking;
    ScopedIsaEnv env(cpu_isa_name(isa));
    const std::optional<std::string> why = cpu_device_unavailable();
    ASSERT_TRUE(why.has_value()) << cpu_isa_name(isa);
    EXPECT_NE(why->find("this CPU lacks " + missing), std::string::npos) << *why;
  }
  if (lacking == 0) std::cout << "[ INFO     ] this CPU runs every build: no unrunnable one to ask for\n";
}

// Each build is a device class of its own (the kernel table is the device's
// vtable), and asking for one makes that one: no build stands in for another.
TEST(CpuIsa, EachBuildIsItsOwnDeviceClass) {
  std::set<std::type_index> classes;
  for (CpuIsa isa : built_cpu_isas()) {
    CpuIsaChoice choice;
    choice.isa = isa;
    choice.source = "test";
    const std::unique_ptr<CpuDevice> dev = make_cpu_device_for(choice);
    EXPECT_EQ(dev->info().kernel_isa, cpu_isa_name(isa));
    classes.insert(std::type_index(typeid(*dev)));
  }
  // avx512_bf16 runs the avx512 build (the same instructions: CMakeLists.txt), so one
  // class fewer than choices where both are built.
  const auto& built = built_cpu_isas();
  const bool shared = std::count(built.begin(), built.end(), CpuIsa::Avx512Bf16) > 0 &&
                      std::count(built.begin(), built.end(), CpuIsa::Avx512) > 0;
  EXPECT_EQ(classes.size(), built.size() - (shared ? 1 : 0));
}

// Casts and activations on every runnable build against the scalar build, bit
// for bit: hardware F16C/FMA and the portable rounding must agree exactly.
TEST(CpuIsa, ElementwiseKernelsGiveTheSameBitsOnEveryBuild) {
  constexpr int64_t n = 70'001;  // odd: every vector width leaves a tail
  std::vector<float> x(n);
  uint32_t s = 12345;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    uint32_t bits = s;
    if (i % 7 == 0) bits = (bits & 0x807FFFFFu) | 0x33000000u;  // fp16 subnormal range
    if (i % 11 == 0) bits = (bits & 0x807FFFFFu) | 0x47800000u;  // near fp16's overflow
    if (i % 13 == 0) bits = (bits & 0x80FFFFFFu) | 0x3E000000u;  // where GELU's tanh bends
    if (((bits >> 23) & 0xFFu) == 0xFFu) bits &= ~0x00800000u;  // no NaN: its payload may follow either operand
    std::memcpy(&x[i], &bits, 4);
  }
  struct Out {
    std::vector<uint16_t> f16, bf16;
    std::vector<float> gelu, gelu_grad;
  };
  const auto run = [&](CpuIsa isa) {
    ScopedIsaEnv env(cpu_isa_name(isa));
    const std::unique_ptr<Device> dev = make_cpu_device();
    DeviceBuffer in = dev->alloc(Shape{n}, DType::F32, MemCategory::Activations);
    DeviceBuffer h = dev->alloc(Shape{n}, DType::F16, MemCategory::Activations);
    DeviceBuffer b = dev->alloc(Shape{n}, DType::BF16, MemCategory::Activations);
    DeviceBuffer g = dev->alloc(Shape{n}, DType::F32, MemCategory::Activations);
    DeviceBuffer gg = dev->alloc(Shape{n}, DType::F32, MemCategory::Activations);
    dev->upload(in.tensor(), x.data());
    dev->cast(h.tensor(), in.tensor());
    dev->cast(b.tensor(), in.tensor());
    dev->activation_forward(Activation::Gelu, g.tensor(), in.tensor());
    dev->fill(gg.tensor(), 1.0f);
    dev->activation_backward(Activation::Gelu, gg.tensor(), gg.tensor(), in.tensor());
    Out o{std::vector<uint16_t>(n), std::vector<uint16_t>(n), std::vector<float>(n), std::vector<float>(n)};
    dev->download(o.f16.data(), h.tensor());
    dev->download(o.bf16.data(), b.tensor());
    dev->download(o.gelu.data(), g.tensor());
    dev->download(o.gelu_grad.data(), gg.tensor());
    return o;
  };
  const Out ref = run(CpuIsa::Scalar);
  for (CpuIsa isa : runnable_isas()) {
    if (isa == CpuIsa::Scalar) continue;
    const Out o = run(isa);
    EXPECT_EQ(std::memcmp(o.f16.data(), ref.f16.data(), n * 2), 0) << cpu_isa_name(isa) << ": fp32 -> fp16";
    EXPECT_EQ(std::memcmp(o.bf16.data(), ref.bf16.data(), n * 2), 0) << cpu_isa_name(isa) << ": fp32 -> bf16";
    EXPECT_EQ(std::memcmp(o.gelu.data(), ref.gelu.data(), n * 4), 0) << cpu_isa_name(isa) << ": gelu";
    EXPECT_EQ(std::memcmp(o.gelu_grad.data(), ref.gelu_grad.data(), n * 4), 0) << cpu_isa_name(isa) << ": gelu'";
  }
}

}  // namespace
}  // namespace mpb::cpu
