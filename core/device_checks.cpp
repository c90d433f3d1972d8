// The public Device ops: each checks its arguments against the contract in
// core/device.h, once, for every backend, then calls the backend's *_impl.
// A backend never repeats these checks; it checks only its own limits (marked
// "backend limit" where they are).
//
// Messages are "<op>: <argument> <what is wrong>", with dtypes and shapes
// ("float16 [4,8]"). Checks only compare numbers: they never read tensor data
// and never build a string unless they fail.
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/device.h"

namespace mpb {

namespace {

std::string describe(const Tensor& t) { return std::string(dtype_name(t.dtype)) + " " + t.shape.str(); }
std::string num(int64_t v) { return std::to_string(v); }
std::string num(double v) { return std::to_string(v); }

[[noreturn]] void fail(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string(op) + ": " + what);
}

// A tensor with elements must have data.
void need_data(const char* op, const char* name, const Tensor& t) {
  if (t.numel() > 0 && t.data == nullptr) fail(op, std::string(name) + " " + describe(t) + " has null data");
}

void need_float(const char* op, const char* name, const Tensor& t) {
  if (!is_float(t.dtype)) fail(op, std::string(name) + " must be a float tensor, got " + describe(t));
  need_data(op, name, t);
}

// need_float for each (name, tensor) of an op's float operands, in order.
void need_floats(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> operands) {
  for (const auto& [name, t] : operands) need_float(op, name, *t);
}

void need_dtype(const char* op, const char* name, const Tensor& t, DType want) {
  if (t.dtype != want) fail(op, std::string(name) + " must be " + dtype_name(want) + ", got " + describe(t));
  need_data(op, name, t);
}

// numel(t) == n; `what` says where n comes from ("[cols] of y").
void need_numel(const char* op, const char* name, const Tensor& t, int64_t n, const std::string& what) {
  if (t.numel() != n)
    fail(op, std::string(name) + " must hold " + num(n) + " elements (" + what + "), got " + describe(t));
}

void need_same_numel(const char* op, const char* name, const Tensor& t, const char* ref_name, const Tensor& ref) {
  if (t.numel() != ref.numel())
    fail(op, "element counts differ: " + std::string(name) + " " + describe(t) + ", " + ref_name + " " +
                 describe(ref));
}

void need_shape(const char* op, const char* name, const Tensor& t, const char* ref_name, const Tensor& ref) {
  if (t.shape != ref.shape)
    fail(op, std::string(name) + " must have " + ref_name + "'s shape " + ref.shape.str() + ", got " + describe(t));
}

// Two tensors with elements must not share their first element.
void need_distinct(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b,
                   const char* why) {
  if (a.numel() > 0 && b.numel() > 0 && a.data == b.data)
    fail(op, std::string(a_name) + " must not share " + b_name + "'s memory (" + why + ")");
}

// ---- GEMM ------------------------------------------------------------------------------
int64_t batch_span(int64_t batch, int64_t stride, int64_t size) { return (batch - 1) * stride + size; }

DType operand_dtype(GemmCompute c) {
  switch (c) {
    case GemmCompute::F16: return DType::F16;
    case GemmCompute::BF16: return DType::BF16;
    default: return DType::F32;
  }
}

void check_fp8_operand(const char* which, const GemmFp8Operand& f) {
  const char* op = "gemm";
  const std::string name = std::string("fp8_") + which;
  if (f.scale.dtype != DType::F32 || f.scale.numel() != 1 || f.scale.data == nullptr)
    fail(op, name + ".scale must be one float32 on the device, got " + describe(f.scale));
  if (!f.amax.empty() && (f.amax.dtype != DType::F32 || f.amax.numel() != 1))
    fail(op, name + ".amax must be empty or one float32, got " + describe(f.amax));
  if (!f.saturated.empty() && (f.saturated.dtype != DType::F32 || f.saturated.numel() != 1))
    fail(op, name + ".saturated must be empty or one float32, got " + describe(f.saturated));
}

void check_gemm(const GemmArgs& g) {
  const char* op = "gemm";
  if (g.fp8_a.enabled != g.fp8_b.enabled) fail(op, "fp8_a and fp8_b must be enabled together");
  if (g.fp8_a.enabled) {
    // The width/alignment rule of FP8 operands: the caller may give any m,
    // n, k and any C the plain GEMM takes. FP8 tensor cores (cuBLASLt) need
    // k and n multiples of 16 and 16-byte aligned C and pre_act: the CUDA
    // backend pads k for free while quantizing, and pads n by writing the
    // outputs through an [m, n rounded up to 16] scratch that it copies back
    // (backends/cuda/fp8_gemm_layout.h). A caller that wants the GEMM
    // without that copy gives n % 16 == 0 and 16-byte aligned outputs (a
    // vocabulary padded to 16, say); nothing is refused here for it.
    if (g.batch != 1) fail(op, "FP8 operands need batch == 1, got " + num(g.batch));
    check_fp8_operand("a", g.fp8_a);
    check_fp8_operand("b", g.fp8_b);
  }
  if (g.m <= 0 || g.n <= 0 || g.k <= 0)
    fail(op, "m, n, k must be positive, got m=" + num(g.m) + " n=" + num(g.n) + " k=" + num(g.k));
  if (g.batch < 1) fail(op, "batch must be >= 1, got " + num(g.batch));
  const int64_t size_a = g.m * g.k, size_b = g.k * g.n, size_c = g.m * g.n;
  if (g.batch == 1) {
    need_numel(op, "a", g.a, size_a, "m*k");
    need_numel(op, "b", g.b, size_b, "k*n");
    need_numel(op, "c", g.c, size_c, "m*n");
  } else {
    if (g.stride_a < size_a || g.stride_b < size_b || g.stride_c < size_c)
      fail(op, "batch strides must be at least the matrix sizes (no broadcast or overlap), got stride_a=" +
                   num(g.stride_a) + " (m*k=" + num(size_a) + ") stride_b=" + num(g.stride_b) + " (k*n=" +
                   num(size_b) + ") stride_c=" + num(g.stride_c) + " (m*n=" + num(size_c) + ")");
    const std::string span = "(batch-1)*stride + matrix size, batch=" + num(g.batch);
    if (g.a.numel() < batch_span(g.batch, g.stride_a, size_a))
      fail(op, "a " + describe(g.a) + " is smaller than batch x stride: needs " +
                   num(batch_span(g.batch, g.stride_a, size_a)) + " elements " + span);
    if (g.b.numel() < batch_span(g.batch, g.stride_b, size_b))
      fail(op, "b " + describe(g.b) + " is smaller than batch x stride: needs " +
                   num(batch_span(g.batch, g.stride_b, size_b)) + " elements " + span);
    if (g.c.numel() < batch_span(g.batch, g.stride_c, size_c))
      fail(op, "c " + describe(g.c) + " is smaller than batch x stride: needs " +
                   num(batch_span(g.batch, g.stride_c, size_c)) + " elements " + span);
    if (g.epilogue != Epilogue::None) fail(op, "a batched GEMM (batch > 1) allows no epilogue");
    if (!g.pre_act.empty()) fail(op, "a batched GEMM (batch > 1) takes no pre_act");
  }
  if (g.a.dtype != g.b.dtype)
    fail(op, std::string("a and b must have the same dtype, got a ") + dtype_name(g.a.dtype) + ", b " +
                 dtype_name(g.b.dtype));
  const DType operand = operand_dtype(g.compute);
  if (g.a.dtype != operand)
    fail(op, std::string("operand dtype ") + dtype_name(g.a.dtype) + " does not match the compute mode " +
                 gemm_compute_name(g.compute) + " (needs " + dtype_name(operand) + ")");
  if (g.c.dtype != DType::F32 && g.c.dtype != operand)
    fail(op, std::string("c must be float32, or the operands' 16-bit type for fp16/bf16 compute, got ") +
                 dtype_name(g.c.dtype) + " with " + gemm_compute_name(g.compute) + " compute");
  const bool backward = is_backward_epilogue(g.epilogue);
  if (g.epilogue != Epilogue::None && !backward) {
    need_float(op, "bias", g.bias);
    need_numel(op, "bias", g.bias, g.n, "[n] for a bias epilogue");
    if (g.alpha != 1.0f || g.beta != 0.0f)
      fail(op, "epilogues need alpha == 1 and beta == 0, got alpha=" + num(double(g.alpha)) +
                   " beta=" + num(double(g.beta)));
  }
  if (backward) {
    if (g.beta != 0.0f) fail(op, "backward epilogues need beta == 0, got beta=" + num(double(g.beta)));
    if (!g.bias.empty()) fail(op, "backward epilogues (DGelu/DGeluBGrad) take no bias");
    if (g.pre_act.empty()) fail(op, "DGelu/DGeluBGrad need pre_act (the forward pre-activation) [m,n]");
    if (g.pre_act.data == g.c.data) fail(op, "DGelu/DGeluBGrad: pre_act must not alias C");
  }
  if (!g.pre_act.empty()) {
    need_float(op, "pre_act", g.pre_act);
    need_numel(op, "pre_act", g.pre_act, size_c, "[m,n]");
    if (g.pre_act.data == g.c.data && g.pre_act.dtype != g.c.dtype)
      fail(op, "pre_act aliasing C must have C's dtype " + std::string(dtype_name(g.c.dtype)) + ", got " +
                   dtype_name(g.pre_act.dtype));
  }
  if (g.epilogue == Epilogue::DGeluBGrad) {
    need_float(op, "bias_grad_out", g.bias_grad_out);
    need_numel(op, "bias_grad_out", g.bias_grad_out, g.n, "[n]");
  } else if (!g.bias_grad_out.empty()) {
    fail(op, "bias_grad_out is only written by Epilogue::DGeluBGrad");
  }
  need_data(op, "a", g.a);
  need_data(op, "b", g.b);
  need_data(op, "c", g.c);
  const std::pair<const char*, const Tensor*> all[] = {{"a", &g.a},       {"b", &g.b},
                                                        {"c", &g.c},       {"bias", &g.bias},
                                                        {"pre_act", &g.pre_act}, {"bias_grad_out", &g.bias_grad_out}};
  for (const auto& [name, t] : all)
    if (reinterpret_cast<uintptr_t>(t->data) % dtype_size(t->dtype) != 0)
      fail(op, std::string(name) + " " + describe(*t) + " is not aligned to its element size");
}

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

// ---- memory ------------------------------------------------------------------------------
void Device::upload(const Tensor& dst, const void* host_src) {
  if (dst.bytes() > 0 && host_src == nullptr) fail("upload", "host_src is null");
  need_data("upload", "dst", dst);
  upload_impl(dst, host_src);
}

void Device::download(void* host_dst, const Tensor& src) {
  if (src.bytes() > 0 && host_dst == nullptr) fail("download", "host_dst is null");
  need_data("download", "src", src);
  note_host_sync();
  download_impl(host_dst, src);
}

void Device::copy(const Tensor& dst, const Tensor& src) {
  if (dst.dtype != src.dtype || dst.numel() != src.numel())
    fail("copy", "dtype and size must match, got dst " + describe(dst) + ", src " + describe(src));
  need_data("copy", "dst", dst);
  need_data("copy", "src", src);
  copy_impl(dst, src);
}

// ---- GEMM --------------------------------------------------------------------------------
void Device::gemm(const GemmArgs& args) {
  check_gemm(args);
  if (args.fp8_a.enabled) {
    const std::string fp8 = fp8_gemm_support();
    if (fp8.rfind("unsupported", 0) == 0) throw DeviceError("gemm: FP8 operands: " + fp8);
  }
  if (gemm_support(args.compute) == "unsupported")
    throw DeviceError(std::string("gemm: ") + gemm_compute_name(args.compute) + " is not supported on this " +
                      info().kind + " device");
  gemm_impl(args);
}

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
  return loss_sum_read_impl();
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
  return step_results_read_impl();
}

ExponentHistogram Device::exponent_histogram(const Tensor& t, int lo, int nbins) {
  if (nbins < 1) fail("exponent_histogram", "nbins must be >= 1, got " + num(int64_t{nbins}));
  need_float("exponent_histogram", "t", t);
  note_host_sync();
  return exponent_histogram_impl(t, lo, nbins);
}

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
  if (attention_impl_notes_ == notes_before) note_attention_impl(info().kind + "_kernel");
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
