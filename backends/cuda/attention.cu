// Fused attention on the GPU: which implementation runs a call. fp16/bf16
// calls go to cuDNN SDPA first (attention_sdpa_call.cu, in builds with
// cudnn_frontend); whatever cuDNN does not run, and all fp32/TF32 attention,
// runs the hand-written flash-style kernels (attention_fused.cu). Every call
// is counted by implementation (DeviceCounters::attention_impls): cuDNN's
// label, the cuDNN reason's "cuda_kernel_..." label, or, unnamed, the
// device's own "cuda_kernel". The unfused path's softmax kernels are
// attention_softmax.cu.
#include "backends/cuda/attention_cudnn.h"
#include "backends/cuda/attention_fused.h"
#include "backends/cuda/attention_sdpa_call.h"
#include "backends/cuda/cuda_device_impl.h"

namespace mpb::cuda {

void CudaDevice::attention_forward_impl(const AttentionProblem& p, const AttnOperand& out, const Tensor& lse) {
#ifdef MPB_HAVE_CUDNN_FRONTEND
  if (cudnn_attention_forward(*this, *sdpa_, p, out, lse)) return;
#endif
  fused_attention_forward(*this, p, out, lse);
}

void CudaDevice::attention_backward_impl(const AttentionProblem& p, const AttnOperand& dq, const AttnOperand& dk,
                                         const AttnOperand& dv, const AttnOperand& dout, const AttnOperand& out,
                                         const Tensor& lse) {
#ifdef MPB_HAVE_CUDNN_FRONTEND
  // Independent of the forward's choice (lse means the same on both paths),
  // except with dropout, which cudnn_attention_backward holds to the forward's.
  if (cudnn_attention_backward(*this, *sdpa_, p, dq, dk, dv, dout, out, lse)) return;
#endif
  fused_attention_backward(*this, p, dq, dk, dv, dout, out, lse);
}

}  // namespace mpb::cuda
