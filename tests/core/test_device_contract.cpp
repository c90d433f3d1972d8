// The Device contract (core/device.h) is checked once, in the public ops
// (core/device_checks.cpp), for every backend.
//
// What is proven
//  * Every public op rejects arguments that break each of its rules with
//    std::invalid_argument "<op>: <argument> ...", on the CPU device and on a
//    recording fake device, with the same message.
//  * A rejected call never reaches the backend: the fake device's *_impl
//    record every call, and none is recorded for a bad one.
//  * A good call reaches exactly the *_impl of the same op (no op forwards to
//    the wrong implementation).
//  * A compute mode the device reports "unsupported" throws DeviceError
//    before the backend runs.
//  * The CPU backend's own data checks (labels, in-place probs) behave as
//    core/device.h says.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "core/device.h"

namespace {

using namespace mpb;

// A Device whose backend does nothing but record which *_impl ran.
class RecordingDevice final : public Device {
 public:
  // A fake has no kind of its own: it says Cpu (DeviceKind has two values) and
  // is told apart by its name.
  RecordingDevice() {
    info_.kind = DeviceKind::Cpu;
    info_.name = "recording";
  }
  std::vector<std::string> calls;

  const DeviceInfo& info() const override { return info_; }
  void synchronize() override {}
  std::unique_ptr<DeviceTimer> make_timer() override { return nullptr; }
  Support supports(Feature f) const override {
    if (f == Feature::GemmTf32) return Support::unsupported("the recording device has no tf32");
    if (f == Feature::GemmFp8) return Support::unsupported("the recording device has no FP8 GEMM");
    return Support::native();
  }
  std::string gemm_math(GemmCompute) const override { return "recording"; }

 protected:
  void upload_impl(const Tensor&, const void*) override { record("upload"); }
  void download_impl(void*, const Tensor&) override { record("download"); }
  void copy_impl(const Tensor&, const Tensor&) override { record("copy"); }
  void gemm_impl(const GemmArgs&) override { record("gemm"); }
  void fill_impl(const Tensor&, float) override { record("fill"); }
  void cast_impl(const Tensor&, const Tensor&) override { record("cast"); }
  void scale_impl(const Tensor&, float) override { record("scale"); }
  void add_bias_impl(const Tensor&, const Tensor&) override { record("add_bias"); }
  void activation_forward_impl(Activation, const Tensor&, const Tensor&) override { record("activation_forward"); }
  void activation_backward_impl(Activation, const Tensor&, const Tensor&, const Tensor&) override {
    record("activation_backward");
  }
  void bias_grad_impl(const Tensor&, const Tensor&, GradMode) override { record("bias_grad"); }
  double softmax_xent_forward_impl(const Tensor&, const Tensor&, const Tensor&, bool) override {
    return record("softmax_xent_forward");
  }
  void softmax_xent_backward_impl(const Tensor&, const Tensor&, const Tensor&, float) override {
    record("softmax_xent_backward");
  }
  double softmax_xent_fused_impl(const Tensor&, const Tensor&, const Tensor&, float, bool) override {
    return record("softmax_xent_fused");
  }
  double read_loss_sum_impl() override { return record("read_loss_sum"); }
  int64_t count_correct_impl(const Tensor&, const Tensor&) override { return record("count_correct"); }
  TensorStats stats_impl(const Tensor&) override {
    record("stats");
    return {};
  }
  void decide_step_impl(const Tensor&, double, double) override { record("decide_step"); }
  StepResults read_step_results_impl() override {
    record("read_step_results");
    return {};
  }
  ExponentHistogram exponent_histogram_impl(const Tensor&, int, int) override {
    record("exponent_histogram");
    return {};
  }
  void add_impl(const Tensor&, const Tensor&, const Tensor&) override { record("add"); }
  void layernorm_forward_impl(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const Tensor&, float) override {
    record("layernorm_forward");
  }
  void residual_layernorm_forward_impl(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                       const Tensor&, const Tensor&, const Tensor&, float) override {
    record("residual_layernorm_forward");
  }
  void layernorm_backward_impl(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                               const Tensor&, const Tensor&, const Tensor&, GradMode, GradMode) override {
    record("layernorm_backward");
  }
  void split_heads_impl(const Tensor&, const Tensor&, const Tensor&, const Tensor&) override {
    record("split_heads");
  }
  void merge_qkv_grads_impl(const Tensor&, const Tensor&, const Tensor&, const Tensor&) override {
    record("merge_qkv_grads");
  }
  void merge_heads_impl(const Tensor&, const Tensor&) override { record("merge_heads"); }
  void split_heads_grad_impl(const Tensor&, const Tensor&) override { record("split_heads_grad"); }
  void masked_softmax_forward_impl(const Tensor&, const Tensor&, const Tensor&, float, float) override {
    record("masked_softmax_forward");
  }
  void softmax_backward_impl(const Tensor&, const Tensor&, const Tensor&, float) override {
    record("softmax_backward");
  }
  // Both layouts reach one implementation; the record names the layout.
  void attention_forward_impl(const AttentionProblem& p, const AttnOperand&, const Tensor&) override {
    record(packed(p) ? "attention_forward_packed" : "attention_forward");
  }
  void attention_backward_impl(const AttentionProblem& p, const AttnOperand&, const AttnOperand&, const AttnOperand&,
                               const AttnOperand&, const AttnOperand&, const Tensor&) override {
    record(packed(p) ? "attention_backward_packed" : "attention_backward");
  }
  static bool packed(const AttentionProblem& p) { return p.q.at != heads_layout(p.H, p.Tq, p.D); }
  void label_positions_impl(const Tensor&, const Tensor&, const Tensor&) override { record("label_positions"); }
  void embedding_forward_impl(const Tensor&, const Tensor&, const Tensor&) override { record("embedding_forward"); }
  void embedding_backward_impl(const Tensor&, const Tensor&, const Tensor&, GradMode) override {
    record("embedding_backward");
  }
  void dropout_impl(const Tensor&, const Tensor&, float, uint64_t) override { record("dropout"); }
  void fp8_update_scales_impl(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const std::vector<bool>&, int, bool) override {
    record("fp8_update_scales");
  }
  void adamw_step_impl(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const AdamWHyper&, GradScale, bool,
                       const Tensor&, const std::vector<ElementRange>&) override {
    record("adamw_step");
  }
  void sgd_step_impl(const Tensor&, const Tensor&, const Tensor&, const SgdHyper&, GradScale,
                     const std::vector<ElementRange>&) override {
    record("sgd_step");
  }
  void lamb_step_impl(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const LambHyper&, GradScale,
                      const Tensor&, const std::vector<LambTensor>&, const Tensor&) override {
    record("lamb_step");
  }
  void* raw_alloc(size_t bytes) override { return std::malloc(bytes); }
  void raw_free(void* p) override { std::free(p); }

 private:
  int record(const char* op) {
    calls.emplace_back(op);
    return 0;
  }
  DeviceInfo info_;
};

// Host memory the tensors of the cases point into: zeroed (so int32 ids and
// labels are valid), 64-byte aligned, every tensor in its own region. The CPU
// device reads it as device memory, should a check ever be missing.
class Arena {
 public:
  Arena() : mem_(static_cast<char*>(std::aligned_alloc(64, kBytes))) { std::memset(mem_, 0, kBytes); }
  ~Arena() { std::free(mem_); }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  Tensor t(Shape s, DType d = DType::F32) {
    Tensor x(mem_ + used_, d, s);
    used_ += (x.bytes() + 63) / 64 * 64 + 64;
    if (used_ > kBytes) throw std::logic_error("test arena exhausted");
    return x;
  }
  void* bytes_at(size_t offset) { return mem_ + offset; }

