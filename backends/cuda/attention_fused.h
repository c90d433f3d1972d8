// The hand-written fused attention kernels (attention_fused.cu): what runs
// fp32/TF32 attention, every call cuDNN SDPA refuses or cannot be asked
// (attention_sdpa_call.h), and everything in a build without cudnn_frontend.
// Host-side entry points; the caller (attention.cu) has chosen this path and
// noted why where cuDNN was the reason.
#pragma once

#include "core/attention_layout.h"
#include "core/tensor.h"

namespace mpb::cuda {

class CudaDevice;

// out and lse (fp32 [B,H,Tq], the natural-log log-sum-exp) of p.
void fused_attention_forward(CudaDevice& dev, const AttentionProblem& p, const AttnOperand& out, const Tensor& lse);

// dq, dk, dv of p from dout and the forward's out and lse.
void fused_attention_backward(CudaDevice& dev, const AttentionProblem& p, const AttnOperand& dq, const AttnOperand& dk,
                              const AttnOperand& dv, const AttnOperand& dout, const AttnOperand& out,
                              const Tensor& lse);

}  // namespace mpb::cuda
