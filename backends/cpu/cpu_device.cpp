// CpuDevice's construction, memory, copies and timers, and make_cpu_device();
// the numeric ops are in the other files of backends/cpu (see cpu_device_impl.h).
#include "backends/cpu/cpu_device.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "backends/cpu/cpu_device_impl.h"
#include "backends/cpu/cpu_isa.h"
#include "core/host_memory.h"

namespace mpb {

namespace cpu {

namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(pos + 2);
    }
  }
  return "unknown CPU";
}

// CPU work is synchronous, so a steady clock read after the op returns is the
// device time. Reading it counts as a host sync, as the CUDA timer's does, so
// both backends count a step the same way.
class CpuTimer final : public DeviceTimer {
 public:
  explicit CpuTimer(Device& dev) : dev_(dev) {}
  void start() override { t0_ = std::chrono::steady_clock::now(); }
  void stop() override { t1_ = std::chrono::steady_clock::now(); }
  double elapsed_ms() override {
    dev_.note_host_sync();
    return std::chrono::duration<double, std::milli>(t1_ - t0_).count();
  }

 private:
  Device& dev_;
  std::chrono::steady_clock::time_point t0_, t1_;
};

// oneDNN's name for the ISA its GEMM kernels were generated for (it dispatches
// on its own, from cpuid and DNNL_MAX_CPU_ISA).
std::string onednn_isa_name() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "isa 0x" + [] {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%x", static_cast<unsigned>(dnnl_get_effective_cpu_isa()));
      return std::string(buf);
    }();
  }
}

}  // namespace

CpuDevice::CpuDevice(const CpuIsaChoice& isa) : onednn_(make_onednn_matmul()) {
  info_.kind = DeviceKind::Cpu;
  info_.kernel_isa = cpu_isa_name(isa.isa);
  info_.kernel_isa_source = isa.source;
  info_.kernel_isas_runnable = isa.runnable;
  info_.gemm_isa = "onednn " + onednn_isa_name();
  info_.name = cpu_model_name();
  info_.cores = omp_get_max_threads();
  const dnnl_version_t* v = dnnl_version();
  info_.versions.emplace_back("onednn", std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                                            std::to_string(v->patch));
}

CpuDevice::~CpuDevice() = default;

const DeviceInfo& CpuDevice::info() const { return info_; }

void CpuDevice::synchronize() { note_host_sync(); }

std::optional<size_t> CpuDevice::free_memory_bytes() const { return host_available_memory_bytes(); }

std::unique_ptr<DeviceTimer> CpuDevice::make_timer() { return std::make_unique<CpuTimer>(*this); }

void CpuDevice::upload_impl(const Tensor& dst, const void* src) { std::memcpy(dst.data, src, dst.bytes()); }

void CpuDevice::download_impl(void* dst, const Tensor& src) { std::memcpy(dst, src.data, src.bytes()); }

void CpuDevice::copy_impl(const Tensor& dst, const Tensor& src) {
  if (dst.data != src.data) std::memcpy(dst.data, src.data, src.bytes());
}

void* CpuDevice::raw_alloc(size_t bytes) {
  // 64-byte alignment: a cache line and an AVX-512 register.
  size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw DeviceError("cpu: out of memory allocating " + std::to_string(bytes) + " bytes");
  return p;
}

void CpuDevice::raw_free(void* p) { std::free(p); }

void* CpuDevice::workspace(int slot, size_t bytes) {
  DeviceBuffer& buf = workspace_[slot];
  if (buf.bytes() < bytes) {
    buf.release();
    buf = alloc(Shape{static_cast<int64_t>((bytes + 3) / 4)}, DType::F32, MemCategory::Workspace);
  }
  return buf.tensor().data;
}

}  // namespace cpu

std::unique_ptr<Device> make_cpu_device() { return cpu::make_cpu_device_for(cpu::choose_cpu_isa()); }

std::optional<std::string> cpu_device_unavailable() {
  try {
    cpu::choose_cpu_isa();
  } catch (const DeviceError& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

}  // namespace mpb