 private:
  static constexpr size_t kBytes = size_t{1} << 20;
  char* mem_;
  size_t used_ = 0;
};

// The same memory seen with another dtype and shape (an alias).
Tensor alias(const Tensor& t, DType d, Shape s) { return Tensor(t.data, d, s); }
Tensor null_tensor(DType d, Shape s) { return Tensor(nullptr, d, s); }

struct Case {
  std::string what;                   // the rule broken
  std::function<void(Device&)> call;  // the op with one bad argument
  std::string message;                // expected in what(), after "<op>: "
};

using Cases = std::vector<Case>;

// ---- the cases, one group per op family ---------------------------------------------------

Cases memory_cases(Arena& A) {
  const Tensor f4 = A.t({4}), f5 = A.t({5}), h4 = A.t({4}, DType::F16);
  return {
      {"copy dtype", [=](Device& d) { d.copy(f4, h4); }, "copy: dtype and size must match"},
      {"copy size", [=](Device& d) { d.copy(f4, f5); }, "copy: dtype and size must match"},
      {"copy null", [=](Device& d) { d.copy(null_tensor(DType::F32, {4}), f4); },
       "copy: dst float32 [4] has null data"},
      {"upload null host", [=](Device& d) { d.upload(f4, nullptr); }, "upload: host_src is null"},
      {"download null host", [=](Device& d) { d.download(nullptr, f4); }, "download: host_dst is null"},
  };
}

Cases gemm_cases(Arena& A) {
  GemmArgs g;  // C[2,3] = A[2,4] . B[4,3]
  g.m = 2, g.n = 3, g.k = 4;
  g.a = A.t({2, 4}), g.b = A.t({4, 3}), g.c = A.t({2, 3});
  const Tensor a16 = A.t({2, 4}, DType::F16), b16 = A.t({4, 3}, DType::F16);
  const Tensor c16 = A.t({2, 3}, DType::F16), cb16 = A.t({2, 3}, DType::BF16);
  const Tensor bias3 = A.t({3}), bias2 = A.t({2}), ibias3 = A.t({3}, DType::I32);
  const Tensor pre = A.t({2, 3}), pre5 = A.t({5}), ipre = A.t({2, 3}, DType::I32);
  const Tensor a_big = A.t({64}), b_big = A.t({64}), c_big = A.t({64}), small8 = A.t({8});
  const Tensor misaligned(static_cast<char*>(g.c.data) + 2, DType::F32, Shape{2, 3});
  auto with = [g](std::function<void(GemmArgs&)> edit) {
    return [g, edit](Device& d) {
      GemmArgs x = g;
      edit(x);
      d.gemm(x);
    };
  };
  auto batched = [=](GemmArgs& x) {
    x.batch = 2, x.stride_a = 8, x.stride_b = 12, x.stride_c = 6;
    x.a = a_big, x.b = b_big, x.c = c_big;
  };
  return {
      {"m = 0", with([](GemmArgs& x) { x.m = 0; }), "gemm: m, n, k must be positive"},
      {"batch = 0", with([](GemmArgs& x) { x.batch = 0; }), "gemm: batch must be >= 1, got 0"},
      {"a size", with([=](GemmArgs& x) { x.a = pre; }), "gemm: a must hold 8 elements (m*k)"},
      {"b size", with([=](GemmArgs& x) { x.b = pre; }), "gemm: b must hold 12 elements (k*n)"},
      {"c size", with([=](GemmArgs& x) { x.c = small8; }), "gemm: c must hold 6 elements (m*n)"},
      {"batch strides", with([=](GemmArgs& x) { batched(x); x.stride_b = 11; }),
       "gemm: batch strides must be at least the matrix sizes"},
      {"batch span", with([=](GemmArgs& x) { batched(x); x.a = small8; }),
       "gemm: a float32 [8] is smaller than batch x stride: needs 16 elements"},
      {"batch epilogue", with([=](GemmArgs& x) { batched(x); x.epilogue = Epilogue::Bias, x.bias = bias3; }),
       "gemm: a batched GEMM (batch > 1) allows no epilogue"},
      {"batch pre_act", with([=](GemmArgs& x) { batched(x); x.pre_act = c_big; }),
       "gemm: a batched GEMM (batch > 1) takes no pre_act"},
      {"a/b dtypes", with([=](GemmArgs& x) { x.b = b16; }), "gemm: a and b must have the same dtype"},
      {"operands vs compute", with([](GemmArgs& x) { x.compute = GemmCompute::F16; }),
       "gemm: operand dtype float32 does not match the compute mode fp16 (needs float16)"},
      {"fp16 compute, bf16 C",
       with([=](GemmArgs& x) { x.a = a16, x.b = b16, x.c = cb16, x.compute = GemmCompute::F16; }),
       "gemm: c must be float32, or the operands' 16-bit type for fp16/bf16 compute, got bfloat16"},
      {"fp32 compute, fp16 C", with([=](GemmArgs& x) { x.c = c16; }),
       "gemm: c must be float32, or the operands' 16-bit type"},
      {"bias size", with([=](GemmArgs& x) { x.epilogue = Epilogue::Bias, x.bias = bias2; }),
       "gemm: bias must hold 3 elements ([n] for a bias epilogue)"},
      {"bias missing", with([](GemmArgs& x) { x.epilogue = Epilogue::BiasGelu; }),
       "gemm: bias must hold 3 elements"},
      {"bias int", with([=](GemmArgs& x) { x.epilogue = Epilogue::BiasRelu, x.bias = ibias3; }),
       "gemm: bias must be a float tensor"},
      {"epilogue alpha", with([=](GemmArgs& x) { x.epilogue = Epilogue::Bias, x.bias = bias3, x.alpha = 2.0f; }),
       "gemm: epilogues need alpha == 1 and beta == 0"},
      {"epilogue beta", with([=](GemmArgs& x) { x.epilogue = Epilogue::BiasGelu, x.bias = bias3, x.beta = 1.0f; }),
       "gemm: epilogues need alpha == 1 and beta == 0"},
      {"backward beta", with([=](GemmArgs& x) { x.epilogue = Epilogue::DGelu, x.pre_act = pre, x.beta = 1.0f; }),
       "gemm: backward epilogues need beta == 0"},
      {"backward bias", with([=](GemmArgs& x) { x.epilogue = Epilogue::DGelu, x.pre_act = pre, x.bias = bias3; }),
       "gemm: backward epilogues (DGelu/DGeluBGrad) take no bias"},
      {"backward pre_act missing", with([](GemmArgs& x) { x.epilogue = Epilogue::DGelu; }),
       "gemm: DGelu/DGeluBGrad need pre_act"},
      {"backward pre_act is C", with([](GemmArgs& x) { x.epilogue = Epilogue::DGelu, x.pre_act = x.c; }),
       "gemm: DGelu/DGeluBGrad: pre_act must not alias C"},
      {"pre_act size", with([=](GemmArgs& x) { x.pre_act = pre5; }), "gemm: pre_act must hold 6 elements ([m,n])"},
      {"pre_act int", with([=](GemmArgs& x) { x.pre_act = ipre; }), "gemm: pre_act must be a float tensor"},
      {"pre_act on C, other dtype", with([](GemmArgs& x) { x.pre_act = alias(x.c, DType::F16, {2, 3}); }),
       "gemm: pre_act aliasing C must have C's dtype float32, got float16"},
      {"bias_grad_out without DGeluBGrad",
       with([=](GemmArgs& x) { x.epilogue = Epilogue::DGelu, x.pre_act = pre, x.bias_grad_out = bias3; }),
       "gemm: bias_grad_out is only written by Epilogue::DGeluBGrad"},
      {"bias_grad_out size",
       with([=](GemmArgs& x) { x.epilogue = Epilogue::DGeluBGrad, x.pre_act = pre, x.bias_grad_out = bias2; }),
       "gemm: bias_grad_out must hold 3 elements ([n])"},
      {"null a", with([](GemmArgs& x) { x.a = null_tensor(DType::F32, {2, 4}); }),
       "gemm: a float32 [2,4] has null data"},
      {"misaligned c", with([=](GemmArgs& x) { x.c = misaligned; }),
       "gemm: c float32 [2,3] is not aligned to its element size"},
  };
}

Cases elementwise_cases(Arena& A) {
  const Tensor f4 = A.t({4}), f5 = A.t({5}), i4 = A.t({4}, DType::I32);
  const Tensor y = A.t({2, 3}), b2 = A.t({2}), ib3 = A.t({3}, DType::I32);
  return {
      {"fill int", [=](Device& d) { d.fill(i4, 1.0f); }, "fill: t must be a float tensor, got int32 [4]"},
      {"fill null", [=](Device& d) { d.fill(null_tensor(DType::F16, {4}), 1.0f); },
       "fill: t float16 [4] has null data"},
      {"cast counts", [=](Device& d) { d.cast(f4, f5); },
       "cast: element counts differ: dst float32 [4], src float32 [5]"},
      {"cast int", [=](Device& d) { d.cast(f4, i4); }, "cast: src must be a float tensor"},
      {"scale int", [=](Device& d) { d.scale(i4, 2.0f); }, "scale: t must be a float tensor"},
      {"add_bias size", [=](Device& d) { d.add_bias(y, b2); },
       "add_bias: bias must hold 3 elements ([cols] of y float32 [2,3]), got float32 [2]"},
      {"add_bias int", [=](Device& d) { d.add_bias(y, ib3); }, "add_bias: bias must be a float tensor"},
      {"activation_forward counts", [=](Device& d) { d.activation_forward(Activation::Relu, f4, f5); },
       "activation_forward: element counts differ"},
      {"activation_forward int", [=](Device& d) { d.activation_forward(Activation::Gelu, f4, i4); },
       "activation_forward: in must be a float tensor"},
      {"activation_backward counts", [=](Device& d) { d.activation_backward(Activation::Gelu, f4, f4, f5); },
       "activation_backward: element counts differ: pre_act float32 [5], din float32 [4]"},
      {"activation_backward int", [=](Device& d) { d.activation_backward(Activation::Gelu, f4, i4, f4); },
       "activation_backward: dout must be a float tensor"},
      {"bias_grad size", [=](Device& d) { d.bias_grad(b2, y, GradMode::Overwrite); },
       "bias_grad: db must hold 3 elements ([cols] of dy float32 [2,3])"},
      {"bias_grad int", [=](Device& d) { d.bias_grad(ib3, y, GradMode::Accumulate); },
       "bias_grad: db must be a float tensor"},
  };
}

Cases loss_cases(Arena& A) {
  const Tensor logits = A.t({2, 4}), logits16 = A.t({2, 4}, DType::F16), ilogits = A.t({2, 4}, DType::I32);
  const Tensor probs = A.t({2, 4}), probs16 = A.t({2, 4}, DType::F16), probs7 = A.t({7});
  const Tensor labels = A.t({2}, DType::I32), labels3 = A.t({3}, DType::I32), flabels = A.t({2});
  const Tensor pos2 = A.t({2}, DType::I32), pos4 = A.t({4}, DType::I32);
  return {
      {"forward labels dtype", [=](Device& d) { d.softmax_xent_forward(probs, logits, flabels); },
       "softmax_xent_forward: labels must be int32, got float32 [2]"},
      {"forward labels count", [=](Device& d) { d.softmax_xent_forward(probs, logits, labels3); },
       "softmax_xent_forward: labels must hold 2 elements ([rows] of logits)"},
      {"forward logits int", [=](Device& d) { d.softmax_xent_forward(probs, ilogits, labels); },
       "softmax_xent_forward: logits must be a float tensor"},
      {"forward probs size", [=](Device& d) { d.softmax_xent_forward(probs7, logits, labels); },
       "softmax_xent_forward: probs must hold 8 elements (as many as logits)"},
      {"forward probs fp16", [=](Device& d) { d.softmax_xent_forward(probs16, logits, labels); },
       "softmax_xent_forward: probs must be float32"},
      {"forward in place over fp16", [=](Device& d) {
         d.softmax_xent_forward(alias(logits16, DType::F32, {2, 4}), logits16, labels);
       },
       "softmax_xent_forward: probs may overwrite the logits only when they are fp32"},
      {"backward probs fp16", [=](Device& d) { d.softmax_xent_backward(logits, probs16, labels, 1.0f); },
       "softmax_xent_backward: probs must be float32"},
      {"backward labels count", [=](Device& d) { d.softmax_xent_backward(logits, probs, labels3, 1.0f); },
       "softmax_xent_backward: labels must hold 2 elements ([rows] of probs)"},
      {"backward dlogits size", [=](Device& d) { d.softmax_xent_backward(probs7, probs, labels, 1.0f); },
       "softmax_xent_backward: dlogits must hold 8 elements (as many as probs)"},
      {"fused in place, other dtype", [=](Device& d) {
         d.softmax_xent_fused(alias(logits, DType::F16, {2, 4}), logits, labels, 1.0f);
       },
       "softmax_xent_fused: dlogits overwriting the logits must have their dtype"},
      {"fused dlogits int", [=](Device& d) { d.softmax_xent_fused(ilogits, logits, labels, 1.0f); },
       "softmax_xent_fused: dlogits must be a float tensor"},
      {"count_correct labels", [=](Device& d) { d.count_correct(logits, labels3); },
       "count_correct: labels must hold 2 elements ([rows] of logits)"},
      {"count_correct logits int", [=](Device& d) { d.count_correct(ilogits, labels); },
       "count_correct: logits must be a float tensor"},
      {"label_positions labels dtype", [=](Device& d) { d.label_positions(labels, pos2, flabels); },
       "label_positions: labels must be int32, got float32 [2]"},
      {"label_positions pos longer than labels", [=](Device& d) { d.label_positions(labels3, pos2, labels); },
       "label_positions: pos must hold between 1 and labels' 2 positions, got int32 [3]"},
      {"label_positions pos_labels count", [=](Device& d) { d.label_positions(labels, labels3, pos4); },
       "label_positions: pos_labels must hold 2 elements (as many as pos)"},
      {"label_positions in place", [=](Device& d) { d.label_positions(labels, pos2, labels); },
       "label_positions: pos must not share labels's memory"},
  };
}

Cases reduction_cases(Arena& A) {
  const Tensor f4 = A.t({4}), i4 = A.t({4}, DType::I32), h42 = A.t({4, 2});
  return {
      {"stats int", [=](Device& d) { d.stats(i4); }, "stats: t must be a float tensor"},
      {"histogram nbins", [=](Device& d) { d.exponent_histogram(f4, -10, 0); },
       "exponent_histogram: nbins must be >= 1, got 0"},
      {"histogram int", [=](Device& d) { d.exponent_histogram(i4, -10, 4); },
       "exponent_histogram: t must be a float tensor"},
      {"decide_step int", [=](Device& d) { d.decide_step(i4, 1.0, 0.0); }, "decide_step: grads must be a float tensor"},
      {"decide_step negative scale", [=](Device& d) { d.decide_step(f4, -2.0, 0.0); },
       "decide_step: loss_scale must be finite and >= 0"},
      {"decide_step NaN scale", [=](Device& d) { d.decide_step(f4, NAN, 0.0); },
       "decide_step: loss_scale must be finite and >= 0"},
      {"fp8_update_scales touched", [=](Device& d) { d.fp8_update_scales(f4, f4, h42, i4, f4, {true}, 0, false); },
       "fp8_update_scales: touched has 1 entries, scale 4"},
      {"fp8_update_scales history", [=](Device& d) {
         d.fp8_update_scales(f4, f4, f4, i4, f4, std::vector<bool>(4, true), 0, false);
       },
       "fp8_update_scales: history must be [n, len] with len >= 1, n = 4"},
      {"fp8_update_scales steps dtype", [=](Device& d) {
         d.fp8_update_scales(f4, f4, h42, f4, f4, std::vector<bool>(4, true), 0, false);
       },
       "fp8_update_scales: steps must be int32"},
      {"fp8_update_scales margin", [=](Device& d) {
         d.fp8_update_scales(f4, f4, h42, i4, f4, std::vector<bool>(4, true), -1, false);
       },
       "fp8_update_scales: margin must be >= 0, got -1"},
  };
}

Cases layernorm_cases(Arena& A) {
  const Tensor x = A.t({2, 4}), out = A.t({2, 4}), out_t = A.t({4, 2}), g = A.t({4}), g3 = A.t({3});
  const Tensor mean = A.t({2}), rstd = A.t({2}), mean16 = A.t({2}, DType::F16), rstd3 = A.t({3});
  const Tensor sum = A.t({2, 4}), a = A.t({2, 4}), a7 = A.t({7}), dx = A.t({8}), dg = A.t({4}), dg5 = A.t({5});
  const Tensor empty = A.t({0, 4});
  return {
      {"empty x", [=](Device& d) { d.layernorm_forward(empty, mean, rstd, empty, g, g, 1e-5f); },
       "layernorm_forward: x is empty"},
      {"out shape", [=](Device& d) { d.layernorm_forward(out_t, mean, rstd, x, g, g, 1e-5f); },
       "layernorm_forward: out must have x's shape [2,4], got float32 [4,2]"},
      {"gamma size", [=](Device& d) { d.layernorm_forward(out, mean, rstd, x, g3, g, 1e-5f); },
       "layernorm_forward: gamma must hold 4 elements ([cols] of x)"},
      {"beta size", [=](Device& d) { d.layernorm_forward(out, mean, rstd, x, g, g3, 1e-5f); },
       "layernorm_forward: beta must hold 4 elements ([cols] of x)"},
      {"mean dtype", [=](Device& d) { d.layernorm_forward(out, mean16, rstd, x, g, g, 1e-5f); },
       "layernorm_forward: mean must be float32"},
      {"rstd size", [=](Device& d) { d.layernorm_forward(out, mean, rstd3, x, g, g, 1e-5f); },
       "layernorm_forward: rstd must hold 2 elements (fp32 [rows] of x)"},
      {"residual a", [=](Device& d) { d.residual_layernorm_forward(out, sum, mean, rstd, a7, a, g, g, 1e-5f); },
       "residual_layernorm_forward: element counts differ: a float32 [7], sum float32 [2,4]"},
      {"residual out is sum", [=](Device& d) { d.residual_layernorm_forward(sum, sum, mean, rstd, a, a, g, g, 1e-5f); },
       "residual_layernorm_forward: out must not share sum's memory (both are outputs)"},
      {"residual out shape", [=](Device& d) { d.residual_layernorm_forward(out_t, sum, mean, rstd, a, a, g, g, 1e-5f); },
       "residual_layernorm_forward: out must have sum's shape"},
      {"backward dx shape", [=](Device& d) {
         d.layernorm_backward(dx, dg, dg, out, x, mean, rstd, g, GradMode::Overwrite, GradMode::Overwrite);
       },
       "layernorm_backward: dx must have x's shape [2,4], got float32 [8]"},
      {"backward dout shape", [=](Device& d) {
         d.layernorm_backward(out, dg, dg, out_t, x, mean, rstd, g, GradMode::Overwrite, GradMode::Overwrite);
       },
       "layernorm_backward: dout must have x's shape"},
      {"backward dgamma size", [=](Device& d) {
         d.layernorm_backward(out, dg5, dg, out, x, mean, rstd, g, GradMode::Overwrite, GradMode::Accumulate);
       },
       "layernorm_backward: dgamma must hold 4 elements ([cols] of x)"},
      {"backward dbeta size", [=](Device& d) {
         d.layernorm_backward(out, dg, dg5, out, x, mean, rstd, g, GradMode::Accumulate, GradMode::Overwrite);
       },
       "layernorm_backward: dbeta must hold 4 elements ([cols] of x)"},
  };
}

Cases head_cases(Arena& A) {
  // B=2, H=3, T=5, D=4: C = 12.
  const Tensor q = A.t({2, 3, 5, 4}), k = A.t({2, 3, 5, 4}), v = A.t({2, 3, 5, 4});
  const Tensor k6 = A.t({2, 3, 6, 4}), v16 = A.t({2, 3, 5, 4}, DType::F16), flat = A.t({10, 12});
  const Tensor qkv = A.t({10, 36}), bad_qkv = A.t({10, 35}), out = A.t({2, 5, 12}), bad_out = A.t({10, 13});
  return {
      {"split k shape", [=](Device& d) { d.split_heads(q, k6, v, qkv); }, "split_heads: k must have q's shape"},
      {"split dtypes", [=](Device& d) { d.split_heads(q, k, v16, qkv); },
       "split_heads: q, k and v must have the same dtype"},
      {"split q not 4-D", [=](Device& d) { d.split_heads(flat, flat, flat, qkv); },
       "split_heads: q must be 4-D [B,H,T,D], got float32 [10,12]"},
      {"split packed", [=](Device& d) { d.split_heads(q, k, v, bad_qkv); },
       "split_heads: qkv [10,35] does not hold 3 x [B,T,H,D] for q [2,3,5,4]"},
      {"merge_qkv packed", [=](Device& d) { d.merge_qkv_grads(bad_qkv, q, k, v); },
       "merge_qkv_grads: dqkv [10,35] does not hold 3 x [B,T,H,D]"},
      {"merge_qkv dv shape", [=](Device& d) { d.merge_qkv_grads(qkv, q, k, k6); },
       "merge_qkv_grads: dv must have dq's shape"},
      {"merge_heads packed", [=](Device& d) { d.merge_heads(bad_out, q); },
       "merge_heads: out [10,13] does not hold 1 x [B,T,H,D] for in [2,3,5,4]"},
      {"merge_heads in place", [=](Device& d) { d.merge_heads(alias(q, DType::F32, {2, 5, 12}), q); },
       "merge_heads: out must not share in's memory (a permutation)"},
      {"split_heads_grad packed", [=](Device& d) { d.split_heads_grad(q, bad_out); },
       "split_heads_grad: dout [10,13] does not hold 1 x [B,T,H,D] for din [2,3,5,4]"},
      {"split_heads_grad in place", [=](Device& d) { d.split_heads_grad(q, alias(q, DType::F32, {10, 12})); },
       "split_heads_grad: din must not share dout's memory (a permutation)"},
      {"merge_heads int", [=](Device& d) { d.merge_heads(alias(out, DType::I32, {2, 5, 12}), q); },
       "merge_heads: out must be a float tensor"},
  };
}

Cases attention_cases(Arena& A) {
  // B=2, H=3, Tq=5, Tk=6, D=4.
  const Tensor q = A.t({2, 3, 5, 4}), k = A.t({2, 3, 6, 4}), v = A.t({2, 3, 6, 4}), out = A.t({2, 3, 5, 4});
  const Tensor lse = A.t({2, 3, 5}), kv = A.t({2, 6}, DType::I32), kv_f = A.t({2, 6}), kv5 = A.t({2, 5}, DType::I32);
  const Tensor lse16 = A.t({2, 3, 5}, DType::F16), lse_short = A.t({29}), k_d8 = A.t({2, 3, 6, 8});
  const Tensor k16 = A.t({2, 3, 6, 4}, DType::F16), q3 = A.t({6, 5, 4}), q_empty = A.t({2, 3, 0, 4});
  const Tensor dq = A.t({2, 3, 5, 4}), dk = A.t({2, 3, 6, 4}), dv = A.t({2, 3, 6, 4}), dout = A.t({2, 3, 5, 4});
  const Tensor scores = A.t({2, 3, 5, 6}), probs = A.t({2, 3, 5, 6}), scores3 = A.t({6, 5, 6});
  const Tensor idq = A.t({2, 3, 5, 4}, DType::I32);
  auto fwd = [](Tensor o, Tensor l, Tensor q_, Tensor k_, Tensor v_, Tensor kv_) {
    return [=](Device& d) { d.attention_forward(o, l, q_, k_, v_, kv_, 0.5f, -1e4f); };
  };
  auto bwd = [=](Tensor dq_, Tensor dk_, Tensor dv_, Tensor dout_) {
    return [=](Device& d) { d.attention_backward(dq_, dk_, dv_, dout_, out, lse, q, k, v, kv, 0.5f, -1e4f); };
  };
  return {
      {"masked scores 3-D", [=](Device& d) { d.masked_softmax_forward(scores3, scores3, kv, 0.5f, -1e4f); },
       "masked_softmax_forward: scores must be 4-D [B,H,Tq,Tk], got float32 [6,5,6]"},
      {"masked probs shape", [=](Device& d) { d.masked_softmax_forward(q, scores, kv, 0.5f, -1e4f); },
       "masked_softmax_forward: probs must have scores's shape"},
      {"masked key_valid dtype", [=](Device& d) { d.masked_softmax_forward(probs, scores, kv_f, 0.5f, -1e4f); },
       "masked_softmax_forward: key_valid must be int32"},
      {"masked key_valid size", [=](Device& d) { d.masked_softmax_forward(probs, scores, kv5, 0.5f, -1e4f); },
       "masked_softmax_forward: key_valid must hold 12 elements ([B,Tk] = [2,6])"},
      {"softmax_backward empty", [=](Device& d) { d.softmax_backward(q_empty, q_empty, q_empty, 1.0f); },
       "softmax_backward: probs is empty"},
      {"softmax_backward shapes", [=](Device& d) { d.softmax_backward(probs, probs, q, 1.0f); },
       "softmax_backward: dprobs must have probs's shape"},
      {"q 3-D", fwd(out, lse, q3, k, v, kv), "attention_forward: q and k must be 4-D [B,H,T,D]"},
      {"empty", fwd(q_empty, lse, q_empty, k, v, kv), "attention_forward: empty attention"},
      {"k head dim", fwd(out, lse, q, k_d8, k_d8, kv), "attention_forward: k and v must be [B,H,Tk,D]"},
      {"v shape", fwd(out, lse, q, k, k_d8, kv), "attention_forward: k and v must be [B,H,Tk,D]"},
      {"k dtype", fwd(out, lse, q, k16, v, kv), "attention_forward: q, k and v must have the same dtype"},
      {"out shape", fwd(k, lse, q, k, v, kv), "attention_forward: out must have q's shape"},
      {"lse dtype", fwd(out, lse16, q, k, v, kv), "attention_forward: lse must be float32"},
      {"lse size", fwd(out, lse_short, q, k, v, kv), "attention_forward: lse must hold 30 elements"},
      {"key_valid size", fwd(out, lse, q, k, v, kv5), "attention_forward: key_valid must hold 12 elements"},
      {"backward dout", bwd(dq, dk, dv, k), "attention_backward: dout must have q's shape"},
      {"backward dq", bwd(k, dk, dv, dout), "attention_backward: dq must have q's shape"},
      {"backward dk", bwd(dq, q, dv, dout), "attention_backward: dk must have k's shape"},
      {"backward dv", bwd(dq, dk, q, dout), "attention_backward: dv must have k's shape"},
      {"backward dq int", bwd(idq, dk, dv, dout), "attention_backward: dq must be a float tensor"},
      {"dropout negative", [=](Device& d) { d.attention_forward(out, lse, q, k, v, kv, 0.5f, -1e4f, {-0.1f, 1}); },
       "attention_forward: dropout p must be in [0, 1)"},
      {"backward dropout 1",
       [=](Device& d) { d.attention_backward(dq, dk, dv, dout, out, lse, q, k, v, kv, 0.5f, -1e4f, {1.0f, 1}); },
       "attention_backward: dropout p must be in [0, 1)"},
  };
}

// The packed ops: B=2, T=5, H=3, D=4 (C = 12), given by lse [B,H,T].
Cases packed_attention_cases(Arena& A) {
  const Tensor qkv = A.t({10, 36}), qkv4 = A.t({2, 5, 3, 12}), out = A.t({10, 12}), lse = A.t({2, 3, 5});
  const Tensor kv = A.t({2, 5}, DType::I32), dqkv = A.t({10, 36}), dout = A.t({10, 12});
  const Tensor lse2 = A.t({6, 5}), lse_h5 = A.t({2, 5, 5}), qkv_wide = A.t({10, 48}), out_odd = A.t({10, 13});
  const Tensor out_int = A.t({10, 12}, DType::I32), kv4 = A.t({2, 4}, DType::I32), out_bad = A.t({5, 24});
  auto fwd = [kv](Tensor o, Tensor l, Tensor x) {
    return [=](Device& d) { d.attention_forward_packed(o, l, x, kv, 0.5f, -1e4f); };
  };
  auto bwd = [=](Tensor dx, Tensor g) {
    return [=](Device& d) { d.attention_backward_packed(dx, g, out, lse, qkv, kv, 0.5f, -1e4f); };
  };
  const char* f = "attention_forward_packed: ";
  const char* b = "attention_backward_packed: ";
  return {
      {"packed lse 2-D", fwd(out, lse2, qkv), std::string(f) + "lse must be a non-empty fp32 [B,H,T]"},
      {"packed out vs H", fwd(out_odd, lse, qkv), std::string(f) + "out float32 [10,13] does not hold [B,T,H,D]"},
      {"packed out vs H 5", fwd(out, lse_h5, qkv), std::string(f) + "out float32 [10,12] does not hold [B,T,H,D]"},
      {"packed out rows", fwd(out_bad, lse, qkv), std::string(f) + "out must be [B*T, C], [B,T,C] or [B,T,H,D]"},
      {"packed qkv cols", fwd(out, lse, qkv_wide), std::string(f) + "qkv must be [B*T, 3C], [B,T,3C] or [B,T,3,C]"},
      {"packed out int", fwd(out_int, lse, qkv), std::string(f) + "out must be a float tensor"},
      {"packed key_valid", [=](Device& d) { d.attention_forward_packed(out, lse, qkv, kv4, 0.5f, -1e4f); },
       std::string(f) + "key_valid must hold 10 elements"},
      {"packed out over qkv", fwd(qkv.flat_slice(0, 120).reshaped(Shape{10, 12}), lse, qkv),
       std::string(f) + "out must not share qkv's memory"},
      {"packed dout shape", bwd(dqkv, lse), std::string(b) + "dout must have out's shape"},
      {"packed dqkv shape", bwd(qkv4, dout), std::string(b) + "dqkv must have qkv's shape"},
      {"packed dqkv over qkv", bwd(qkv, dout), std::string(b) + "dqkv must not share qkv's memory"},
      {"packed dqkv over dout", bwd(alias(dout, DType::F32, {10, 36}), dout),
       std::string(b) + "dqkv must not share dout's memory"},
      {"packed dropout 1", [=](Device& d) { d.attention_forward_packed(out, lse, qkv, kv, 0.5f, -1e4f, {1.0f, 3}); },
       std::string(f) + "dropout p must be in [0, 1), got 1"},
      {"packed dropout NaN",
       [=](Device& d) { d.attention_backward_packed(dqkv, dout, out, lse, qkv, kv, 0.5f, -1e4f, {NAN, 3}); },
       std::string(b) + "dropout p must be in [0, 1)"},
  };
}

Cases embedding_and_dropout_cases(Arena& A) {
  const Tensor table = A.t({10, 4}), table1d = A.t({40}), out = A.t({3, 4}), out5 = A.t({3, 5});
  const Tensor ids = A.t({3}, DType::I32), ids_f = A.t({3}), ids2 = A.t({2}, DType::I32);
  const Tensor f4 = A.t({4}), f5 = A.t({5}), i4 = A.t({4}, DType::I32);
  return {
      {"embedding table 1-D", [=](Device& d) { d.embedding_forward(out, table1d, ids); },
       "embedding_forward: out and table must have the same columns"},
      {"embedding columns", [=](Device& d) { d.embedding_forward(out5, table, ids); },
       "embedding_forward: out and table must have the same columns"},
      {"embedding ids dtype", [=](Device& d) { d.embedding_forward(out, table, ids_f); },
       "embedding_forward: ids must be int32"},
      {"embedding ids size", [=](Device& d) { d.embedding_forward(out, table, ids2); },
       "embedding_forward: ids must hold 3 elements ([rows] of out)"},
      {"embedding backward columns", [=](Device& d) { d.embedding_backward(table, out5, ids, GradMode::Overwrite); },
       "embedding_backward: dout and dtable must have the same columns"},
      {"embedding backward in place", [=](Device& d) {
         d.embedding_backward(table, alias(table, DType::F32, {3, 4}), ids, GradMode::Accumulate);
       },
       "embedding_backward: dout must not share dtable's memory"},
      {"dropout p = 1", [=](Device& d) { d.dropout(f4, f4, 1.0f, 7); }, "dropout: p must be in [0, 1)"},
      {"dropout p < 0", [=](Device& d) { d.dropout(f4, f4, -0.1f, 7); }, "dropout: p must be in [0, 1)"},
      {"dropout p NaN", [=](Device& d) { d.dropout(f4, f4, std::nanf(""), 7); }, "dropout: p must be in [0, 1)"},
      {"dropout counts", [=](Device& d) { d.dropout(f4, f5, 0.5f, 7); }, "dropout: element counts differ"},
      {"dropout int", [=](Device& d) { d.dropout(i4, f4, 0.5f, 7); }, "dropout: out must be a float tensor"},
  };
}

Cases optimizer_cases(Arena& A) {
  const Tensor p = A.t({4}), g = A.t({4}), m = A.t({4}), v = A.t({4}), buf = A.t({4});
  const Tensor m16 = A.t({4}, DType::F16), v5 = A.t({5}), ig = A.t({4}, DType::I32), copy5 = A.t({5});
  const Tensor icopy = A.t({4}, DType::I32), g5 = A.t({5});
  const AdamWHyper h{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1};
  AdamWHyper h0 = h;
  h0.step = 0;
  const SgdHyper s{0.1f, 0.9f, 0.0f};
  const LambHyper lh{1e-3f, 0.9f, 0.999f, 1e-6f, 0.01f, 1, true};
  LambHyper lh0 = lh;
  lh0.step = 0;
  const std::vector<LambTensor> whole = {{0, 4, true}};
  const Tensor scratch = A.t({lamb_scratch_floats(1)});
  return {
      {"adamw m dtype", [=](Device& d) { d.adamw_step(p, g, m16, v, h, 1.0f, true, Tensor{}); },
       "adamw_step: m must be float32, got float16 [4]"},
      {"adamw v size", [=](Device& d) { d.adamw_step(p, g, m, v5, h, 1.0f, false, Tensor{}); },
       "adamw_step: element counts differ: v float32 [5], param float32 [4]"},
      {"adamw grad int", [=](Device& d) { d.adamw_step(p, ig, m, v, h, 1.0f, true, Tensor{}); },
       "adamw_step: grad must be a float tensor"},
      {"adamw step 0", [=](Device& d) { d.adamw_step(p, g, m, v, h0, 1.0f, true, Tensor{}); },
       "adamw_step: step is 1-based, got 0"},
      {"adamw copy size", [=](Device& d) { d.adamw_step(p, g, m, v, h, 1.0f, true, copy5); },
       "adamw_step: element counts differ: param_copy float32 [5]"},
      {"adamw copy int", [=](Device& d) { d.adamw_step(p, g, m, v, h, 1.0f, true, icopy); },
       "adamw_step: param_copy must be a float tensor"},
      {"sgd state dtype", [=](Device& d) { d.sgd_step(p, g, m16, s, 1.0f); },
       "sgd_step: momentum_buf must be float32"},
      {"sgd grad size", [=](Device& d) { d.sgd_step(p, g5, buf, s, 1.0f); },
       "sgd_step: element counts differ: grad float32 [5], param float32 [4]"},
      {"adamw no_decay empty", [=](Device& d) { d.adamw_step(p, g, m, v, h, 1.0f, true, Tensor{}, {{2, 2}}); },
       "adamw_step: no_decay[0] [2, 2) is empty"},
      {"adamw no_decay beyond", [=](Device& d) { d.adamw_step(p, g, m, v, h, 1.0f, false, Tensor{}, {{1, 5}}); },
       "adamw_step: no_decay[0] [1, 5) is beyond the tensor's 4 elements"},
      {"adamw no_decay order", [=](Device& d) { d.adamw_step(p, g, m, v, h, 1.0f, true, Tensor{}, {{2, 3}, {0, 1}}); },
       "adamw_step: no_decay[1] [0, 1) is out of order or overlaps the range before it"},
      {"sgd no_decay overlap", [=](Device& d) { d.sgd_step(p, g, buf, s, 1.0f, {{0, 2}, {1, 3}}); },
       "sgd_step: no_decay[1] [1, 3) is out of order or overlaps the range before it"},
      {"sgd no_decay negative", [=](Device& d) { d.sgd_step(p, g, buf, s, 1.0f, {{-1, 2}}); },
       "sgd_step: no_decay[0] [-1, 2) is out of order or overlaps the range before it"},
      {"lamb v dtype", [=](Device& d) { d.lamb_step(p, g, m, m16, lh, 1.0f, Tensor{}, whole, scratch); },
       "lamb_step: v must be float32, got float16 [4]"},
      {"lamb step 0", [=](Device& d) { d.lamb_step(p, g, m, v, lh0, 1.0f, Tensor{}, whole, scratch); },
       "lamb_step: step is 1-based, got 0"},
      {"lamb no tensors", [=](Device& d) { d.lamb_step(p, g, m, v, lh, 1.0f, Tensor{}, {}, scratch); },
       "lamb_step: tensors is empty"},
      {"lamb gap", [=](Device& d) { d.lamb_step(p, g, m, v, lh, 1.0f, Tensor{}, {{0, 1, true}, {2, 4, false}}, scratch); },
       "lamb_step: tensors[1] [2, 4) does not start where the tensor before it ends (1)"},
      {"lamb short", [=](Device& d) { d.lamb_step(p, g, m, v, lh, 1.0f, Tensor{}, {{0, 3, true}}, scratch); },
       "lamb_step: tensors end at 3, param has 4 elements"},
      {"lamb scratch", [=](Device& d) { d.lamb_step(p, g, m, v, lh, 1.0f, Tensor{}, whole, copy5); },
       "lamb_step: scratch has 5 elements, needs 64"},
      {"lamb copy int", [=](Device& d) { d.lamb_step(p, g, m, v, lh, 1.0f, icopy, whole, scratch); },
       "lamb_step: param_copy must be a float tensor"},
  };
}

Cases all_cases(Arena& A) {
  Cases all;
  for (Cases (*group)(Arena&) : {memory_cases, gemm_cases, elementwise_cases, loss_cases, reduction_cases,
                                 layernorm_cases, head_cases, attention_cases, packed_attention_cases,
                                 embedding_and_dropout_cases,
                                 optimizer_cases}) {
    Cases c = group(A);
    all.insert(all.end(), c.begin(), c.end());
  }
  return all;
}

// The message of the std::invalid_argument `call` throws, or a failure.
std::string rejection(const Case& c, Device& d) {
  try {
    c.call(d);
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << c.what << ": threw something else: " << e.what();
    return {};
  }
  ADD_FAILURE() << c.what << ": accepted on the " << d.info().name << " device";
  return {};
}

TEST(DeviceContract, EveryBrokenRuleIsRejectedWithItsMessageOnTheCpu) {
  Arena arena;
  auto cpu = make_cpu_device();
  const Cases cases = all_cases(arena);
  EXPECT_GE(cases.size(), 120u);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string msg = rejection(c, *cpu);
    EXPECT_NE(msg.find(c.message), std::string::npos) << "message: " << msg << "\nexpected: " << c.message;
  }
}

