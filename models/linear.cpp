#include "models/linear.h"

namespace mpb {

GemmArgs LinearOps::times_weight(const Tensor& c, const Tensor& a, const ParamRef& w, bool transpose_w) const {
  GemmArgs g;  // forward: out[M,out] = in[M,in] . W^T; input gradient: dx[M,in] = dy[M,out] . W
  g.m = a.rows();
  g.n = w.c.shape[transpose_w ? 0 : 1];
  g.k = w.c.shape[transpose_w ? 1 : 0];
  g.a = a;
  g.b = w.c;
  g.trans_b = transpose_w;
  g.c = c;
  g.compute = compute_;
  // Forward: input x weight; input gradient: grad_output x weight.
  set_fp8(g, w, transpose_w ? Fp8Role::Input : Fp8Role::GradOutput, Fp8Role::Weight);
  return g;
}

void LinearOps::set_fp8(GemmArgs& g, const ParamRef& w, Fp8Role a, Fp8Role b) const {
  if (!fp8_) return;
  g.fp8_a = fp8_->operand(w.c.data, a, g.a.numel());
  g.fp8_b = fp8_->operand(w.c.data, b, g.b.numel());
}

namespace {
// The bias a fused epilogue reads: the compute copy when it has the output's
// dtype (the GEMM library adds a bias of D's type, so the fp32 master would
// cost a cast per GEMM on the GPU; the copy is that same rounding, kept
// current by the optimizer), otherwise the parameter (an fp32 output keeps
// the unrounded bias).
const Tensor& epilogue_bias(const ParamRef& b, const Tensor& out) { return b.c.dtype == out.dtype ? b.c : b.p; }
}  // namespace

void LinearOps::forward(const Tensor& out, const Tensor& in, const ParamRef& w, const ParamRef& b) const {
  GemmArgs g = times_weight(out, in, w, /*transpose_w=*/true);
  if (fusion_.forward) {
    g.epilogue = Epilogue::Bias;
    g.bias = epilogue_bias(b, out);
    dev_->gemm(g);
    return;
  }
  dev_->gemm(g);
  dev_->add_bias(out, b.p);
}

void LinearOps::forward(const Tensor& out, const Tensor& pre, const Tensor& in, const ParamRef& w,
                        const ParamRef& b, Activation act) const {
  if (fusion_.forward) {
    GemmArgs g = times_weight(out, in, w, /*transpose_w=*/true);
    g.pre_act = pre;
    g.epilogue = act == Activation::Gelu ? Epilogue::BiasGelu : Epilogue::BiasRelu;
    g.bias = epilogue_bias(b, out);
    dev_->gemm(g);
    return;
  }
  dev_->gemm(times_weight(pre, in, w, /*transpose_w=*/true));
  dev_->add_bias(pre, b.p);
  dev_->activation_forward(act, out, pre);
}

void LinearOps::weight_grad(const ParamRef& w, const ParamRef& b, const Tensor& dy, const Tensor& in,
                            GradMode mode) const {
  GemmArgs g;  // dW[n,k] (+)= dy[M,n]^T . in[M,k]
  g.m = w.g.shape[0];
  g.n = w.g.shape[1];
  g.k = dy.rows();
  g.trans_a = true;
  g.a = dy;
  g.b = in;
  g.c = w.g;
  g.beta = mode == GradMode::Accumulate ? 1.0f : 0.0f;
  g.compute = compute_;
  set_fp8(g, w, Fp8Role::GradOutput, Fp8Role::Input);
  dev_->gemm(g);
  if (!b.g.empty()) dev_->bias_grad(b.g, dy, mode);
}

void LinearOps::input_grad(const Tensor& dx, const Tensor& dy, const ParamRef& w, GradMode dx_mode) const {
  GemmArgs g = times_weight(dx, dy, w, /*transpose_w=*/false);
  g.beta = dx_mode == GradMode::Accumulate ? 1.0f : 0.0f;
  dev_->gemm(g);
}

bool LinearOps::input_grad(const Tensor& dx, const Tensor& dy, const ParamRef& w, Activation act, const Tensor& pre,
                           const ParamRef& b_below, GradMode mode) const {
  GemmArgs g = times_weight(dx, dy, w, /*transpose_w=*/false);
  if (fusion_.backward && act == Activation::Gelu) {
    const bool bgrad = mode == GradMode::Overwrite && !b_below.g.empty();
    g.pre_act = pre;
    g.epilogue = bgrad ? Epilogue::DGeluBGrad : Epilogue::DGelu;
    if (bgrad) g.bias_grad_out = b_below.g;
    dev_->gemm(g);
    return bgrad;
  }
  dev_->gemm(g);
  dev_->activation_backward(act, dx, dx, pre);
  return false;
}

}  // namespace mpb
