#include "core/cpu/cpu_device.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/gemm_onednn.h"

namespace mpb {

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
// device time.
class CpuTimer final : public DeviceTimer {
 public:
  void start() override { t0_ = std::chrono::steady_clock::now(); }
  void stop() override { t1_ = std::chrono::steady_clock::now(); }
  double elapsed_ms() override { return std::chrono::duration<double, std::milli>(t1_ - t0_).count(); }

 private:
  std::chrono::steady_clock::time_point t0_, t1_;
};

class CpuDevice final : public Device {
 public:
  CpuDevice() : gemm_([this](int slot, size_t bytes) { return workspace(slot, bytes); }) {
    info_.kind = "cpu";
    info_.name = cpu_model_name();
    info_.cores = omp_get_max_threads();
    const dnnl_version_t* v = dnnl_version();
    info_.versions.emplace_back("onednn", std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                                              std::to_string(v->patch));
  }

  const DeviceInfo& info() const override { return info_; }

  void upload(const Tensor& dst, const void* src) override { std::memcpy(dst.data, src, dst.bytes()); }
  void download(void* dst, const Tensor& src) override { std::memcpy(dst, src.data, src.bytes()); }
  void copy(const Tensor& dst, const Tensor& src) override {
    cpu::require(dst.dtype == src.dtype && dst.numel() == src.numel(), "copy", "dtype and size must match");
    std::memcpy(dst.data, src.data, src.bytes());
  }
  void synchronize() override {}
  std::unique_ptr<DeviceTimer> make_timer() override { return std::make_unique<CpuTimer>(); }

  void gemm(const GemmArgs& args) override { gemm_.run(args); }
  std::string gemm_support(GemmCompute c) const override { return gemm_.support(c); }

  void fill(const Tensor& t, float v) override { cpu::fill(t, v); }
  void cast(const Tensor& d, const Tensor& s) override { cpu::cast(d, s); }
  void scale(const Tensor& t, float f) override { cpu::scale(t, f); }
  void add_bias(const Tensor& y, const Tensor& b) override { cpu::add_bias(y, b); }
  void activation_forward(Activation a, const Tensor& out, const Tensor& in) override {
    cpu::activation_forward(a, out, in);
  }
  void activation_backward(Activation a, const Tensor& din, const Tensor& dout, const Tensor& pre) override {
    cpu::activation_backward(a, din, dout, pre);
  }
  void bias_grad(const Tensor& db, const Tensor& dy, GradMode m) override { cpu::bias_grad(db, dy, m); }
  double softmax_xent_forward(const Tensor& p, const Tensor& l, const Tensor& y) override {
    return cpu::softmax_xent_forward(p, l, y);
  }
  void softmax_xent_backward(const Tensor& d, const Tensor& p, const Tensor& y, float s) override {
    cpu::softmax_xent_backward(d, p, y, s);
  }
  double softmax_xent_fused(const Tensor& d, const Tensor& l, const Tensor& y, float s) override {
    return cpu::softmax_xent_fused(d, l, y, s);
  }
  int64_t count_correct(const Tensor& l, const Tensor& y) override { return cpu::count_correct(l, y); }
  TensorStats stats(const Tensor& t) override { return cpu::stats(t); }
  ExponentHistogram exponent_histogram(const Tensor& t, int lo, int nbins) override {
    return cpu::exponent_histogram(t, lo, nbins);
  }
  void adamw_step(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamWHyper& h,
                  float gs, bool fused) override {
    cpu::adamw_step(p, g, m, v, h, gs, fused);
  }
  void sgd_step(const Tensor& p, const Tensor& g, const Tensor& buf, const SgdHyper& h, float gs) override {
    cpu::sgd_step(p, g, buf, h, gs);
  }

 protected:
  void* raw_alloc(size_t bytes) override {
    // 64-byte alignment: a cache line and an AVX-512 register.
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw DeviceError("cpu: out of memory allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void raw_free(void* p) override { std::free(p); }

 private:
  // Grow-only scratch buffers for GEMM emulation, tracked as workspace memory.
  void* workspace(int slot, size_t bytes) {
    DeviceBuffer& buf = workspace_[slot];
    if (buf.bytes() < bytes) {
      buf.release();
      buf = alloc(Shape{static_cast<int64_t>((bytes + 3) / 4)}, DType::F32, MemCategory::Workspace);
    }
    return buf.tensor().data;
  }

  DeviceInfo info_;
  DeviceBuffer workspace_[4];
  cpu::OnednnGemm gemm_;
};

}  // namespace

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

}  // namespace mpb