TEST(DeviceContract, ARejectedCallNeverReachesTheBackend) {
  Arena arena;
  RecordingDevice fake;
  auto cpu = make_cpu_device();
  for (const Case& c : all_cases(arena)) {
    SCOPED_TRACE(c.what);
    const std::string msg = rejection(c, fake);
    EXPECT_TRUE(fake.calls.empty()) << "reached " << fake.calls.front();
    fake.calls.clear();
    EXPECT_EQ(msg, rejection(c, *cpu)) << "one contract, one message";
  }
}

TEST(DeviceContract, AGoodCallReachesItsOwnImplementation) {
  Arena A;
  RecordingDevice fake;
  const Tensor f4 = A.t({4}), y = A.t({2, 3}), b3 = A.t({3});
  const Tensor logits = A.t({2, 4}), probs = A.t({2, 4}), labels = A.t({2}, DType::I32);
  const Tensor x = A.t({2, 4}), out = A.t({2, 4}), sum = A.t({2, 4}), g4 = A.t({4}), mean = A.t({2}), rstd = A.t({2});
  const Tensor q = A.t({2, 3, 5, 4}), k = A.t({2, 3, 5, 4}), v = A.t({2, 3, 5, 4}), qkv = A.t({2, 5, 3, 12});
  const Tensor merged = A.t({10, 12}), lse = A.t({2, 3, 5}), kv = A.t({2, 5}, DType::I32);
  const Tensor scores = A.t({2, 3, 5, 5}), sprobs = A.t({2, 3, 5, 5}), dq = A.t({2, 3, 5, 4});
  const Tensor table = A.t({10, 4}), rows = A.t({3, 4}), ids = A.t({3}, DType::I32);
  const Tensor m = A.t({4}), mv = A.t({4}), half = A.t({4}, DType::BF16);
  GemmArgs g;
  g.m = 2, g.n = 3, g.k = 4;
  g.a = A.t({2, 4}), g.b = A.t({4, 3}), g.c = y, g.epilogue = Epilogue::BiasGelu, g.bias = b3, g.pre_act = A.t({2, 3});
  float host[8] = {};
  const std::vector<std::pair<std::string, std::function<void()>>> good = {
      {"upload", [&] { fake.upload(f4, host); }},
      {"download", [&] { fake.download(host, f4); }},
      {"copy", [&] { fake.copy(f4, m); }},
      {"gemm", [&] { fake.gemm(g); }},
      {"fill", [&] { fake.fill(f4, 1.0f); }},
      {"cast", [&] { fake.cast(half, f4); }},
      {"scale", [&] { fake.scale(f4, 2.0f); }},
      {"add_bias", [&] { fake.add_bias(y, b3); }},
      {"activation_forward", [&] { fake.activation_forward(Activation::Gelu, f4, f4); }},
      {"activation_backward", [&] { fake.activation_backward(Activation::Relu, f4, f4, m); }},
      {"bias_grad", [&] { fake.bias_grad(b3, y, GradMode::Accumulate); }},
      {"softmax_xent_forward", [&] { fake.softmax_xent_forward(probs, logits, labels); }},
      {"softmax_xent_backward", [&] { fake.softmax_xent_backward(logits, probs, labels, 0.5f); }},
      {"softmax_xent_fused", [&] { fake.softmax_xent_fused(logits, logits, labels, 0.5f); }},
      {"count_correct", [&] { fake.count_correct(logits, labels); }},
      {"label_positions", [&] { fake.label_positions(A.t({1}, DType::I32), A.t({1}, DType::I32), labels); }},
      {"stats", [&] { fake.stats(half); }},
      {"exponent_histogram", [&] { fake.exponent_histogram(f4, -8, 16); }},
      {"add", [&] { fake.add(half, f4, m); }},
      {"layernorm_forward", [&] { fake.layernorm_forward(out, mean, rstd, x, g4, g4, 1e-5f); }},
      {"residual_layernorm_forward",
       [&] { fake.residual_layernorm_forward(out, sum, mean, rstd, x, x, g4, g4, 1e-5f); }},
      {"layernorm_backward",
       [&] { fake.layernorm_backward(sum, g4, m, out, x, mean, rstd, g4, GradMode::Accumulate, GradMode::Overwrite); }},
      {"split_heads", [&] { fake.split_heads(q, k, v, qkv); }},
      {"merge_qkv_grads", [&] { fake.merge_qkv_grads(qkv, q, k, v); }},
      {"merge_heads", [&] { fake.merge_heads(merged, q); }},
      {"split_heads_grad", [&] { fake.split_heads_grad(q, merged); }},
      {"masked_softmax_forward", [&] { fake.masked_softmax_forward(sprobs, scores, kv, 0.5f, -1e4f); }},
      {"softmax_backward", [&] { fake.softmax_backward(scores, sprobs, scores, 0.5f); }},
      {"attention_forward", [&] { fake.attention_forward(dq, lse, q, k, v, kv, 0.5f, -1e4f); }},
      {"attention_backward", [&] { fake.attention_backward(dq, k, v, dq, dq, lse, q, k, v, kv, 0.5f, -1e4f); }},
      {"attention_forward_packed", [&] { fake.attention_forward_packed(merged, lse, qkv, kv, 0.5f, -1e4f); }},
      {"attention_backward_packed",
       [&] { fake.attention_backward_packed(A.t({2, 5, 3, 12}), A.t({10, 12}), merged, lse, qkv, kv, 0.5f, -1e4f); }},
      {"embedding_forward", [&] { fake.embedding_forward(rows, table, ids); }},
      {"embedding_backward", [&] { fake.embedding_backward(table, rows, ids, GradMode::Accumulate); }},
      {"dropout", [&] { fake.dropout(f4, f4, 0.1f, 3); }},
      {"adamw_step", [&] { fake.adamw_step(f4, half, m, mv, {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1}, 1.0f, true, half); }},
      {"sgd_step", [&] { fake.sgd_step(half, f4, m, {0.1f, 0.9f, 0.0f}, 1.0f); }},
      {"decide_step", [&] { fake.decide_step(half, 256.0, 1.0); }},
      {"fp8_update_scales", [&] {
         fake.fp8_update_scales(f4, m, A.t({4, 3}), A.t({4}, DType::I32), mv, std::vector<bool>(4, true), 1, true);
       }},
      {"read_step_results", [&] { fake.read_step_results(); }},
      {"adamw_step", [&] {
         fake.adamw_step(f4, half, m, mv, {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1}, GradScale::decided(), false, Tensor{});
       }},
  };
  for (const auto& [op, call] : good) {
    SCOPED_TRACE(op);
    fake.calls.clear();
    EXPECT_NO_THROW(call());
    EXPECT_EQ(fake.calls, std::vector<std::string>{op});
  }
  // Deferred: no read until read_loss_sum().
  fake.calls.clear();
  fake.softmax_xent_forward_deferred(probs, logits, labels);
  fake.softmax_xent_fused_deferred(logits, logits, labels, 0.5f);
  EXPECT_EQ(fake.calls, (std::vector<std::string>{"softmax_xent_forward", "softmax_xent_fused"}));
  fake.read_loss_sum();
  EXPECT_EQ(fake.calls.back(), "read_loss_sum");
}

