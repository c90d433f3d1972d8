// The public Device ops of the transformer: add, LayerNorm, head layouts,
// attention, embeddings and dropout: each checks its arguments against the
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

// ---- transformer ops ---------------------------------------------------------------------
void check_layernorm(const char* op, const char* out_name, const Tensor& out, const Tensor& mean,
                     const Tensor& rstd, const char* x_name, const Tensor& x, const Tensor& gamma,
                     const Tensor& beta) {
  if (x.numel() == 0) fail(op, std::string(x_name) + " is empty: " + describe(x));
  need_float(op, x_name, x);
  need_float(op, out_name, out);
  need_shape(op, out_name, out, x_name, x);
  const std::string cols = std::string("[cols] of ") + x_name;
  need_float(op, "gamma", gamma);
  need_numel(op, "gamma", gamma, x.cols(), cols);
  need_float(op, "beta", beta);
  need_numel(op, "beta", beta, x.cols(), cols);
  const std::string rows = std::string("fp32 [rows] of ") + x_name;
  need_dtype(op, "mean", mean, DType::F32);
  need_numel(op, "mean", mean, x.rows(), rows);
  need_dtype(op, "rstd", rstd, DType::F32);
  need_numel(op, "rstd", rstd, x.rows(), rows);
}

// q, k, v (or dq, dk, dv): one shape, one dtype.
void check_qkv(const char* op, const char* names[3], const Tensor& q, const Tensor& k, const Tensor& v) {
  need_shape(op, names[1], k, names[0], q);
  need_shape(op, names[2], v, names[0], q);
  if (k.dtype != q.dtype || v.dtype != q.dtype)
    fail(op, std::string(names[0]) + ", " + names[1] + " and " + names[2] + " must have the same dtype, got " +
                 dtype_name(q.dtype) + ", " + dtype_name(k.dtype) + ", " + dtype_name(v.dtype));
}

// The per-head tensor is 4-D [B,H,T,D]; the packed one holds `parts` x [H, D]
// per token: [B*T, parts*C], [B, T, parts*C], (parts == 3) [B, T, 3, C] or
// (parts == 1) [B, T, H, D].
void check_heads(const char* op, const char* heads_name, const Tensor& heads, const char* packed_name,
                 const Tensor& packed, int parts) {
  if (heads.shape.ndim != 4)
    fail(op, std::string(heads_name) + " must be 4-D [B,H,T,D], got " + describe(heads));
  const int64_t B = heads.shape[0], H = heads.shape[1], T = heads.shape[2], D = heads.shape[3], C = H * D;
  const Shape& p = packed.shape;
  bool ok = packed.numel() == parts * heads.numel() &&
            (p.cols() == parts * C || (parts == 3 && p == Shape{B, T, 3, C}) || (parts == 1 && p == Shape{B, T, H, D}));
  if (ok && p.ndim >= 3) ok = p[0] == B && p[1] == T;  // [B, T, ...]
  if (!ok)
    fail(op, std::string(packed_name) + " " + p.str() + " does not hold " + num(int64_t{parts}) + " x [B,T,H,D] for " +
                 heads_name + " " + heads.shape.str());
  need_float(op, heads_name, heads);
  need_float(op, packed_name, packed);
}

void check_key_valid(const char* op, const Tensor& key_valid, int64_t B, int64_t Tk) {
  need_dtype(op, "key_valid", key_valid, DType::I32);
  need_numel(op, "key_valid", key_valid, B * Tk, "[B,Tk] = [" + num(B) + "," + num(Tk) + "]");
}

void check_attention(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const char* out_name,
                     const Tensor& out, const Tensor& lse, const Tensor& key_valid) {
  if (q.shape.ndim != 4 || k.shape.ndim != 4)
    fail(op, "q and k must be 4-D [B,H,T,D], got q " + describe(q) + ", k " + describe(k));
  const int64_t B = q.shape[0], H = q.shape[1], Tq = q.shape[2], Tk = k.shape[2], D = q.shape[3];
  if (B <= 0 || H <= 0 || Tq <= 0 || Tk <= 0 || D <= 0)
    fail(op, "empty attention: q " + q.shape.str() + ", k " + k.shape.str());
  if (k.shape != Shape{B, H, Tk, D} || v.shape != k.shape)
    fail(op, "k and v must be [B,H,Tk,D] with q's B, H and D: q " + q.shape.str() + ", k " + k.shape.str() +
                 ", v " + v.shape.str());
  if (k.dtype != q.dtype || v.dtype != q.dtype)
    fail(op, std::string("q, k and v must have the same dtype, got ") + dtype_name(q.dtype) + ", " +
                 dtype_name(k.dtype) + ", " + dtype_name(v.dtype));
  need_shape(op, out_name, out, "q", q);
  need_dtype(op, "lse", lse, DType::F32);
  need_numel(op, "lse", lse, B * H * Tq, "fp32 [B,H,Tq]");
  need_floats(op, {{"q", &q}, {"k", &k}, {"v", &v}});
  need_float(op, out_name, out);
  check_key_valid(op, key_valid, B, Tk);
}

