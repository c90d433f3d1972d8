// CpuDevice's kernel ops: each hands its (already checked) call to the kernels
// of the ISA chosen when the device was made (backends/cpu/cpu_isa.cpp). The list
// is backends/cpu/kernels/kernel_list.inc; a missing or mistyped line here fails
// to compile against core/device_impl_overrides.inc.
#include "backends/cpu/cpu_device_impl.h"
#include "ops/optimizer.h"

namespace mpb::cpu {

// element-wise
void CpuDevice::fill_impl(const Tensor& t, float value) { kernels_->fill_impl(t, value); }
void CpuDevice::cast_impl(const Tensor& dst, const Tensor& src) { kernels_->cast_impl(dst, src); }
void CpuDevice::scale_impl(const Tensor& t, float factor) { kernels_->scale_impl(t, factor); }
void CpuDevice::add_bias_impl(const Tensor& y, const Tensor& bias) { kernels_->add_bias_impl(y, bias); }
void CpuDevice::activation_forward_impl(Activation act, const Tensor& out, const Tensor& in) {
  kernels_->activation_forward_impl(act, out, in);
}
void CpuDevice::activation_backward_impl(Activation act, const Tensor& din, const Tensor& dout, const Tensor& pre_act) {
  kernels_->activation_backward_impl(act, din, dout, pre_act);
}
void CpuDevice::bias_grad_impl(const Tensor& db, const Tensor& dy, GradMode mode) {
  kernels_->bias_grad_impl(db, dy, mode);
}

// losses
// The kernels return the call's summed loss; deferred, the device adds it to
// its sum in call order, as the CUDA backend's sum on the device does.
double CpuDevice::softmax_xent_forward_impl(const Tensor& probs, const Tensor& logits, const Tensor& labels,
                                            bool deferred) {
  return loss_result(kernels_->softmax_xent_forward_impl(probs, logits, labels), deferred);
}
void CpuDevice::softmax_xent_backward_impl(const Tensor& dlogits, const Tensor& probs, const Tensor& labels,
                                           float grad_scale) {
  kernels_->softmax_xent_backward_impl(dlogits, probs, labels, grad_scale);
}
double CpuDevice::softmax_xent_fused_impl(const Tensor& dlogits, const Tensor& logits, const Tensor& labels,
                                          float grad_scale, bool deferred) {
  return loss_result(kernels_->softmax_xent_fused_impl(dlogits, logits, labels, grad_scale), deferred);
}
double CpuDevice::loss_result(double loss, bool deferred) {
  if (!deferred) return loss;
  loss_sum_ += loss;
  return 0.0;
}
double CpuDevice::loss_sum_read_impl() {
  const double sum = loss_sum_;
  loss_sum_ = 0.0;
  return sum;
}
int64_t CpuDevice::count_correct_impl(const Tensor& logits, const Tensor& labels) {
  return kernels_->count_correct_impl(logits, labels);
}
void CpuDevice::label_positions_impl(const Tensor& pos, const Tensor& pos_labels, const Tensor& labels) {
  kernels_->label_positions_impl(pos, pos_labels, labels);
}

// reductions
TensorStats CpuDevice::stats_impl(const Tensor& t) { return kernels_->stats_impl(t); }
// The decision is the host's: the same statistics as stats(), and the scalar
// core the CUDA backend runs on the device.
void CpuDevice::decide_step_impl(const Tensor& grads, double loss_scale, double grad_clip) {
  const TensorStats st = kernels_->stats_impl(grads);
  const scalar::StepDecision d = scalar::decide_step(st.sum_squares, st.nonfinite, loss_scale, grad_clip);
  decision_ = StepResults{0.0, st, d.skip, d.norm, d.grad_scale};
}
StepResults CpuDevice::step_results_read_impl() {
  StepResults r = decision_;
  r.loss_sum = loss_sum_read_impl();
  return r;
}
ExponentHistogram CpuDevice::exponent_histogram_impl(const Tensor& t, int lo, int nbins) {
  return kernels_->exponent_histogram_impl(t, lo, nbins);
}

// transformer ops: add, LayerNorm, head layouts, dropout
void CpuDevice::add_impl(const Tensor& out, const Tensor& a, const Tensor& b) { kernels_->add_impl(out, a, b); }
void CpuDevice::layernorm_forward_impl(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                                       const Tensor& gamma, const Tensor& beta, float eps) {
  kernels_->layernorm_forward_impl(out, mean, rstd, x, gamma, beta, eps);
}
void CpuDevice::residual_layernorm_forward_impl(const Tensor& out, const Tensor& sum, const Tensor& mean,
                                                const Tensor& rstd, const Tensor& a, const Tensor& b,
                                                const Tensor& gamma, const Tensor& beta, float eps) {
  kernels_->residual_layernorm_forward_impl(out, sum, mean, rstd, a, b, gamma, beta, eps);
}
void CpuDevice::layernorm_backward_impl(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, const Tensor& dout,
                                        const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& gamma,
                                        GradMode dx_mode, GradMode param_mode) {
  kernels_->layernorm_backward_impl(dx, dgamma, dbeta, dout, x, mean, rstd, gamma, dx_mode, param_mode);
}
void CpuDevice::split_heads_impl(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv) {
  kernels_->split_heads_impl(q, k, v, qkv);
}
void CpuDevice::merge_qkv_grads_impl(const Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  kernels_->merge_qkv_grads_impl(dqkv, dq, dk, dv);
}
void CpuDevice::merge_heads_impl(const Tensor& out, const Tensor& in) { kernels_->merge_heads_impl(out, in); }
void CpuDevice::split_heads_grad_impl(const Tensor& din, const Tensor& dout) {
  kernels_->split_heads_grad_impl(din, dout);
}
void CpuDevice::dropout_impl(const Tensor& out, const Tensor& in, float p, uint64_t seed) {
  kernels_->dropout_impl(out, in, p, seed);
}

// attention: masked softmax and fused flash-style attention
void CpuDevice::masked_softmax_forward_impl(const Tensor& probs, const Tensor& scores, const Tensor& key_valid,
                                            float scale, float mask_value) {
  kernels_->masked_softmax_forward_impl(probs, scores, key_valid, scale, mask_value);
}
void CpuDevice::softmax_backward_impl(const Tensor& dscores, const Tensor& probs, const Tensor& dprobs, float scale) {
  kernels_->softmax_backward_impl(dscores, probs, dprobs, scale);
}
void CpuDevice::attention_forward_impl(const AttentionProblem& p, const AttnOperand& out, const Tensor& lse) {
  kernels_->attention_forward_impl(p, out, lse);
}
void CpuDevice::attention_backward_impl(const AttentionProblem& p, const AttnOperand& dq, const AttnOperand& dk,
                                        const AttnOperand& dv, const AttnOperand& dout, const AttnOperand& out,
                                        const Tensor& lse) {
  kernels_->attention_backward_impl(p, dq, dk, dv, dout, out, lse);
}

// embeddings
void CpuDevice::embedding_forward_impl(const Tensor& out, const Tensor& table, const Tensor& ids) {
  kernels_->embedding_forward_impl(out, table, ids);
}
void CpuDevice::embedding_backward_impl(const Tensor& dtable, const Tensor& dout, const Tensor& ids, GradMode mode) {
  kernels_->embedding_backward_impl(dtable, dout, ids, mode);
}

// optimizers: the kernels take the factor; a skipped decision calls none.
bool CpuDevice::resolve(GradScale grad_scale, float& factor) const {
  if (!grad_scale.is_decided()) {
    factor = grad_scale.value();
    return true;
  }
  factor = decision_.grad_scale;
  return !decision_.skip;
}
void CpuDevice::adamw_step_impl(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                                const AdamWHyper& h, GradScale grad_scale, bool fused, const Tensor& param_copy,
                                const std::vector<ElementRange>& no_decay) {
  float factor = 0.0f;
  if (resolve(grad_scale, factor)) kernels_->adamw_step_impl(param, grad, m, v, h, factor, fused, param_copy, no_decay);
}
void CpuDevice::sgd_step_impl(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const SgdHyper& h,
                              GradScale grad_scale, const std::vector<ElementRange>& no_decay) {
  float factor = 0.0f;
  if (resolve(grad_scale, factor)) kernels_->sgd_step_impl(param, grad, momentum_buf, h, factor, no_decay);
}
void CpuDevice::lamb_step_impl(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                               const LambHyper& h, GradScale grad_scale, const Tensor& param_copy,
                               const std::vector<LambTensor>& tensors, const Tensor& scratch) {
  float factor = 0.0f;
  if (resolve(grad_scale, factor))
    kernels_->lamb_step_impl(param, grad, m, v, h, factor, param_copy, tensors, scratch);
}

}  // namespace mpb::cpu
