// Linear layers as Device calls, forward and backward, for every model (the
// role of llm.c's llmc/matmul.cuh). Weights are [out, in] as in PyTorch and
// come as ParamRefs (models/param_store.h): the GEMMs read w.c (the compute
// copy), biases are read as b.p (fused epilogues: b.c when it has the
// output's dtype, the rounding the GPU's epilogue would make anyway) and
// their gradients written to b.g, weight gradients to w.g. Shapes: M rows
// (batch or tokens), k = in, n = out.
//
// Fusion picks between two call sequences, both kept on purpose (they are
// what a benchmark cell compares):
//   forward   fused:   one GEMM with the Bias / BiasRelu / BiasGelu epilogue
//                      (the pre-activation saved by the epilogue)
//             unfused: GEMM, add_bias, activation_forward
//   backward  fused:   dx through a GELU below in one GEMM (DGelu, or
//                      DGeluBGrad when it may write the bias gradient too)
//             unfused: GEMM, activation_backward
// The weight gradient is always GEMM then bias_grad.
#pragma once

#include "core/device.h"
#include "models/fp8_linears.h"
#include "models/param_store.h"

namespace mpb {

struct LinearFusion {
  bool forward = false;   // GEMM + bias (+ activation) epilogues
  bool backward = false;  // GEMM + GELU-derivative (+ bias gradient) epilogues
};

class LinearOps {
 public:
  // fp8: the FP8 state when the policy is `fp8` (every GEMM here then takes
  // FP8 operands: E4M3 inputs and weights, E5M2 output gradients), else null.
  LinearOps(Device& dev, GemmCompute compute, LinearFusion fusion, Fp8Linears* fp8 = nullptr)
      : dev_(&dev), compute_(compute), fusion_(fusion), fp8_(fp8) {}

  // out[M,n] = in[M,k] . W[n,k]^T + b.
  void forward(const Tensor& out, const Tensor& in, const ParamRef& w, const ParamRef& b) const;
  // out = act(pre), pre[M,n] = in . W^T + b (kept for the backward pass).
  void forward(const Tensor& out, const Tensor& pre, const Tensor& in, const ParamRef& w, const ParamRef& b,
               Activation act) const;

  // dW[n,k] (+)= dy[M,n]^T . in[M,k] (fp32 accumulation, stored in w.g's
  // dtype), then db (+)= the column sums of dy where b has a gradient view
  // (an empty b skips it: a tied weight, or a bias already written).
  void weight_grad(const ParamRef& w, const ParamRef& b, const Tensor& dy, const Tensor& in, GradMode mode) const;

  // dx[M,k] = dy[M,n] . W[n,k]; GradMode::Accumulate adds it to dx (a
  // residual branch's gradient).
  void input_grad(const Tensor& dx, const Tensor& dy, const ParamRef& w, GradMode dx_mode = GradMode::Overwrite) const;

  // dx = (dy . W) * act'(pre): the input gradient carried on through the
  // activation of the layer below (pre: that layer's pre-activation, b_below
  // its bias). Fused GELU: one GEMM with the DGelu epilogue, or under
  // GradMode::Overwrite DGeluBGrad, which also writes b_below.g (DGeluBGrad
  // never accumulates, so micro-batches keep bias_grad). Returns true when
  // b_below.g was written here (the caller then skips its bias_grad).
  bool input_grad(const Tensor& dx, const Tensor& dy, const ParamRef& w, Activation act, const Tensor& pre,
                  const ParamRef& b_below, GradMode mode) const;

  // weight_grad, then input_grad: the whole backward pass of forward().
  void backward(const Tensor& dx, const ParamRef& w, const ParamRef& b, const Tensor& dy, const Tensor& in,
                GradMode mode, GradMode dx_mode = GradMode::Overwrite) const {
    weight_grad(w, b, dy, in, mode);
    input_grad(dx, dy, w, dx_mode);
  }

 private:
  // c[M,n] = a[M,k] . op(W) with the weight's GEMM copy W [out, in]: op(W) =
  // W^T in the forward pass (transpose_w), W for the input gradient.
  GemmArgs times_weight(const Tensor& c, const Tensor& a, const ParamRef& w, bool transpose_w) const;

  // Under fp8: A's and B's FP8 operands for a GEMM of layer w.
  void set_fp8(GemmArgs& g, const ParamRef& w, Fp8Role a, Fp8Role b) const;

  Device* dev_;
  GemmCompute compute_;
  LinearFusion fusion_;
  Fp8Linears* fp8_;
};

}  // namespace mpb