// A decision must exist before it is read or used: the step's results and a
// decided update before any decide_step are a logic error, not a silent zero
// factor, and reach no backend.
TEST(DeviceContract, NoDecisionIsReadOrUsedBeforeDecideStep) {
  Arena A;
  const Tensor f4 = A.t({4}), m = A.t({4}), v = A.t({4});
  RecordingDevice fake;
  auto cpu = make_cpu_device();
  for (Device* d : {static_cast<Device*>(&fake), cpu.get()}) {
    SCOPED_TRACE(d->info().name);
    EXPECT_THROW(d->read_step_results(), std::logic_error);
    EXPECT_THROW(d->sgd_step(f4, f4, m, {0.1f, 0.9f, 0.0f}, GradScale::decided()), std::logic_error);
    EXPECT_THROW(d->adamw_step(f4, f4, m, v, {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1}, GradScale::decided(), true,
                               Tensor{}),
                 std::logic_error);
  }
  EXPECT_TRUE(fake.calls.empty());
}

// The deferred loss sum (core/device.h): the CPU adds in call order, so
// deferred calls read once give the bits of their returned values added in
// that order on the host; the read zeroes the sum; returning calls between
// deferred ones neither read nor change it; a labels error adds nothing; the
// deferred ops check their arguments as the returning ones do.
TEST(DeviceContract, TheDeferredLossSumAddsInCallOrderAndIsReadOnce) {
  auto cpu = make_cpu_device();
  const std::vector<float> x = {0.5f, -1.0f, 2.0f, 0.25f, 3.0f, 1.0f, -2.0f, 0.0f};
  const int32_t ya[2] = {2, -100}, yb[2] = {1, 3}, bad[2] = {1, 4};  // -100: an ignored row adds nothing
  DeviceBuffer logits = cpu->alloc(Shape{2, 4}, DType::F32, MemCategory::Activations);
  DeviceBuffer probs = cpu->alloc(Shape{2, 4}, DType::F32, MemCategory::Activations);
  DeviceBuffer dl = cpu->alloc(Shape{2, 4}, DType::BF16, MemCategory::Activations);
  DeviceBuffer la = cpu->alloc(Shape{2}, DType::I32, MemCategory::Activations);
  DeviceBuffer lb = cpu->alloc(Shape{2}, DType::I32, MemCategory::Activations);
  DeviceBuffer lbad = cpu->alloc(Shape{2}, DType::I32, MemCategory::Activations);
  cpu->upload(logits, x.data());
  cpu->upload(la, ya);
  cpu->upload(lb, yb);
  cpu->upload(lbad, bad);
  const double a = cpu->softmax_xent_forward(probs, logits, la);
  const double b = cpu->softmax_xent_fused(dl, logits, lb, 1.0f);
  ASSERT_NE(a, b);
  const int64_t syncs = cpu->counters().host_syncs;
  cpu->softmax_xent_forward_deferred(probs, logits, la);
  cpu->softmax_xent_fused_deferred(dl, logits, lb, 1.0f);
  EXPECT_EQ(cpu->softmax_xent_forward(probs, logits, lb), b) << "a returning call between deferred ones";
  EXPECT_THROW(cpu->softmax_xent_fused_deferred(dl, logits, lbad, 1.0f), std::out_of_range);
  cpu->softmax_xent_forward_deferred(probs, logits, lb);
  EXPECT_EQ(cpu->counters().host_syncs, syncs + 1) << "only the returning call waited";
  const double want = ((0.0 + a) + b) + b;  // call order
  EXPECT_EQ(cpu->read_loss_sum(), want);
  EXPECT_EQ(cpu->counters().host_syncs, syncs + 2);
  EXPECT_EQ(cpu->read_loss_sum(), 0.0) << "the read zeroes the sum";

  RecordingDevice fake;
  fake.softmax_xent_forward_deferred(probs, logits, la);
  fake.softmax_xent_fused(dl, logits, la, 1.0f);
  EXPECT_EQ(fake.calls, (std::vector<std::string>{"softmax_xent_forward", "softmax_xent_fused"}))
      << "a returning call reads no deferred sum";

  DeviceBuffer probs7 = cpu->alloc(Shape{7}, DType::F32, MemCategory::Activations);
  try {
    cpu->softmax_xent_forward_deferred(probs7, logits, la);
    ADD_FAILURE() << "a bad deferred call was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("softmax_xent_forward: probs must hold 8 elements"), std::string::npos)
        << e.what();
  }
}

