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
                float grad_scale, bool fused, const Tensor& param_copy);
void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const SgdHyper& h,
              float grad_scale);

// Transformer ops (ops/cpu/transformer.cpp, attention.cpp, embedding.cpp).
void add(const Tensor& out, const Tensor& a, const Tensor& b);
void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                       const Tensor& gamma, const Tensor& beta, float eps);
void residual_layernorm_forward(const Tensor& out, const Tensor& sum, const Tensor& mean, const Tensor& rstd,
                                const Tensor& a, const Tensor& b, const Tensor& gamma, const Tensor& beta,
                                float eps);
void layernorm_backward(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, const Tensor& dout,
                        const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& gamma,
                        GradMode dx_mode, GradMode param_mode);
void split_heads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv);
void merge_qkv_grads(const Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv);
void merge_heads(const Tensor& out, const Tensor& in);
void split_heads_grad(const Tensor& din, const Tensor& dout);
void dropout(const Tensor& out, const Tensor& in, float p, uint64_t seed);

void masked_softmax_forward(const Tensor& probs, const Tensor& scores, const Tensor& key_valid, float scale,
                            float mask_value);
void softmax_backward(const Tensor& dscores, const Tensor& probs, const Tensor& dprobs, float scale);
void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& key_valid, float scale, float mask_value);
void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                        const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& key_valid, float scale, float mask_value);

void embedding_forward(const Tensor& out, const Tensor& table, const Tensor& ids);
void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids, GradMode mode);

// Throws std::invalid_argument naming the op when shapes or dtypes disagree.
void require(bool ok, const char* op, const char* what);

}  // namespace mpb::cpu
