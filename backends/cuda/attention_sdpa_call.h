// One fused attention call through cuDNN SDPA (attention_sdpa_call.cu), in
// builds with MPB_HAVE_CUDNN_FRONTEND: whether cuDNN may be asked (fp16/bf16,
// one dtype, 16-byte aligned operands and strides; with dropout, forward and
// backward on the same implementation), then the call itself with its padding
// bias and dropout seed built on the device. attention.cu asks these first
// and runs the hand-written kernels (attention_fused.h) when they say no.
#pragma once

#ifdef MPB_HAVE_CUDNN_FRONTEND

#include "core/attention_layout.h"
#include "core/tensor.h"

namespace mpb::cuda {

class CudaDevice;
class CudnnSdpa;

// True when cuDNN ran the forward (counted under its label); false when the
// caller must run the kernel (counted under the cuDNN reason's
// "cuda_kernel_..." label where cuDNN was the reason).
bool cudnn_attention_forward(CudaDevice& dev, CudnnSdpa& sdpa, const AttentionProblem& p, const AttnOperand& out,
                             const Tensor& lse);

// The same for the backward. With dropout, throws DeviceError when the
// backward cannot run on the implementation its forward ran (another mask).
bool cudnn_attention_backward(CudaDevice& dev, CudnnSdpa& sdpa, const AttentionProblem& p, const AttnOperand& dq,
                              const AttnOperand& dk, const AttnOperand& dv, const AttnOperand& dout,
                              const AttnOperand& out, const Tensor& lse);

}  // namespace mpb::cuda

#endif  // MPB_HAVE_CUDNN_FRONTEND