TEST(DeviceContract, AnUnsupportedComputeModeIsADeviceError) {
  Arena A;
  RecordingDevice fake;  // reports tf32 "unsupported"
  GemmArgs g;
  g.m = 2, g.n = 3, g.k = 4;
  g.a = A.t({2, 4}), g.b = A.t({4, 3}), g.c = A.t({2, 3}), g.compute = GemmCompute::TF32;
  try {
    fake.gemm(g);
    ADD_FAILURE() << "an unsupported compute mode was accepted";
  } catch (const DeviceError& e) {
    EXPECT_EQ(std::string(e.what()), "gemm: tf32 is not supported on this cpu device");
  }
  EXPECT_TRUE(fake.calls.empty());
}

// ---- the CPU backend's own data checks ------------------------------------------------------

// Labels live in device memory, so only the backend can check their range
// (core/device.h): the CPU throws std::out_of_range naming the op, before
// writing anything.
TEST(DeviceContract, CpuRejectsLabelsBeyondTheClasses) {
  auto cpu = make_cpu_device();
  DeviceBuffer logits = cpu->alloc(Shape{2, 4}, DType::F32, MemCategory::Activations);
  DeviceBuffer probs = cpu->alloc(Shape{2, 4}, DType::F32, MemCategory::Activations);
  DeviceBuffer labels = cpu->alloc(Shape{2}, DType::I32, MemCategory::Activations);
  cpu->fill(logits, 0.5f);
  cpu->fill(probs, 7.0f);
  const int32_t bad[2] = {1, 4};
  cpu->upload(labels, bad);
  auto expect_out_of_range = [](const std::function<void()>& f, const std::string& op) {
    try {
      f();
      ADD_FAILURE() << op << " accepted label 4 of 4 classes";
    } catch (const std::out_of_range& e) {
      EXPECT_EQ(std::string(e.what()).rfind(op + ": label 4 in row 1", 0), 0u) << e.what();
    }
  };
  expect_out_of_range([&] { cpu->softmax_xent_forward(probs, logits, labels); }, "softmax_xent_forward");
  expect_out_of_range([&] { cpu->softmax_xent_backward(logits, probs, labels, 1.0f); }, "softmax_xent_backward");
  expect_out_of_range([&] { cpu->softmax_xent_fused(probs, logits, labels, 1.0f); }, "softmax_xent_fused");
  expect_out_of_range([&] { cpu->count_correct(logits, labels); }, "count_correct");
  std::vector<float> p(8);
  cpu->download(p.data(), probs);
  EXPECT_EQ(p, std::vector<float>(8, 7.0f)) << "nothing written";
  const int32_t ignored[2] = {-1, 3};  // negative labels are ignored rows, not errors
  cpu->upload(labels, ignored);
  EXPECT_NO_THROW(cpu->softmax_xent_forward(probs, logits, labels));
}

