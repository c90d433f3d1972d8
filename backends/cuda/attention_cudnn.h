// Fused attention through cuDNN's scaled-dot-product-attention (SDPA) graphs,
// built with the header-only cudnn_frontend C++ API. Only
// backends/cuda/attention_cudnn.cpp includes cudnn_frontend (it takes about a
// minute to compile); this header is plain C++ and exists only in builds with
// MPB_HAVE_CUDNN_FRONTEND (cmake/Cuda.cmake).
//
// The graphs (S = scale * Q K^T + bias, softmax with its statistics, O = P V,
// and the backward from Q, K, V, O, dO, Stats, bias) are built once per
// SdpaKey, counted as plan creations on the device (cell JSON
// plans_created_in_timed_steps), and cached with their workspace sizes. A key
// cuDNN refuses (the graph's validate / heuristics / check_support answer
// "not supported") is cached as refused with cuDNN's reason, so the caller's
// hand-written kernel runs instead and the refusal costs one build attempt.
// Any other frontend or cuDNN error throws DeviceError with its message.
#pragma once

#ifdef MPB_HAVE_CUDNN_FRONTEND

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/attention_layout.h"
#include "core/dtype.h"

namespace mpb::cuda {

class CudaDevice;

// One graph: everything that is baked into it. Q [B,H,Tq,D], K/V [B,H,Tk,D]
// and O [B,H,Tq,D] with the strides of their layouts (core/attention_layout.h;
// the offsets are in the pointers): contiguous heads or the packed QKV and
// merged buffers. dQ, dK, dV have Q's, K's and V's strides, dO has O's. The
// bias [B,1,1,Tk] in the same dtype; Stats fp32 [B,H,Tq,1]. dropout > 0:
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

// A key's cached graph (or cuDNN's refusal of it), with its workspace size
// and the variant pack its calls reuse (attention_cudnn.cpp).
struct SdpaPlan;

class CudnnSdpa {
 public:
  // One cuDNN handle on the device's stream (the device's current CUDA device).
  explicit CudnnSdpa(CudaDevice& dev);
  ~CudnnSdpa();
  CudnnSdpa(const CudnnSdpa&) = delete;
  CudnnSdpa& operator=(const CudnnSdpa&) = delete;

  // The key's plan: its graph built on first use (a plan creation) and
  // cached, so later calls find it with one lookup. Null when cuDNN refused
  // the graph, with cuDNN's reason in *reason (when given). Plans live as
  // long as this object.
  SdpaPlan* prepare(const SdpaKey& key, std::string* reason = nullptr);
  static size_t workspace_bytes(const SdpaPlan& plan);
  // Enqueue an accepted plan's graph on the device's stream; its variant
  // pack is filled in place (no allocation per call). workspace: at least
  // workspace_bytes(plan) of device memory (may be null for 0).
  void forward(SdpaPlan& plan, const SdpaForwardArgs& a, void* workspace);
  void backward(SdpaPlan& plan, const SdpaBackwardArgs& a, void* workspace);
  size_t cached_graphs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mpb::cuda

#endif  // MPB_HAVE_CUDNN_FRONTEND
