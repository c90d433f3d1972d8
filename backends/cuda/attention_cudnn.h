// Fused attention through cuDNN's scaled-dot-product-attention (SDPA) graphs,
// built with the header-only cudnn_frontend C++ API. Only
// backends/cuda/attention_cudnn.cpp includes cudnn_frontend (it takes about a
// minute to compile); this header is plain C++ and exists only in builds with
// MPB_HAVE_CUDNN_FRONTEND (cmake/Cuda.cmake).
//
// The graphs (S = scale * Q K^T + bias, softmax with its statistics, O = P V,
// and the backward from Q, K, V, O, dO, Stats, bias) are built once per
// SdpaKey and GPU in the process: a process-wide cache per device ordinal
// (backends/cuda/ordinal_plan_cache.h) holds the cuDNN handle, made on the
// first fp16/bf16 attention call rather than with the device, and every
// graph built with it, so the devices the runner makes per repeat (and each
// test's) reuse the first one's graphs. A build is counted as a plan creation
// on the device that makes it (cell JSON plans_created_in_timed_steps) and
// logged on stderr with its time. The decisions (sdpa_policy.h): the padding
// bias is declared [B,1,1,Tk], and after a refusal [B,1,Tq,Tk] with stride 0
// on Tq; a key both forms fail (cuDNN's "not supported", or build_plans
// failing) is cached with cuDNN's reasons, printed once, and its calls run
// the caller's hand-written kernel; a handle that cannot be made is kept
// likewise, printed once, and every call on that GPU runs the kernel. The
// labels say which form ran or why the kernel ran. Any other frontend or
// cuDNN error throws DeviceError with its message.
#pragma once

#ifdef MPB_HAVE_CUDNN_FRONTEND

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backends/cuda/sdpa_policy.h"
#include "core/attention_layout.h"
#include "core/dtype.h"

namespace mpb::cuda {

class CudaDevice;

// One graph: everything that is baked into it. Q [B,H,Tq,D], K/V [B,H,Tk,D]
// and O [B,H,Tq,D] with the strides of their layouts (core/attention_layout.h;
// the offsets are in the pointers): contiguous heads or the packed QKV and
// merged buffers. dQ, dK, dV have Q's, K's and V's strides, dO has O's. The
// bias: B*Tk values in the same dtype, in either declared form (not part of
// the key: the plan records which form cuDNN took); Stats fp32 [B,H,Tq,1]. dropout > 0:
// cuDNN's own dropout on the probabilities, its Philox stream from an int64
// seed and offset (device memory), the same mask in the forward and the
// backward of one seed; not the CPU's mask (ops/dropout.h).
struct SdpaKey {
  DType dtype = DType::F16;  // F16 or BF16
  int64_t B = 0, H = 0, Tq = 0, Tk = 0, D = 0;
  HeadLayout q_at, k_at, v_at, o_at;  // strides only (offsets 0)
  float scale = 1.0f;
  float dropout = 0.0f;
  bool backward = false;
  bool operator==(const SdpaKey& o) const;
  std::string describe() const;  // "forward bf16 B32 H12 Tq128 Tk128 D64 scale 0.125000 packed"
};

struct SdpaForwardArgs {
  void* out = nullptr;
  float* lse = nullptr;  // cuDNN's Stats: natural-log log-sum-exp of the logits, fp32 [B,H,Tq]
  const void *q = nullptr, *k = nullptr, *v = nullptr, *bias = nullptr;
  const int64_t* seed_offset = nullptr;  // with dropout: {seed, offset} in device memory
};

struct SdpaBackwardArgs {
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;
  const void *dout = nullptr, *out = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *bias = nullptr;
  const float* lse = nullptr;
  const int64_t* seed_offset = nullptr;  // with dropout: the forward's {seed, offset}
};

// A key's cached graph (or cuDNN's refusal of it), with its bias form,
// workspace size and the variant pack its calls reuse (attention_cudnn.cpp).
struct SdpaPlan;

// prepare()'s answer: the plan cuDNN runs the call with, or null and the
// label the hand-written kernel's call is counted under (null: the device's
// own "cuda_kernel", for a shape cuDNN refused).
struct SdpaChoice {
  SdpaPlan* plan = nullptr;
  const char* kernel_label = nullptr;
};

class CudnnSdpa {
 public:
  // Makes no cuDNN call: the GPU's handle is made by the first prepare().
  explicit CudnnSdpa(CudaDevice& dev);
  // Points the shared handle away from this device's stream if it was set to it.
  ~CudnnSdpa();
  CudnnSdpa(const CudnnSdpa&) = delete;
  CudnnSdpa& operator=(const CudnnSdpa&) = delete;

  // The key's plan on this device's GPU: found in the process-wide cache,
  // or built there now (plan creations on this device, a log line with the
  // build time). Plans live until the process exits.
  SdpaChoice prepare(const SdpaKey& key);
  static size_t workspace_bytes(const SdpaPlan& plan);
  // The attention_impls label of a call the plan runs: which bias form
  // cuDNN took ("cudnn_sdpa": [B,1,1,Tk]).
  static const char* impl_label(const SdpaPlan& plan);
  // Enqueue an accepted plan's graph on the device's stream; its variant
  // pack is filled in place (no allocation per call). workspace: at least
  // workspace_bytes(plan) of device memory (may be null for 0).
  void forward(SdpaPlan& plan, const SdpaForwardArgs& a, void* workspace);
  void backward(SdpaPlan& plan, const SdpaBackwardArgs& a, void* workspace);
  // Keys cached in this process, every GPU (refusals included).
  static size_t cached_graphs();
  // The bias form the forward graphs built from now on try first (kPerQuery
  // unless set; backward graphs always take kPerQuery, sdpa_policy.h). For
  // the GPU tests only: on a GPU whose cuDNN takes the per-query form, the
  // broadcast form would never run otherwise. Cached keys keep the form they
  // were built with.
  static void set_first_bias_form(SdpaBiasForm form);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mpb::cuda

#endif  // MPB_HAVE_CUDNN_FRONTEND