void check_embedding(const char* op, const char* rows_name, const Tensor& rows, const char* table_name,
                     const Tensor& table, const Tensor& ids) {
  if (table.shape.ndim < 2 || rows.cols() != table.cols())
    fail(op, std::string(rows_name) + " and " + table_name + " must have the same columns (" + table_name +
                 " at least 2-D), got " + describe(rows) + " and " + describe(table));
  need_float(op, rows_name, rows);
  need_float(op, table_name, table);
  need_dtype(op, "ids", ids, DType::I32);
  need_numel(op, "ids", ids, rows.rows(), std::string("[rows] of ") + rows_name);
}

}  // namespace

// ---- transformer ops -----------------------------------------------------------------------
void Device::add(const Tensor& out, const Tensor& a, const Tensor& b) {
  need_same_numel("add", "a", a, "out", out);
  need_same_numel("add", "b", b, "out", out);
  need_float("add", "out", out);
  need_float("add", "a", a);
  need_float("add", "b", b);
  add_impl(out, a, b);
}

void Device::layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                               const Tensor& gamma, const Tensor& beta, float eps) {
  check_layernorm("layernorm_forward", "out", out, mean, rstd, "x", x, gamma, beta);
  layernorm_forward_impl(out, mean, rstd, x, gamma, beta, eps);
}

void Device::residual_layernorm_forward(const Tensor& out, const Tensor& sum, const Tensor& mean,
                                        const Tensor& rstd, const Tensor& a, const Tensor& b, const Tensor& gamma,
                                        const Tensor& beta, float eps) {
  const char* op = "residual_layernorm_forward";
  check_layernorm(op, "out", out, mean, rstd, "sum", sum, gamma, beta);
  need_same_numel(op, "a", a, "sum", sum);
  need_same_numel(op, "b", b, "sum", sum);
  need_float(op, "a", a);
  need_float(op, "b", b);
  need_distinct(op, "out", out, "sum", sum, "both are outputs");
  residual_layernorm_forward_impl(out, sum, mean, rstd, a, b, gamma, beta, eps);
}

void Device::layernorm_backward(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, const Tensor& dout,
                                const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& gamma,
                                GradMode dx_mode, GradMode param_mode) {
  const char* op = "layernorm_backward";
  check_layernorm(op, "dout", dout, mean, rstd, "x", x, gamma, gamma);
  need_float(op, "dx", dx);
  need_shape(op, "dx", dx, "x", x);
  need_float(op, "dgamma", dgamma);
  need_numel(op, "dgamma", dgamma, x.cols(), "[cols] of x");
  need_float(op, "dbeta", dbeta);
  need_numel(op, "dbeta", dbeta, x.cols(), "[cols] of x");
  layernorm_backward_impl(dx, dgamma, dbeta, dout, x, mean, rstd, gamma, dx_mode, param_mode);
}

void Device::split_heads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv) {
  const char* names[3] = {"q", "k", "v"};
  check_qkv("split_heads", names, q, k, v);
  check_heads("split_heads", "q", q, "qkv", qkv, 3);
  split_heads_impl(q, k, v, qkv);
}

void Device::merge_qkv_grads(const Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const char* names[3] = {"dq", "dk", "dv"};
  check_qkv("merge_qkv_grads", names, dq, dk, dv);
  check_heads("merge_qkv_grads", "dq", dq, "dqkv", dqkv, 3);
  merge_qkv_grads_impl(dqkv, dq, dk, dv);
}

void Device::merge_heads(const Tensor& out, const Tensor& in) {
  check_heads("merge_heads", "in", in, "out", out, 1);
  need_distinct("merge_heads", "out", out, "in", in, "a permutation");
  merge_heads_impl(out, in);
}

void Device::split_heads_grad(const Tensor& din, const Tensor& dout) {
  check_heads("split_heads_grad", "din", din, "dout", dout, 1);
  need_distinct("split_heads_grad", "din", din, "dout", dout, "a permutation");
  split_heads_grad_impl(din, dout);
}

