// The CPU implementations of the Device ops (see core/device.h for the
// contracts). Element-wise work runs as OpenMP loops over the scalar cores in
// ops/*.h; GEMMs go to oneDNN (gemm_onednn.h).
#pragma once

#include <cstdint>

#include "core/device.h"

namespace mpb::cpu {

void fill(const Tensor& t, float value);
void cast(const Tensor& dst, const Tensor& src);
void scale(const Tensor& t, float factor);
void add_bias(const Tensor& y, const Tensor& bias);
void activation_forward(Activation act, const Tensor& out, const Tensor& in);
void activation_backward(Activation act, const Tensor& din, const Tensor& dout, const Tensor& pre_act);
void bias_grad(const Tensor& db, const Tensor& dy, GradMode mode);

double softmax_xent_forward(const Tensor& probs, const Tensor& logits, const Tensor& labels);
void softmax_xent_backward(const Tensor& dlogits, const Tensor& probs, const Tensor& labels, float grad_scale);
double softmax_xent_fused(const Tensor& dlogits, const Tensor& logits, const Tensor& labels, float grad_scale);
int64_t count_correct(const Tensor& logits, const Tensor& labels);

TensorStats stats(const Tensor& t);
ExponentHistogram exponent_histogram(const Tensor& t, int lo, int nbins);

void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamWHyper& h,
                float grad_scale, bool fused);
void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const SgdHyper& h,
              float grad_scale);

// Throws std::invalid_argument naming the op when shapes or dtypes disagree.
void require(bool ok, const char* op, const char* what);

}  // namespace mpb::cpu