// label_positions: more labelled positions than pos holds would drop their
// loss; the CPU says so before writing anything (core/device.h).
TEST(DeviceContract, CpuRejectsMoreLabelledPositionsThanTheCapacity) {
  auto cpu = make_cpu_device();
  DeviceBuffer labels = cpu->alloc(Shape{5}, DType::I32, MemCategory::Activations);
  DeviceBuffer pos = cpu->alloc(Shape{2}, DType::I32, MemCategory::Activations);
  DeviceBuffer pos_y = cpu->alloc(Shape{2}, DType::I32, MemCategory::Activations);
  const int32_t three[5] = {-1, 4, 0, -100, 9};
  const int32_t before[2] = {-7, -7};
  cpu->upload(labels, three);
  cpu->upload(pos, before);
  try {
    cpu->label_positions(pos, pos_y, labels);
    ADD_FAILURE() << "3 labelled positions fitted into 2";
  } catch (const std::out_of_range& e) {
    EXPECT_EQ(std::string(e.what()).rfind("label_positions: 3 labelled positions, but pos holds 2", 0), 0u) << e.what();
  }
  int32_t after[2] = {};
  cpu->download(after, pos);
  EXPECT_EQ(after[0], -7) << "nothing written";
  const int32_t two[5] = {-1, 4, -1, -100, 9};  // exactly the capacity: fine
  cpu->upload(labels, two);
  cpu->label_positions(pos, pos_y, labels);
  cpu->download(after, pos);
  EXPECT_EQ(after[0], 1);
  EXPECT_EQ(after[1], 4);
}

// core/device.h allows probs over fp32 logits (in place): the loss is the
// same as out of place.
TEST(DeviceContract, CpuSoftmaxXentForwardInPlaceKeepsTheLoss) {
  auto cpu = make_cpu_device();
  const std::vector<float> x = {0.5f, -1.0f, 2.0f, 0.25f, 3.0f, 1.0f, -2.0f, 0.0f};
  const int32_t y[2] = {2, 0};
  DeviceBuffer logits = cpu->alloc(Shape{2, 4}, DType::F32, MemCategory::Activations);
  DeviceBuffer probs = cpu->alloc(Shape{2, 4}, DType::F32, MemCategory::Activations);
  DeviceBuffer labels = cpu->alloc(Shape{2}, DType::I32, MemCategory::Activations);
  cpu->upload(logits, x.data());
  cpu->upload(labels, y);
  const double apart = cpu->softmax_xent_forward(probs, logits, labels);
  const double in_place = cpu->softmax_xent_forward(logits, logits, labels);
  EXPECT_EQ(in_place, apart);
  std::vector<float> a(8), b(8);
  cpu->download(a.data(), probs);
  cpu->download(b.data(), logits);
  EXPECT_EQ(a, b);
}

}  // namespace