void Device::masked_softmax_forward(const Tensor& probs, const Tensor& scores, const Tensor& key_valid,
                                    float scale, float mask_value) {
  const char* op = "masked_softmax_forward";
  if (scores.shape.ndim != 4) fail(op, "scores must be 4-D [B,H,Tq,Tk], got " + describe(scores));
  need_shape(op, "probs", probs, "scores", scores);
  need_float(op, "scores", scores);
  need_float(op, "probs", probs);
  check_key_valid(op, key_valid, scores.shape[0], scores.shape[3]);
  masked_softmax_forward_impl(probs, scores, key_valid, scale, mask_value);
}

void Device::softmax_backward(const Tensor& dscores, const Tensor& probs, const Tensor& dprobs, float scale) {
  const char* op = "softmax_backward";
  if (probs.numel() == 0) fail(op, "probs is empty: " + describe(probs));
  need_shape(op, "dprobs", dprobs, "probs", probs);
  need_shape(op, "dscores", dscores, "probs", probs);
  need_floats(op, {{"dscores", &dscores}, {"probs", &probs}, {"dprobs", &dprobs}});
  softmax_backward_impl(dscores, probs, dprobs, scale);
}

namespace {
// Every fused-attention op's dropout rule (core/attention_layout.h).
void check_dropout(const char* op, AttnDropout d) {
  if (!(d.p >= 0.0f && d.p < 1.0f)) fail(op, "dropout p must be in [0, 1), got " + num(double(d.p)));
}

// The problem of attention_forward/backward's contiguous [B,H,T,D] operands
// (their shapes checked by the caller), the dropout checked here as
// packed_problem checks it.
AttentionProblem heads_problem(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& key_valid, float scale, float mask_value, AttnDropout dropout) {
  check_dropout(op, dropout);
  AttentionProblem p;
  p.dropout = dropout;
  p.B = q.shape[0], p.H = q.shape[1], p.Tq = q.shape[2], p.Tk = k.shape[2], p.D = q.shape[3];
  p.q = {q, heads_layout(p.H, p.Tq, p.D)};
  p.k = {k, heads_layout(p.H, p.Tk, p.D)};
  p.v = {v, heads_layout(p.H, p.Tk, p.D)};
  p.key_valid = key_valid;
  p.scale = scale, p.mask_value = mask_value;
  return p;
}

// Checks the packed ops' common arguments and returns their problem: q, k, v
// parts 0..2 of qkv [B,T,3,H,D]. out (and dout) [B,T,H,D] is checked by the
// caller through check_packed_out.
AttentionProblem packed_problem(const char* op, const Tensor& out, const Tensor& lse, const Tensor& qkv,
                                const Tensor& key_valid, float scale, float mask_value, AttnDropout dropout) {
  need_dtype(op, "lse", lse, DType::F32);
  if (lse.shape.ndim != 3 || lse.shape[0] <= 0 || lse.shape[1] <= 0 || lse.shape[2] <= 0)
    fail(op, "lse must be a non-empty fp32 [B,H,T] (it gives B, H and T), got " + describe(lse));
  AttentionProblem p;
  p.B = lse.shape[0], p.H = lse.shape[1], p.Tq = p.Tk = lse.shape[2];
  const int64_t N = p.B * p.Tq, n_out = out.numel();
  if (n_out == 0 || n_out % N != 0 || (n_out / N) % p.H != 0)
    fail(op, "out " + describe(out) + " does not hold [B,T,H,D] for lse's B " + num(p.B) + ", H " + num(p.H) +
                 " and T " + num(p.Tq));
  const int64_t C = n_out / N;
  p.D = C / p.H;
  if (!(out.rows() == N && out.cols() == C) && out.shape != Shape{p.B, p.Tq, C} &&
      out.shape != Shape{p.B, p.Tq, p.H, p.D})
    fail(op, "out must be [B*T, C], [B,T,C] or [B,T,H,D] for B " + num(p.B) + ", T " + num(p.Tq) + ", C " + num(C) +
                 ", got " + describe(out));
  if (!(qkv.rows() == N && qkv.cols() == 3 * C) && qkv.shape != Shape{p.B, p.Tq, 3, C})
    fail(op, "qkv must be [B*T, 3C], [B,T,3C] or [B,T,3,C] for B " + num(p.B) + ", T " + num(p.Tq) + ", C " +
                 num(C) + ", got " + describe(qkv));
  need_float(op, "qkv", qkv);
  need_float(op, "out", out);
  check_key_valid(op, key_valid, p.B, p.Tk);
  need_distinct(op, "out", out, "qkv", qkv, "qkv is read while out is written");
  check_dropout(op, dropout);
  p.dropout = dropout;
  p.q = {qkv, packed_layout(p.Tq, p.H, p.D, 3, 0)};
  p.k = {qkv, packed_layout(p.Tk, p.H, p.D, 3, 1)};
  p.v = {qkv, packed_layout(p.Tk, p.H, p.D, 3, 2)};
  p.key_valid = key_valid;
  p.scale = scale, p.mask_value = mask_value;
  return p;
}
}  // namespace

