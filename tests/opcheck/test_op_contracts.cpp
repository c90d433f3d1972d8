// The Device contracts that are not an op-vs-reference comparison, written
// once and run on the backend this executable is built for (test_ops: CPU,
// test_ops_cuda: CUDA, skipped without a GPU): bad arguments are rejected
// with std::invalid_argument naming the op, and the fp16 mask hazard of
// ops/attention.h (-1e9 rounds to -inf in fp16: NaN everywhere; the safe
// attention_mask_value() gives finite probabilities and exact zeros).
// Backend-specific behaviour (the GPU's asynchronous error reports, its head
// dimension limit) is tested in tests/gpu.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/precision.h"
#include "opcheck/opcheck.h"
#include "tests/opcheck/backend_under_test.h"


namespace mpb::opcheck {
namespace {

class OpContracts : public BackendUnderTest {
 protected:
  void TearDown() override {
    if (dev_) dev_->synchronize();
  }
  DeviceBuffer alloc(Shape s, DType t = DType::F32) { return dev_->alloc(s, t, MemCategory::Activations); }
  DeviceBuffer ones(Shape s, DType t = DType::F32) {
    DeviceBuffer b = alloc(s, t);
    dev_->fill(b, 1.0f);
    return b;
  }
  static int64_t nonfinite(const Host& h) {
    int64_t n = 0;
    for (int64_t i = 0; i < h.numel(); ++i) n += !std::isfinite(h.value(i));
    return n;
  }
  // f() throws std::invalid_argument whose message names `op` (any message
  // when op is empty: the CPU's dtype dispatcher does not name the op).
  template <class F>
  static void expect_rejected(F&& f, const std::string& op, const char* what) {
    try {
      f();
      ADD_FAILURE() << (op.empty() ? "the op" : op) << " accepted " << what;
    } catch (const std::invalid_argument& e) {
      if (!op.empty()) {
        EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << what << ": " << e.what();
      }
    }
  }
};

TEST_F(OpContracts, GemmRejectsBadArguments) {
  // (An fp16 C with fp32 compute: the GPU rejects it, the CPU computes it;
  // tests/gpu/test_cuda_ops.cpp.)
  DeviceBuffer a = ones(Shape{4, 8}), b = ones(Shape{8, 16}), c = alloc(Shape{4, 16});
  GemmArgs g;
  g.m = 4, g.n = 16, g.k = 8, g.a = a, g.b = b, g.c = c;
  g.compute = GemmCompute::F16;
  expect_rejected([&] { dev_->gemm(g); }, "gemm", "fp32 operands with fp16 compute");
  g.compute = GemmCompute::F32, g.epilogue = Epilogue::Bias;
  expect_rejected([&] { dev_->gemm(g); }, "gemm", "an epilogue without a bias");
  DeviceBuffer bias = alloc(Shape{16}, DType::BF16);
  dev_->fill(bias, 0.5f);
  g.bias = bias, g.alpha = 2.0f;  // epilogues need alpha == 1 and beta == 0 (core/device.h)
  expect_rejected([&] { dev_->gemm(g); }, "gemm", "alpha != 1 with an epilogue");
  g.alpha = 1.0f, g.beta = 1.0f;
  expect_rejected([&] { dev_->gemm(g); }, "gemm", "beta != 0 with an epilogue");
  g.beta = 0.0f;
  dev_->gemm(g);  // a bf16 bias with an fp32 C: fine
  g.epilogue = Epilogue::None, g.k = 7;
  expect_rejected([&] { dev_->gemm(g); }, "gemm", "k that does not match A");
  g.k = 8;
  dev_->gemm(g);
}

TEST_F(OpContracts, BatchedGemmRejectsEpilogueOverlapAndShortBuffers) {
  DeviceBuffer a = ones(Shape{2 * 16}), b = ones(Shape{2 * 16}), c = alloc(Shape{2 * 16}), bias = alloc(Shape{4});
  dev_->fill(bias, 0.0f);
  GemmArgs g;
  g.m = g.n = g.k = 4, g.a = a, g.b = b, g.c = c;
  g.batch = 2, g.stride_a = g.stride_b = g.stride_c = 16;
  dev_->gemm(g);
  const Host out = fetch(*dev_, c);
  for (int64_t i = 0; i < out.numel(); ++i) ASSERT_EQ(out.value(i), 4.0);
  g.epilogue = Epilogue::Bias, g.bias = bias;
  expect_rejected([&] { dev_->gemm(g); }, "gemm", "an epilogue with batch > 1");
  g.epilogue = Epilogue::None, g.pre_act = c;
  expect_rejected([&] { dev_->gemm(g); }, "gemm", "pre_act with batch > 1");
  g.pre_act = Tensor{}, g.stride_c = 8;
  expect_rejected([&] { dev_->gemm(g); }, "gemm", "overlapping outputs");
  g.stride_c = 16, g.batch = 3;
  expect_rejected([&] { dev_->gemm(g); }, "gemm", "batches beyond the buffers");
  g.batch = 0;
  expect_rejected([&] { dev_->gemm(g); }, "gemm", "batch 0");
}

TEST_F(OpContracts, BackwardEpiloguesRejectMisuse) {
  const int64_t m = 8, n = 16, k = 4;
  DeviceBuffer a = ones(Shape{m, k}), b = ones(Shape{k, n}), c = alloc(Shape{m, n}), pre = ones(Shape{m, n});
  DeviceBuffer db = alloc(Shape{n}), db_short = alloc(Shape{n - 1});
  GemmArgs g;
  g.m = m, g.n = n, g.k = k, g.a = a, g.b = b, g.c = c, g.pre_act = pre;
  g.epilogue = Epilogue::DGeluBGrad, g.bias_grad_out = db;
  EXPECT_NO_THROW(dev_->gemm(g));
  GemmArgs x = g;
  x.beta = 1.0f;
  expect_rejected([&] { dev_->gemm(x); }, "gemm", "beta != 0");
  x = g, x.pre_act = Tensor();
  expect_rejected([&] { dev_->gemm(x); }, "gemm", "no pre_act");
  x = g, x.pre_act = c;
  expect_rejected([&] { dev_->gemm(x); }, "gemm", "pre_act aliasing C");
  x = g, x.bias_grad_out = db_short;
  expect_rejected([&] { dev_->gemm(x); }, "gemm", "a bias gradient of the wrong size");
  x = g, x.bias_grad_out = Tensor();
  expect_rejected([&] { dev_->gemm(x); }, "gemm", "DGeluBGrad without a bias gradient");
  x = g, x.epilogue = Epilogue::DGelu;  // bias_grad_out only with DGeluBGrad
  expect_rejected([&] { dev_->gemm(x); }, "gemm", "a bias gradient with DGelu");
  x = g, x.batch = 2, x.stride_a = m * k, x.stride_b = k * n, x.stride_c = m * n;
  EXPECT_ANY_THROW(dev_->gemm(x)) << "a backward epilogue with batch > 1";
}

TEST_F(OpContracts, ElementwiseRejectMismatchedShapes) {
  DeviceBuffer a4 = alloc(Shape{4}), a5 = alloc(Shape{5}), h5 = alloc(Shape{5}, DType::F16), y = alloc(Shape{4, 3});
  DeviceBuffer a10 = alloc(Shape{10}), a11 = alloc(Shape{11});
  expect_rejected([&] { dev_->cast(h5, a4); }, "cast", "a cast between different element counts");
  expect_rejected([&] { dev_->add(a10, a10, a11); }, "add", "operands of different sizes");
  expect_rejected([&] { dev_->add_bias(y, a4); }, "add_bias", "a bias that is not [cols]");
  expect_rejected([&] { dev_->activation_forward(Activation::Relu, a4, a5); }, "activation_forward", "different sizes");
  expect_rejected([&] { dev_->activation_backward(Activation::Gelu, a4, a4, a5); }, "activation_backward", "different sizes");
  expect_rejected([&] { dev_->bias_grad(a4, y, GradMode::Overwrite); }, "bias_grad", "a db that is not [cols]");
  expect_rejected([&] { dev_->exponent_histogram(a4, 0, 0); }, "exponent_histogram", "0 bins");
  expect_rejected([&] { dev_->dropout(a4, a4, 1.0f, 1); }, "dropout", "p = 1");
  expect_rejected([&] { dev_->dropout(a4, a4, -0.1f, 1); }, "dropout", "p < 0");
  DeviceBuffer i3 = alloc(Shape{3}, DType::I32);
  expect_rejected([&] { dev_->add_bias(y, i3); }, "", "add_bias with an int32 bias");
  expect_rejected([&] { dev_->bias_grad(i3, y, GradMode::Overwrite); }, "", "bias_grad with an int32 db");
}

TEST_F(OpContracts, LayerNormRejectsBadShapes) {
  DeviceBuffer x = ones(Shape{4, 8}), g7 = ones(Shape{7}), st = alloc(Shape{4});
  expect_rejected([&] { dev_->layernorm_forward(x, st, st, x, g7, g7, 1e-5f); }, "layernorm", "gamma that is not [cols]");
}

TEST_F(OpContracts, HeadShapeErrorsNameTheOp) {
  DeviceBuffer q = alloc(Shape{2, 3, 5, 4}), k = alloc(Shape{2, 3, 5, 4}), v = alloc(Shape{2, 3, 5, 4});
  DeviceBuffer bad_qkv = alloc(Shape{10, 35}), flat_q = alloc(Shape{10, 12}), bad_out = alloc(Shape{10, 13});
  expect_rejected([&] { dev_->split_heads(q, k, v, bad_qkv); }, "split_heads", "a packed tensor of the wrong width");
  expect_rejected([&] { dev_->merge_qkv_grads(bad_qkv, q, k, v); }, "merge_qkv_grads", "a packed tensor of the wrong width");
  expect_rejected([&] { dev_->split_heads(flat_q, k, v, bad_qkv); }, "split_heads", "a 2-D q");
  expect_rejected([&] { dev_->merge_heads(bad_out, q); }, "merge_heads", "an output of the wrong width");
  expect_rejected([&] { dev_->split_heads_grad(q, bad_out); }, "split_heads_grad", "an input of the wrong width");
}

TEST_F(OpContracts, AttentionRejectsBadShapes) {
  DeviceBuffer q = ones(Shape{1, 2, 5, 4}), k16 = alloc(Shape{1, 2, 5, 4}, DType::BF16);
  DeviceBuffer lse = alloc(Shape{1, 2, 5}), bad_lse = alloc(Shape{1, 2, 4});
  DeviceBuffer kv = put(*dev_, ints({1, 1, 1, 1, 1}, Shape{1, 5})), kv_bad = put(*dev_, ints({1, 1, 1, 1}, Shape{1, 4}));
  EXPECT_NO_THROW(dev_->attention_forward(q, lse, q, q, q, kv, 0.5f, -1e9f));
  expect_rejected([&] { dev_->attention_forward(q, lse, q, k16, q, kv, 0.5f, -1e9f); }, "attention", "k of another dtype");
  expect_rejected([&] { dev_->attention_forward(q, bad_lse, q, q, q, kv, 0.5f, -1e9f); }, "attention", "lse of the wrong size");
  expect_rejected([&] { dev_->attention_forward(q, lse, q, q, q, kv_bad, 0.5f, -1e9f); }, "attention", "key_valid of the wrong size");
  DeviceBuffer scores = alloc(Shape{1, 2, 5, 5});
  expect_rejected([&] { dev_->masked_softmax_forward(scores, scores, kv_bad, 0.5f, -1e9f); }, "softmax", "key_valid of the wrong size");
}

TEST_F(OpContracts, SoftmaxXentRejectsBadArguments) {
  DeviceBuffer logits = ones(Shape{4, 3}), probs = alloc(Shape{4, 3}), probs_small = alloc(Shape{3, 3});
  DeviceBuffer lab_f = alloc(Shape{4}), lab3 = put(*dev_, ints({0, 1, 2}, Shape{3}));
  DeviceBuffer lab4 = put(*dev_, ints({0, 1, 2, 0}, Shape{4}));
  expect_rejected([&] { dev_->softmax_xent_forward(probs, logits, lab_f); }, "softmax_xent", "fp32 labels");
  expect_rejected([&] { dev_->softmax_xent_forward(probs, logits, lab3); }, "softmax_xent", "3 labels for 4 rows");
  expect_rejected([&] { dev_->softmax_xent_forward(probs_small, logits, lab4); }, "softmax_xent", "probs of the wrong size");
  expect_rejected([&] { dev_->softmax_xent_fused(probs_small, logits, lab4, 1.0f); }, "softmax_xent", "dlogits of the wrong size");
  // Negative labels are ignored rows, not errors.
  DeviceBuffer neg = put(*dev_, ints({1, -1, -100, 2}, Shape{4}));
  EXPECT_NO_THROW(dev_->softmax_xent_forward(probs, logits, neg));
  EXPECT_NO_THROW(dev_->count_correct(logits, neg));
}

// Ids outside the table: the CPU throws std::out_of_range before touching
// anything; the GPU finds them in its kernels and reports DeviceError at the
// next synchronising call, after which the device is usable again.
TEST_F(OpContracts, EmbeddingBadIdsAreReported) {
  DeviceBuffer table = ones(Shape{10, 4}), out = alloc(Shape{3, 4});
  for (int32_t bad : {-1, 10}) {
    SCOPED_TRACE(bad);
    DeviceBuffer ids = put(*dev_, ints({0, bad, 2}, Shape{3}));
    auto reported = [&](auto&& op) {
      if (kBackend == "cpu") {
        EXPECT_THROW(op(), std::out_of_range);
      } else {
        op();
        EXPECT_THROW(dev_->synchronize(), DeviceError);
        dev_->synchronize();  // consumed
      }
    };
    reported([&] { dev_->embedding_forward(out, table, ids); });
    reported([&] { dev_->embedding_backward(table, out, ids, GradMode::Accumulate); });
  }
  DeviceBuffer wrong_type = alloc(Shape{3});
  expect_rejected([&] { dev_->embedding_forward(out, table, wrong_type); }, "embedding", "fp32 ids");
  dev_->embedding_forward(out, table, put(*dev_, ints({0, 9, 2}, Shape{3})));
}

TEST_F(OpContracts, OptimizersRejectBadState) {
  const int64_t n = 8;
  DeviceBuffer p = ones(Shape{n}), g = ones(Shape{n}), m = alloc(Shape{n}), v = alloc(Shape{n});
  dev_->fill(m, 0.0f), dev_->fill(v, 0.0f);
  DeviceBuffer m16 = alloc(Shape{n}, DType::BF16), g_short = alloc(Shape{n - 1}), copy_short = alloc(Shape{n - 1}, DType::F16);
  const AdamWHyper h{1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1};
  expect_rejected([&] { dev_->adamw_step(p, g, m16, v, h, 1.0f, true, Tensor{}); }, "adamw_step", "bf16 optimizer state");
  expect_rejected([&] { dev_->adamw_step(p, g_short, m, v, h, 1.0f, false, Tensor{}); }, "adamw_step", "a short gradient");
  expect_rejected([&] { dev_->adamw_step(p, g, m, v, h, 1.0f, true, copy_short); }, "adamw_step", "a short param_copy");
  DeviceBuffer gi = alloc(Shape{n}, DType::I32);
  expect_rejected([&] { dev_->adamw_step(p, gi, m, v, h, 1.0f, false, Tensor{}); }, "", "adamw_step with an int32 gradient");
  expect_rejected([&] { dev_->sgd_step(p, gi, m, SgdHyper{0.1f, 0.9f, 0.0f}, 1.0f); }, "", "sgd_step with an int32 gradient");
  DeviceBuffer buf16 = alloc(Shape{n}, DType::F16);
  expect_rejected([&] { dev_->sgd_step(p, g, buf16, SgdHyper{0.1f, 0.9f, 0.0f}, 1.0f); }, "sgd_step", "an fp16 momentum buffer");
  dev_->adamw_step(p, g, m, v, h, 1.0f, true, Tensor{});
}

// ---- the fp16 mask hazard (ops/attention.h's mask rule) ---------------------------------------
// One sequence of 4 keys, the last one padding.
const std::vector<int32_t> kKeyValid{1, 1, 1, 0};
constexpr int64_t kT = 4;

TEST_F(OpContracts, MaskedSoftmaxFp16MaskHazard) {
  DeviceBuffer kv = put(*dev_, ints(kKeyValid, Shape{1, kT}));
  Gen gen(1);
  DeviceBuffer s16 = put(*dev_, gen.nonzero(DType::F16, Shape{1, 1, kT, kT}, 0.1f, 4.0f));
  DeviceBuffer p16 = alloc(Shape{1, 1, kT, kT}, DType::F16);
  // Unsafe: -1e9 -> -inf in fp16 -> every real key's logit is 0 * -inf = NaN.
  dev_->masked_softmax_forward(p16, s16, kv, 0.5f, -1e9f);
  const Host bad = fetch(*dev_, p16);
  for (int64_t r = 0; r < kT; ++r) EXPECT_TRUE(std::isnan(bad.value(r * kT))) << "row " << r;
  EXPECT_EQ(nonfinite(bad), kT * kT);
  // Safe: finite, rows sum to 1, the padded key gets exactly 0.
  dev_->masked_softmax_forward(p16, s16, kv, 0.5f, attention_mask_value(DType::F16));
  const Host good = fetch(*dev_, p16);
  EXPECT_EQ(nonfinite(good), 0);
  for (int64_t r = 0; r < kT; ++r) {
    double sum = 0.0;
    for (int64_t j = 0; j < kT; ++j) sum += good.value(r * kT + j);
    EXPECT_NEAR(sum, 1.0, 4 * 0x1p-11);  // 3 non-zero terms, each rounded to fp16 (half ulp <= 2^-11 below 1)
    EXPECT_EQ(good.value(r * kT + kT - 1), 0.0);
  }
  // The same -1e9 is harmless when the scores are fp32 or bf16.
  for (DType t : {DType::F32, DType::BF16}) {
    DeviceBuffer s = alloc(Shape{1, 1, kT, kT}, t), p = alloc(Shape{1, 1, kT, kT}, t);
    dev_->cast(s, s16);
    dev_->masked_softmax_forward(p, s, kv, 0.5f, -1e9f);
    EXPECT_EQ(nonfinite(fetch(*dev_, p)), 0) << dtype_name(t);
  }
}

TEST_F(OpContracts, FusedAttentionFp16MaskHazard) {
  const int64_t D = 8;
  const Shape s{1, 1, kT, D};
  DeviceBuffer kv = put(*dev_, ints(kKeyValid, Shape{1, kT}));
  Gen gen(2);
  DeviceBuffer q = put(*dev_, gen.nonzero(DType::F16, s)), k = put(*dev_, gen.nonzero(DType::F16, s));
  DeviceBuffer v = put(*dev_, gen.nonzero(DType::F16, s));
  DeviceBuffer out = alloc(s, DType::F16), lse = alloc(Shape{1, 1, kT});
  const float scale = 0.35355339f;
  dev_->attention_forward(out, lse, q, k, v, kv, scale, -1e9f);
  EXPECT_EQ(nonfinite(fetch(*dev_, out)), kT * D);
  EXPECT_EQ(nonfinite(fetch(*dev_, lse)), kT);
  dev_->attention_forward(out, lse, q, k, v, kv, scale, attention_mask_value(DType::F16));
  EXPECT_EQ(nonfinite(fetch(*dev_, out)), 0);
  EXPECT_EQ(nonfinite(fetch(*dev_, lse)), 0);
  // And the backward pass from it: finite, and the padded key (probability
  // exactly 0) gets exactly zero gradients.
  DeviceBuffer dq = alloc(s, DType::F16), dk = alloc(s, DType::F16), dv = alloc(s, DType::F16);
  dev_->attention_backward(dq, dk, dv, v, out, lse, q, k, v, kv, scale, attention_mask_value(DType::F16));
  const Host dk_h = fetch(*dev_, dk), dv_h = fetch(*dev_, dv);
  EXPECT_EQ(nonfinite(fetch(*dev_, dq)), 0);
  EXPECT_EQ(nonfinite(dk_h), 0);
  EXPECT_EQ(nonfinite(dv_h), 0);
  for (int64_t d = 0; d < D; ++d) {
    EXPECT_EQ(dk_h.value((kT - 1) * D + d), 0.0);
    EXPECT_EQ(dv_h.value((kT - 1) * D + d), 0.0);
  }
}

}  // namespace
}  // namespace mpb::opcheck
