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
  void add(const Tensor& out, const Tensor& a, const Tensor& b) override { cpu::add(out, a, b); }
  void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                         const Tensor& gamma, const Tensor& beta, float eps) override {
    cpu::layernorm_forward(out, mean, rstd, x, gamma, beta, eps);
  }
  void residual_layernorm_forward(const Tensor& out, const Tensor& sum, const Tensor& mean, const Tensor& rstd,
                                  const Tensor& a, const Tensor& b, const Tensor& gamma, const Tensor& beta,
                                  float eps) override {
    cpu::residual_layernorm_forward(out, sum, mean, rstd, a, b, gamma, beta, eps);
  }
  void layernorm_backward(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, const Tensor& dout,
                          const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& gamma,
                          GradMode dx_mode, GradMode param_mode) override {
    cpu::layernorm_backward(dx, dgamma, dbeta, dout, x, mean, rstd, gamma, dx_mode, param_mode);
  }
  void split_heads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv) override {
    cpu::split_heads(q, k, v, qkv);
  }
  void merge_qkv_grads(const Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv) override {
    cpu::merge_qkv_grads(dqkv, dq, dk, dv);
  }
  void merge_heads(const Tensor& out, const Tensor& in) override { cpu::merge_heads(out, in); }
  void split_heads_grad(const Tensor& din, const Tensor& dout) override { cpu::split_heads_grad(din, dout); }
  void masked_softmax_forward(const Tensor& probs, const Tensor& scores, const Tensor& key_valid, float scale,
                              float mask_value) override {
    cpu::masked_softmax_forward(probs, scores, key_valid, scale, mask_value);
  }
  void softmax_backward(const Tensor& dscores, const Tensor& probs, const Tensor& dprobs, float scale) override {
    cpu::softmax_backward(dscores, probs, dprobs, scale);
  }
  void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& key_valid, float scale, float mask_value) override {
    cpu::attention_forward(out, lse, q, k, v, key_valid, scale, mask_value);
  }
  void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                          const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& key_valid, float scale, float mask_value) override {
    cpu::attention_backward(dq, dk, dv, dout, out, lse, q, k, v, key_valid, scale, mask_value);
  }
  void embedding_forward(const Tensor& out, const Tensor& table, const Tensor& ids) override {
    cpu::embedding_forward(out, table, ids);
  }
  void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids, GradMode mode) override {
    cpu::embedding_backward(dtable, dout, ids, mode);
  }
  void dropout(const Tensor& out, const Tensor& in, float p, uint64_t seed) override {
    cpu::dropout(out, in, p, seed);
  }
  void adamw_step(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamWHyper& h,
                  float gs, bool fused, const Tensor& copy) override {
    cpu::adamw_step(p, g, m, v, h, gs, fused, copy);
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
