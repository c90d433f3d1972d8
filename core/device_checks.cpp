// The public Device ops: element-wise, losses, reductions, FP8 scaling and
// optimizers (memory and the GEMM: device_checks_gemm.cpp; the transformer
// ops: device_checks_transformer.cpp): each checks its arguments against the
// contract in core/device.h, once, for every backend, then calls the
// backend's *_impl. A backend never repeats these checks; it checks only its
// own limits (marked "backend limit" where they are). The rules they check
// with: core/device_check_rules.h.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/device_check_rules.h"

namespace mpb {

using namespace device_rules;  // NOLINT(google-build-using-namespace): the checks' own vocabulary

namespace {

// ---- losses ----------------------------------------------------------------------------
// logits float [B,C]; labels int32 [B]; out (probs/dlogits) float with the logits' count.
void check_xent(const char* op, const char* logits_name, const Tensor& logits, const Tensor& labels,
                const char* out_name, const Tensor& out) {
  need_float(op, logits_name, logits);
  need_dtype(op, "labels", labels, DType::I32);
  need_numel(op, "labels", labels, logits.rows(), std::string("[rows] of ") + logits_name);
  need_float(op, out_name, out);
  need_numel(op, out_name, out, logits.numel(), std::string("as many as ") + logits_name);
}


// ---- optimizers ------------------------------------------------------------------------
// Element ranges of t: each non-empty and within t, in increasing order, none overlapping.
void need_ranges(const char* op, const char* name, const std::vector<ElementRange>& ranges, const Tensor& t) {
  int64_t prev_end = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const ElementRange& r = ranges[i];
    const std::string at = std::string(name) + "[" + std::to_string(i) + "] [" + num(r.begin) + ", " + num(r.end) + ")";
    if (r.begin >= r.end) fail(op, at + " is empty");
    if (r.begin < prev_end) fail(op, at + " is out of order or overlaps the range before it");
    if (r.end > t.numel()) fail(op, at + " is beyond the tensor's " + num(t.numel()) + " elements");
    prev_end = r.end;
  }
}

void check_state(const char* op, const Tensor& p, const Tensor& g, const char* state_name, const Tensor& s) {
  need_dtype(op, state_name, s, DType::F32);
  need_float(op, "param", p);
  need_float(op, "grad", g);
  need_same_numel(op, "grad", g, "param", p);
  need_same_numel(op, state_name, s, "param", p);
}

// What AdamW and LAMB share: the two moments beside the parameters, a 1-based
// step (bias correction divides by 1 - beta^step), an optional float copy.
void check_adam_state(const char* op, const Tensor& param, const Tensor& grad, const Tensor& m,
                      const Tensor& v, int64_t step, const Tensor& param_copy) {
  check_state(op, param, grad, "m", m);
  check_state(op, param, grad, "v", v);
  if (step < 1) fail(op, "step is 1-based, got " + num(step));
  if (!param_copy.empty()) {
    need_float(op, "param_copy", param_copy);
    need_same_numel(op, "param_copy", param_copy, "param", param);
  }
}

}  // namespace

// ---- element-wise --------------------------------------------------------------------------
void Device::fill(const Tensor& t, float value) {
  need_float("fill", "t", t);
  fill_impl(t, value);
}

void Device::cast(const Tensor& dst, const Tensor& src) {
  need_same_numel("cast", "dst", dst, "src", src);
  need_float("cast", "dst", dst);
  need_float("cast", "src", src);
  cast_impl(dst, src);
}

void Device::scale(const Tensor& t, float factor) {
  need_float("scale", "t", t);
  scale_impl(t, factor);
}

void Device::add_bias(const Tensor& y, const Tensor& bias) {
  need_float("add_bias", "y", y);
  need_float("add_bias", "bias", bias);
  need_numel("add_bias", "bias", bias, y.cols(), "[cols] of y " + describe(y));
  add_bias_impl(y, bias);
}

void Device::activation_forward(Activation act, const Tensor& out, const Tensor& in) {
  need_same_numel("activation_forward", "out", out, "in", in);
  need_float("activation_forward", "out", out);
  need_float("activation_forward", "in", in);
  activation_forward_impl(act, out, in);
}

void Device::activation_backward(Activation act, const Tensor& din, const Tensor& dout, const Tensor& pre_act) {
  const char* op = "activation_backward";
  need_same_numel(op, "dout", dout, "din", din);
  need_same_numel(op, "pre_act", pre_act, "din", din);
  need_floats(op, {{"din", &din}, {"dout", &dout}, {"pre_act", &pre_act}});
  activation_backward_impl(act, din, dout, pre_act);
}

void Device::bias_grad(const Tensor& db, const Tensor& dy, GradMode mode) {
  need_float("bias_grad", "dy", dy);
  need_float("bias_grad", "db", db);
  need_numel("bias_grad", "db", db, dy.cols(), "[cols] of dy " + describe(dy));
  bias_grad_impl(db, dy, mode);
}

