// CudaDevice: the Device implementation behind make_cuda_device(). Internal to
// the CUDA backend (includes CUDA headers). Its memory/copy/timing members are
// defined in backends/cuda/cuda_device.cpp; the numeric ops (*_impl) in
// backends/cuda/*.cu. The public Device ops have checked the arguments against
// core/device.h before any *_impl runs; the code here checks only the CUDA
// backend's own limits (grid dimensions, shared memory, cuBLASLt), each
// marked "backend limit".
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "core/device.h"

namespace mpb::cuda {

class CublasLtGemm;   // backends/cuda/gemm_cublaslt.h
class PinnedStaging;  // backends/cuda/pinned_staging.h
#ifdef MPB_HAVE_CUDNN_FRONTEND
class CudnnSdpa;      // backends/cuda/attention_cudnn.h
#endif

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
  kScratchFp8A,         // an FP8 GEMM's quantized operands (fp8_quantize.h) ...
  kScratchFp8B,
  kScratchFp8Descale,   // ... and their 1 / scale, the factors cuBLASLt applies
  kScratchFp8Out,       // an FP8 GEMM's C widened to n rounded up to 16 (fp8_gemm_layout.h) ...
  kScratchFp8PreAct,    // ... its pre_act widened the same way ...
  kScratchFp8Bias,      // ... and its bias (or bias gradient) padded to that width
  kScratchAttnBias,     // cuDNN SDPA's additive padding bias (B*Tk values) in q's dtype
  kScratchAttnSeed,     // cuDNN SDPA's dropout seed and offset (int64, Philox)
  kScratchCudnnWorkspace,  // cuDNN SDPA graphs' workspace (the largest a call has needed)
  kScratchDecision,     // decide_step's StepDecisionSlot, read by the decided optimizer kernels
  kScratchCount
};

// Errors that kernels detect and can't throw: a kernel sets the flag (a plain
// store of 1 into mapped pinned host memory) and the next synchronising call
// raises a DeviceError.
enum DeviceFlag : int { kFlagBadLabel = 0, kFlagBadId = 1, kFlagLostLabel = 2, kFlagCount = 4 };

// Device::decide_step's record, written by one thread on the device, twice:
// into device memory (kScratchDecision), which the optimizer kernels given a
// decided GradScale read, and into mapped pinned memory, which
// read_step_results_impl reads after its stream wait.
struct StepDecisionSlot {
  double sum_squares;
  unsigned long long nonfinite;
  double norm;
  float grad_scale;
  int skip;  // 1: the decided optimizer kernels return at once
};

// Threads per block of every kernel in the backend (a multiple of 32).
constexpr int kThreads = 256;