void Device::attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                               const Tensor& v, const Tensor& key_valid, float scale, float mask_value,
                               AttnDropout dropout) {
  check_attention("attention_forward", q, k, v, "out", out, lse, key_valid);
  const AttentionProblem p = heads_problem("attention_forward", q, k, v, key_valid, scale, mask_value, dropout);
  const int64_t notes = attention_impl_notes_;
  attention_forward_impl(p, {out, p.q.at}, lse);
  count_attention_impl(notes);
}

void Device::attention_forward_packed(const Tensor& out, const Tensor& lse, const Tensor& qkv,
                                      const Tensor& key_valid, float scale, float mask_value, AttnDropout dropout) {
  const AttentionProblem p =
      packed_problem("attention_forward_packed", out, lse, qkv, key_valid, scale, mask_value, dropout);
  const int64_t notes = attention_impl_notes_;
  attention_forward_impl(p, {out, packed_layout(p.Tq, p.H, p.D, 1, 0)}, lse);
  count_attention_impl(notes);
}

void Device::attention_backward_packed(const Tensor& dqkv, const Tensor& dout, const Tensor& out,
                                       const Tensor& lse, const Tensor& qkv, const Tensor& key_valid, float scale,
                                       float mask_value, AttnDropout dropout) {
  const char* op = "attention_backward_packed";
  const AttentionProblem p = packed_problem(op, out, lse, qkv, key_valid, scale, mask_value, dropout);
  need_shape(op, "dout", dout, "out", out);
  need_shape(op, "dqkv", dqkv, "qkv", qkv);
  need_float(op, "dout", dout);
  need_float(op, "dqkv", dqkv);
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"qkv", &qkv}, {"out", &out}, {"dout", &dout}})
    need_distinct(op, "dqkv", dqkv, name, *t, "an input of the backward pass");
  const HeadLayout o = packed_layout(p.Tq, p.H, p.D, 1, 0);
  const int64_t notes = attention_impl_notes_;
  attention_backward_impl(p, {dqkv, p.q.at}, {dqkv, p.k.at}, {dqkv, p.v.at}, {dout, o}, {out, o}, lse);
  count_attention_impl(notes);
}

void Device::attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                                const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                                const Tensor& v, const Tensor& key_valid, float scale, float mask_value,
                                AttnDropout dropout) {
  const char* op = "attention_backward";
  check_attention(op, q, k, v, "out", out, lse, key_valid);
  need_shape(op, "dout", dout, "q", q);
  need_shape(op, "dq", dq, "q", q);
  need_shape(op, "dk", dk, "k", k);
  need_shape(op, "dv", dv, "k", k);
  need_floats(op, {{"dq", &dq}, {"dk", &dk}, {"dv", &dv}, {"dout", &dout}});
  const AttentionProblem p = heads_problem(op, q, k, v, key_valid, scale, mask_value, dropout);
  const int64_t notes = attention_impl_notes_;
  attention_backward_impl(p, {dq, p.q.at}, {dk, p.k.at}, {dv, p.v.at}, {dout, p.q.at}, {out, p.q.at}, lse);
  count_attention_impl(notes);
}

void Device::count_attention_impl(int64_t notes_before) {
  if (attention_impl_notes_ == notes_before)
    note_attention_impl(std::string(device_kind_name(info().kind)) + "_kernel");
}

void Device::embedding_forward(const Tensor& out, const Tensor& table, const Tensor& ids) {
  check_embedding("embedding_forward", "out", out, "table", table, ids);
  embedding_forward_impl(out, table, ids);
}

void Device::embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids, GradMode mode) {
  check_embedding("embedding_backward", "dout", dout, "dtable", dtable, ids);
  need_distinct("embedding_backward", "dout", dout, "dtable", dtable, "it is read while dtable is written");
  embedding_backward_impl(dtable, dout, ids, mode);
}

void Device::dropout(const Tensor& out, const Tensor& in, float p, uint64_t seed) {
  need_same_numel("dropout", "out", out, "in", in);
  if (!(p >= 0.0f && p < 1.0f)) fail("dropout", "p must be in [0, 1), got " + num(double(p)));
  need_float("dropout", "out", out);
  need_float("dropout", "in", in);
  dropout_impl(out, in, p, seed);
}

}  // namespace mpb