// ---- losses --------------------------------------------------------------------------------
namespace {
void check_xent_forward(const char* op, const Tensor& probs, const Tensor& logits, const Tensor& labels) {
  check_xent(op, "logits", logits, labels, "probs", probs);
  need_dtype(op, "probs", probs, DType::F32);
  if (probs.data == logits.data && logits.dtype != DType::F32)
    fail(op, "probs may overwrite the logits only when they are fp32, got " + describe(logits));
}

void check_xent_fused(const char* op, const Tensor& dlogits, const Tensor& logits, const Tensor& labels) {
  check_xent(op, "logits", logits, labels, "dlogits", dlogits);
  if (dlogits.data == logits.data && dlogits.dtype != logits.dtype)
    fail(op, "dlogits overwriting the logits must have their dtype, got dlogits " + describe(dlogits) +
                 ", logits " + describe(logits));
}
}  // namespace

double Device::softmax_xent_forward(const Tensor& probs, const Tensor& logits, const Tensor& labels) {
  check_xent_forward("softmax_xent_forward", probs, logits, labels);
  note_host_sync();
  return softmax_xent_forward_impl(probs, logits, labels, /*deferred=*/false);
}

void Device::softmax_xent_forward_deferred(const Tensor& probs, const Tensor& logits, const Tensor& labels) {
  check_xent_forward("softmax_xent_forward", probs, logits, labels);
  softmax_xent_forward_impl(probs, logits, labels, /*deferred=*/true);
}

void Device::softmax_xent_backward(const Tensor& dlogits, const Tensor& probs, const Tensor& labels,
                                   float grad_scale) {
  const char* op = "softmax_xent_backward";
  check_xent(op, "probs", probs, labels, "dlogits", dlogits);
  need_dtype(op, "probs", probs, DType::F32);
  softmax_xent_backward_impl(dlogits, probs, labels, grad_scale);
}

double Device::softmax_xent_fused(const Tensor& dlogits, const Tensor& logits, const Tensor& labels,
                                  float grad_scale) {
  check_xent_fused("softmax_xent_fused", dlogits, logits, labels);
  note_host_sync();
  return softmax_xent_fused_impl(dlogits, logits, labels, grad_scale, /*deferred=*/false);
}

void Device::softmax_xent_fused_deferred(const Tensor& dlogits, const Tensor& logits, const Tensor& labels,
                                         float grad_scale) {
  check_xent_fused("softmax_xent_fused", dlogits, logits, labels);
  softmax_xent_fused_impl(dlogits, logits, labels, grad_scale, /*deferred=*/true);
}

double Device::read_loss_sum() {
  note_host_sync();
  return read_loss_sum_impl();
}

int64_t Device::count_correct(const Tensor& logits, const Tensor& labels) {
  const char* op = "count_correct";
  need_float(op, "logits", logits);
  need_dtype(op, "labels", labels, DType::I32);
  need_numel(op, "labels", labels, logits.rows(), "[rows] of logits");
  note_host_sync();
  return count_correct_impl(logits, labels);
}

void Device::label_positions(const Tensor& pos, const Tensor& pos_labels, const Tensor& labels) {
  const char* op = "label_positions";
  need_dtype(op, "labels", labels, DType::I32);
  need_dtype(op, "pos", pos, DType::I32);
  need_dtype(op, "pos_labels", pos_labels, DType::I32);
  if (pos.numel() < 1 || pos.numel() > labels.numel())
    fail(op, "pos must hold between 1 and labels' " + num(labels.numel()) + " positions, got " + describe(pos));
  need_numel(op, "pos_labels", pos_labels, pos.numel(), "as many as pos");
  need_distinct(op, "pos", pos, "labels", labels, "labels is read while pos is written");
  need_distinct(op, "pos_labels", pos_labels, "labels", labels, "labels is read while pos_labels is written");
  need_distinct(op, "pos", pos, "pos_labels", pos_labels, "both are outputs");
  label_positions_impl(pos, pos_labels, labels);
}

// ---- reductions ----------------------------------------------------------------------------
TensorStats Device::stats(const Tensor& t) {
  need_float("stats", "t", t);
  note_host_sync();
  return stats_impl(t);
}

void Device::decide_step(const Tensor& grads, double loss_scale, double grad_clip) {
  need_float("decide_step", "grads", grads);
  // 0 is allowed: a dynamic scale that backed off to nothing (no `min`) still
  // gets the host formula's answer, as it did before the decision moved here.
  if (!(loss_scale >= 0.0) || !std::isfinite(loss_scale))
    fail("decide_step", "loss_scale must be finite and >= 0, got " + std::to_string(loss_scale));
  decide_step_impl(grads, loss_scale, grad_clip);
  decided_ = true;
}

