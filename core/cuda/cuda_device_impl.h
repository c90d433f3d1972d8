// CudaDevice: the Device implementation behind make_cuda_device(). Internal to
// the CUDA backend (includes CUDA headers). Its memory/copy/timing members are
// defined in core/cuda/cuda_device.cpp; the numeric ops in ops/cuda/*.cu.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/device.h"

namespace mpb::cuda {

class CublasLtGemm;  // ops/cuda/gemm_cublaslt.h

// Grow-only device scratch buffers (tracked as Workspace), one per purpose so
// the users of one slot never overwrite another's live data. Reuse of a slot
// by a later op is safe because everything runs in order on one stream.
enum ScratchSlot : int {
  kScratchReduce = 0,   // per-block / per-row partial results of reductions
  kScratchResult,       // final reduction results copied to the host
  kScratchGemmBias,     // the bias converted to the GEMM output dtype / realigned
  kScratchGemmAux,      // the GELU aux (pre-activation) when pre_act can't take it directly
  kScratchLayerNorm,    // per-chunk partial dgamma/dbeta of layernorm_backward
  kScratchAttention,    // D_i = rowsum(dO * O) of attention_backward ([B,H,Tq] fp32)
  kScratchEmbedding,    // embedding_backward's counting sort (counts, starts, positions)
  kScratchCount
};

// Errors that kernels detect and can't throw: a kernel sets the flag (a plain
// store of 1 into mapped pinned host memory) and the next synchronising call
// raises a DeviceError.
enum DeviceFlag : int { kFlagBadLabel = 0, kFlagBadId = 1, kFlagCount = 4 };

// Threads per block of every kernel in the backend (a multiple of 32).
constexpr int kThreads = 256;

// Argument checks: std::invalid_argument naming the op, as the CPU backend does.
inline void require(bool ok, const char* op, const char* what) {
  if (!ok) throw std::invalid_argument(std::string(op) + ": " + what);
}

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  const DeviceInfo& info() const override { return info_; }

  void upload(const Tensor& dst, const void* host_src) override;
  void download(void* host_dst, const Tensor& src) override;
  void copy(const Tensor& dst, const Tensor& src) override;

  void synchronize() override;
  std::unique_ptr<DeviceTimer> make_timer() override;

  void gemm(const GemmArgs& args) override;
  std::string gemm_support(GemmCompute c) const override;

  // ops/cuda/elementwise.cu
  void fill(const Tensor& t, float value) override;
  void cast(const Tensor& dst, const Tensor& src) override;
  void scale(const Tensor& t, float factor) override;
  void add_bias(const Tensor& y, const Tensor& bias) override;
  void activation_forward(Activation act, const Tensor& out, const Tensor& in) override;
  void activation_backward(Activation act, const Tensor& din, const Tensor& dout, const Tensor& pre_act) override;
  void bias_grad(const Tensor& db, const Tensor& dy, GradMode mode) override;

  // ops/cuda/softmax_xent.cu
  double softmax_xent_forward(const Tensor& probs, const Tensor& logits, const Tensor& labels) override;
  void softmax_xent_backward(const Tensor& dlogits, const Tensor& probs, const Tensor& labels,
                             float grad_scale) override;
  double softmax_xent_fused(const Tensor& dlogits, const Tensor& logits, const Tensor& labels,
                            float grad_scale) override;
  int64_t count_correct(const Tensor& logits, const Tensor& labels) override;

  // ops/cuda/reduce.cu
  TensorStats stats(const Tensor& t) override;
  ExponentHistogram exponent_histogram(const Tensor& t, int lo, int nbins) override;

  // ops/cuda/transformer.cu (add, LayerNorm, head layouts, dropout)
  void add(const Tensor& out, const Tensor& a, const Tensor& b) override;
  void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                         const Tensor& gamma, const Tensor& beta, float eps) override;
  void residual_layernorm_forward(const Tensor& out, const Tensor& sum, const Tensor& mean, const Tensor& rstd,
                                  const Tensor& a, const Tensor& b, const Tensor& gamma, const Tensor& beta,
                                  float eps) override;
  void layernorm_backward(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, const Tensor& dout,
                          const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& gamma,
                          GradMode dx_mode, GradMode param_mode) override;
  void split_heads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv) override;
  void merge_qkv_grads(const Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv) override;
  void merge_heads(const Tensor& out, const Tensor& in) override;
  void split_heads_grad(const Tensor& din, const Tensor& dout) override;
  void dropout(const Tensor& out, const Tensor& in, float p, uint64_t seed) override;

  // ops/cuda/attention.cu (masked softmax and fused flash-style attention)
  void masked_softmax_forward(const Tensor& probs, const Tensor& scores, const Tensor& key_valid, float scale,
                              float mask_value) override;
  void softmax_backward(const Tensor& dscores, const Tensor& probs, const Tensor& dprobs, float scale) override;
  void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& key_valid, float scale, float mask_value) override;
  void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                          const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& key_valid, float scale, float mask_value) override;

  // ops/cuda/embedding.cu
  void embedding_forward(const Tensor& out, const Tensor& table, const Tensor& ids) override;
  void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids, GradMode mode) override;

  // ops/cuda/optimizer.cu
  void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamWHyper& h,
                  float grad_scale, bool fused, const Tensor& param_copy) override;
  void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const SgdHyper& h,
                float grad_scale) override;

  // ---- for the backend's own code ------------------------------------------------
  cudaStream_t stream() const { return stream_; }
  int ordinal() const { return ordinal_; }
  int sm_count() const { return sm_count_; }
  int cc_major() const { return cc_major_; }
  int cc_minor() const { return cc_minor_; }
  // Device memory of at least `bytes` for `slot`, valid until the next call
  // for the same slot (growing it synchronises the stream first).
  void* scratch(ScratchSlot slot, size_t bytes);
  // Device-visible pointer to the kFlagCount error flags.
  int* device_flags() const { return flags_dev_; }
  // Waits for the stream, then raises (DeviceError) any error deferred from a
  // noexcept path or flagged by a kernel. `op` names the caller in messages.
  void sync_and_check(const char* op);
  // Copies `bytes` of device memory to the host and waits (sync_and_check).
  void read_back(void* host_dst, const void* dev_src, size_t bytes, const char* op);
  // Grid size for a grid-stride element-wise kernel of kThreads-thread blocks.
  unsigned elementwise_grid(int64_t n) const;

 protected:
  void* raw_alloc(size_t bytes) override;
  void raw_free(void* ptr) override;

 private:
  void check_flags_and_deferred(const char* op);

  int ordinal_ = 0;
  int sm_count_ = 0;
  int cc_major_ = 0, cc_minor_ = 0;
  DeviceInfo info_;
  cudaStream_t stream_ = nullptr;
  int* flags_host_ = nullptr;  // pinned, mapped
  int* flags_dev_ = nullptr;
  std::string deferred_error_;  // from raw_free/release paths that must not throw
  std::array<DeviceBuffer, kScratchCount> scratch_;
  std::unique_ptr<CublasLtGemm> gemm_;
};

}  // namespace mpb::cuda