// Backend limits: std::invalid_argument naming the op, like the Device
// contract's checks (core/device_checks.cpp).
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

  void synchronize() override;
  std::unique_ptr<DeviceTimer> make_timer() override;
  void range_push(const char* name) override;  // NVTX (header-only nvtx3; a no-op without a profiler)
  void range_pop() override;
  Support supports(Feature f) const override;  // GEMM modes and FP8 by compute capability
  std::string gemm_math(GemmCompute c) const override;
  std::optional<size_t> free_memory_bytes() const override;  // cudaMemGetInfo
  std::optional<size_t> reserved_peak_bytes() const override { return reserved_peak_; }  // cudaMalloc'd

  // ---- for the backend's own code ------------------------------------------------
  cudaStream_t stream() const { return stream_; }
  int ordinal() const { return ordinal_; }
  int sm_count() const { return sm_count_; }
  int cc_major() const { return cc_major_; }
  int cc_minor() const { return cc_minor_; }
  // Device memory of at least `bytes` for `slot`, valid until the next call
  // for the same slot (growing it synchronises the stream first: a host
  // sync, and an allocation, that the trainer's warm-up makes happen before
  // the timed steps).
  void* scratch(ScratchSlot slot, size_t bytes);
  // Device-visible pointer to the kFlagCount error flags.
  int* device_flags() const { return flags_dev_; }
  // Device-visible pointer to the loss ops' deferred sum (Device::read_loss_sum):
  // one double of mapped pinned memory.
  double* loss_sum() const { return loss_sum_dev_; }
  // What an optimizer kernel reads for a GradScale: the last decide_step's
  // slot in device memory when decided (Device checked that one ran), else null.
  const StepDecisionSlot* decision_for(GradScale g) const { return g.is_decided() ? decision_dev_ : nullptr; }
  // Waits for the stream, then raises (DeviceError) any error deferred from a
  // noexcept path or flagged by a kernel. `op` names the caller in messages.
  void sync_and_check(const char* op);
  // Copies `bytes` of device memory to the host and waits (sync_and_check).
  void read_back(void* host_dst, const void* dev_src, size_t bytes, const char* op);
  // Grid size for a grid-stride element-wise kernel of kThreads-thread blocks.
  unsigned elementwise_grid(int64_t n) const;

 protected:
  // Defined in the file named for each group of the list:
  //   memory and copies   backends/cuda/cuda_device.cpp
  //   GEMM                backends/cuda/cuda_device.cpp (CublasLtGemm, backends/cuda/gemm_cublaslt.cu)
  //   element-wise        backends/cuda/elementwise.cu
  //   losses              backends/cuda/softmax_xent.cu
  //   reductions          backends/cuda/reduce.cu
  //   transformer ops     backends/cuda/transformer.cu
  //   attention           backends/cuda/attention.cu
  //   embeddings          backends/cuda/embedding.cu
  //   optimizers          backends/cuda/optimizer.cu
  //   FP8 delayed scaling backends/cuda/fp8_scales.cu
  // (core/device_ops.inc's groups; the step's state is in softmax_xent.cu
  // (the loss sum) and reduce.cu (the decision)).
#define MPB_DEVICE_OP(group, ret, name, params, args) ret name##_impl params override;
#include "core/device_ops.inc"
#undef MPB_DEVICE_OP
  void* raw_alloc(size_t bytes) override;
  void raw_free(void* ptr) override;

 private:
  void check_flags_and_deferred(const char* op);
  // Waits for the stream (raising a flagged error, named for `op`), then
  // returns the deferred loss sum and zeroes it, also when the wait throws.
  double take_loss_sum(const char* op);

  int ordinal_ = 0;
  int sm_count_ = 0;
  int cc_major_ = 0, cc_minor_ = 0;
  DeviceInfo info_;
  cudaStream_t stream_ = nullptr;
  int* flags_host_ = nullptr;  // pinned, mapped
  int* flags_dev_ = nullptr;
  double* loss_sum_host_ = nullptr;  // pinned, mapped; zeroed at construction and by each read
  double* loss_sum_dev_ = nullptr;
  StepDecisionSlot* decision_host_ = nullptr;    // pinned, mapped: read_step_results_impl reads it
  StepDecisionSlot* decision_mapped_ = nullptr;  // its device-visible pointer
  StepDecisionSlot* decision_dev_ = nullptr;     // device memory (kScratchDecision), set by decide_step
  std::string deferred_error_;  // from raw_free/release paths that must not throw
  // cudaMalloc'd bytes now and at most, and each live allocation's size (raw_alloc/raw_free).
  size_t reserved_now_ = 0, reserved_peak_ = 0;
  std::unordered_map<void*, size_t> reserved_sizes_;
  std::array<DeviceBuffer, kScratchCount> scratch_;
  std::unique_ptr<CublasLtGemm> gemm_;
  std::unique_ptr<PinnedStaging> staging_;  // Device::upload's pinned buffers
#ifdef MPB_HAVE_CUDNN_FRONTEND
  // fp16/bf16 fused attention through cuDNN SDPA (backends/cuda/attention.cu
  // dispatches to it). The cuDNN handle and the graphs are the process's, per
  // GPU, made on the first such call (attention_cudnn.h), not with the
  // device: a cuDNN that cannot load costs fused attention only.
  std::unique_ptr<CudnnSdpa> sdpa_;
#endif
};

}  // namespace mpb::cuda