StepResults Device::read_step_results() {
  if (!decided_) throw std::logic_error("read_step_results: no decide_step has run on this device");
  note_host_sync();
  return read_step_results_impl();
}

ExponentHistogram Device::exponent_histogram(const Tensor& t, int lo, int nbins) {
  if (nbins < 1) fail("exponent_histogram", "nbins must be >= 1, got " + num(int64_t{nbins}));
  need_float("exponent_histogram", "t", t);
  note_host_sync();
  return exponent_histogram_impl(t, lo, nbins);
}


// ---- FP8 delayed scaling -----------------------------------------------------------------------
void Device::fp8_update_scales(const Tensor& scale, const Tensor& amax, const Tensor& history, const Tensor& steps,
                               const Tensor& fp8_max, const std::vector<bool>& touched, int margin,
                               bool most_recent) {
  const char* op = "fp8_update_scales";
  need_dtype(op, "scale", scale, DType::F32);
  const int64_t n = scale.numel();
  if (n > kFp8MaxSlots) fail(op, "at most " + num(kFp8MaxSlots) + " slots, got " + num(n));
  if (static_cast<int64_t>(touched.size()) != n)
    fail(op, "touched has " + num(static_cast<int64_t>(touched.size())) + " entries, scale " + num(n));
  need_dtype(op, "amax", amax, DType::F32);
  need_numel(op, "amax", amax, n, "[n] of scale");
  need_dtype(op, "fp8_max", fp8_max, DType::F32);
  need_numel(op, "fp8_max", fp8_max, n, "[n] of scale");
  need_dtype(op, "steps", steps, DType::I32);
  need_numel(op, "steps", steps, n, "[n] of scale");
  need_dtype(op, "history", history, DType::F32);
  if (history.shape.ndim != 2 || history.shape[0] != n || history.shape[1] < 1)
    fail(op, "history must be [n, len] with len >= 1, n = " + num(n));
  if (margin < 0) fail(op, "margin must be >= 0, got " + num(int64_t{margin}));
  fp8_update_scales_impl(scale, amax, history, steps, fp8_max, touched, margin, most_recent);
}

// ---- optimizers ------------------------------------------------------------------------------
namespace {
void need_decision(const char* op, GradScale grad_scale, bool decided) {
  if (grad_scale.is_decided() && !decided)
    throw std::logic_error(std::string(op) + ": GradScale::decided() before any decide_step on this device");
}
}  // namespace

void Device::adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                        const AdamWHyper& h, GradScale grad_scale, bool fused, const Tensor& param_copy,
                        const std::vector<ElementRange>& no_decay) {
  const char* op = "adamw_step";
  need_decision(op, grad_scale, decided_);
  check_adam_state(op, param, grad, m, v, h.step, param_copy);
  need_ranges(op, "no_decay", no_decay, param);
  adamw_step_impl(param, grad, m, v, h, grad_scale, fused, param_copy, no_decay);
}

void Device::sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const SgdHyper& h,
                      GradScale grad_scale, const std::vector<ElementRange>& no_decay) {
  need_decision("sgd_step", grad_scale, decided_);
  check_state("sgd_step", param, grad, "momentum_buf", momentum_buf);
  need_ranges("sgd_step", "no_decay", no_decay, param);
  sgd_step_impl(param, grad, momentum_buf, h, grad_scale, no_decay);
}

void Device::lamb_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const LambHyper& h,
                       GradScale grad_scale, const Tensor& param_copy, const std::vector<LambTensor>& tensors,
                       const Tensor& scratch) {
  const char* op = "lamb_step";
  need_decision(op, grad_scale, decided_);
  check_adam_state(op, param, grad, m, v, h.step, param_copy);
  // The tensors tile the parameters: every element belongs to exactly one trust ratio.
  if (tensors.empty()) fail(op, "tensors is empty");
  int64_t next = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const LambTensor& t = tensors[i];
    const std::string at = "tensors[" + std::to_string(i) + "] [" + num(t.begin) + ", " + num(t.end) + ")";
    if (t.begin >= t.end) fail(op, at + " is empty");
    if (t.begin != next) fail(op, at + " does not start where the tensor before it ends (" + num(next) + ")");
    next = t.end;
  }
  if (next != param.numel()) fail(op, "tensors end at " + num(next) + ", param has " + num(param.numel()) + " elements");
  need_dtype(op, "scratch", scratch, DType::F32);
  const int64_t want = lamb_scratch_floats(tensors.size());
  if (scratch.numel() < want) fail(op, "scratch has " + num(scratch.numel()) + " elements, needs " + num(want));
  lamb_step_impl(param, grad, m, v, h, grad_scale, param_copy, tensors, scratch);
}

}  // namespace mpb
