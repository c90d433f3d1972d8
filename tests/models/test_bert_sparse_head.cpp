// BERT's sparse MLM head (model.mlm_head: sparse): the loss and every
// gradient equal the dense head's up to the rounding of a different
// summation order, in fp32 and bf16, post-LN and pre-LN, fused and unfused;
// the capacity (bert_mlm_rows), its error when a micro-batch exceeds it, and
// the FLOPs. The dense head itself is checked against float64 finite
// differences in test_bert.cpp and both against PyTorch in
// tests/scripts/test_torch_reference.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "config/schema.h"
#include "core/rng.h"
#include "models/bert.h"
#include "tests/models/bert_batch.h"

namespace mpb {
namespace {

// 16 sequences of 32 tokens (some padded), hidden 32, vocabulary 61; labels
// on 15% of the real tokens as MlmData draws them. The sparse head's
// capacity is then well below the 512 positions.
using Batch = model_test::BertBatch;

Batch make_batch(bool pre_ln, bool fused, MlmHead head, double label_prob = 0.15) {
  Batch b;
  b.batch = 16;
  b.cfg.layers = 2, b.cfg.hidden = 32, b.cfg.heads = 2, b.cfg.ffn = 64, b.cfg.vocab = 61, b.cfg.seq_len = 32;
  b.cfg.pre_ln = pre_ln, b.cfg.fused = fused, b.cfg.mlm_head = head;
  const int T = b.cfg.seq_len;
  Rng rng(77);
  for (int64_t s = 0; s < b.batch; ++s) {
    const int n = s % 5 == 0 ? 5 + static_cast<int>(s) : T - 2;  // real tokens between [CLS] and [SEP]
    for (int t = 0; t < T; ++t) {
      const bool real = t <= n + 1;
      const bool content = t >= 1 && t <= n;
      b.ids.push_back(!real ? 0 : t == 0 ? 1 : t == n + 1 ? 2 : 4 + static_cast<int32_t>(rng.below(57)));
      b.mask.push_back(real ? 1 : 0);
      b.y.push_back(content && rng.uniform() < label_prob ? 4 + static_cast<int32_t>(rng.below(57)) : -1);
    }
  }
  return b;
}

struct HeadRun {
  double loss = 0.0;
  std::vector<float> grads;
  std::string describe;
};

HeadRun run_head(const Batch& b, const std::string& precision) {
  auto dev = make_cpu_device();
  auto model = make_bert(*dev, b.cfg, resolve_policy(precision), b.batch, 11);
  dev->upload(model->input(), b.ids.data());
  dev->upload(model->input_mask(), b.mask.data());
  DeviceBuffer y = dev->alloc(Shape{static_cast<int64_t>(b.y.size())}, DType::I32, MemCategory::Activations);
  dev->upload(y, b.y.data());
  const double count = double(std::count_if(b.y.begin(), b.y.end(), [](int32_t v) { return v >= 0; }));
  HeadRun r;
  model->train_micro(model->input(), y, float(1.0 / count), GradMode::Overwrite);
  r.loss = dev->read_loss_sum() / count;
  const int64_t n = model->grads().numel();
  DeviceBuffer staging = dev->alloc(Shape{n}, DType::F32, MemCategory::Workspace);
  dev->cast(staging, model->grads());
  r.grads.resize(static_cast<size_t>(n));
  dev->download(r.grads.data(), staging);
  r.describe = model->describe();
  return r;
}

TEST(BertSparseHead, LossAndEveryGradientEqualTheDenseHead) {
  // The same math on fewer rows: the transform and decoder rows of the
  // masked positions are the dense head's rows (a GEMM row does not depend
  // on the others), and every other row contributes exact zeros to the dense
  // head's gradients (its dlogits row is 0). What differs is the summation
  // order of the weight and bias gradients (over M rows instead of N) and
  // the row blocking oneDNN picks for another M.
  // fp32: a few ulps per sum, carried through the encoder's backward: the
  // fused-vs-unfused bound of test_bert.cpp (1e-5 relative + 1e-5 of the
  // largest gradient) holds with room. bf16 (amp_bf16): a different fp32
  // sum can round a bf16 activation gradient to its neighbour (2^-8
  // relative), which the encoder's backward mixes into every gradient;
  // 2e-2 of the largest gradient is eight such ulps, while a wrong row, a
  // lost label or a missing scatter moves gradients by O(1) of themselves.
  for (const char* precision : {"fp32", "amp_bf16"}) {
    const bool bf16 = std::string(precision) != "fp32";
    for (bool pre_ln : {false, true})
      for (bool fused : {false, true}) {
        SCOPED_TRACE(std::string(precision) + (pre_ln ? " pre-LN" : " post-LN") + (fused ? " fused" : " unfused"));
        const HeadRun dense = run_head(make_batch(pre_ln, fused, MlmHead::Dense), precision);
        const HeadRun sparse = run_head(make_batch(pre_ln, fused, MlmHead::Sparse), precision);
        EXPECT_NE(sparse.describe.find("sparse MLM head"), std::string::npos) << sparse.describe;
        EXPECT_NEAR(sparse.loss, dense.loss, (bf16 ? 2e-3 : 2e-6) * dense.loss);
        ASSERT_EQ(sparse.grads.size(), dense.grads.size());
        double gmax = 0.0;
        for (float v : dense.grads) gmax = std::max(gmax, double(std::abs(v)));
        ASSERT_GT(gmax, 1e-3);
        const double rel = bf16 ? 0.0 : 1e-5, abs = (bf16 ? 2e-2 : 1e-5) * gmax;
        for (size_t i = 0; i < dense.grads.size(); ++i)
          ASSERT_NEAR(sparse.grads[i], dense.grads[i], rel * std::abs(dense.grads[i]) + abs) << "gradient " << i;
      }
  }
}

TEST(BertSparseHead, CapacityIsFixedAndBelowThePositions) {
  BertConfig c = bert_preset("mini");
  EXPECT_EQ(bert_mlm_rows(c, 32), 800);  // 605 masked positions expected in 4096
  const Batch b = make_batch(false, false, MlmHead::Sparse);
  const int64_t M = bert_mlm_rows(b.cfg, b.batch);
  EXPECT_LT(M, b.batch * b.cfg.seq_len);
  EXPECT_EQ(M % 8, 0);  // tensor-core friendly
  const int64_t labelled = std::count_if(b.y.begin(), b.y.end(), [](int32_t v) { return v >= 0; });
  EXPECT_GE(M, labelled);
  c.mlm_head = MlmHead::Dense;
  EXPECT_EQ(bert_mlm_rows(c, 32), 32 * 128);
  // Tiny micro-batches: the bound reaches every position.
  BertConfig t;
  t.seq_len = 8;
  EXPECT_EQ(bert_mlm_rows(t, 2), 16);
  c.mlm_head = MlmHead::Sparse;
  EXPECT_DOUBLE_EQ(bert_mlm_rows_estimate(c, 32.0), 800.0);
}

TEST(BertSparseHead, MoreMaskedPositionsThanTheCapacityIsAnError) {
  // Every real token labelled: beyond the capacity; the step fails instead
  // of dropping the loss of the positions that do not fit.
  const Batch b = make_batch(false, false, MlmHead::Sparse, 1.0);
  try {
    run_head(b, "fp32");
    ADD_FAILURE() << "the sparse head accepted more masked positions than it decodes";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("label_positions:"), std::string::npos) << e.what();
  }
}

TEST(BertSparseHead, FlopsCountTheMaskedRows) {
  // Model FLOPs count the head on the positions the model needs: all of
  // them (dense) or mask_prob x (T - 2) per sequence (sparse).
  BertConfig c = bert_preset("base");
  c.mlm_head = MlmHead::Dense;
  const double dense = bert_train_flops_per_sample(c);
  c.mlm_head = MlmHead::Sparse;
  const double sparse = bert_train_flops_per_sample(c);
  const double T = 128, C = 768, V = 30522, masked = 0.15 * 126;
  EXPECT_NEAR(dense - sparse, 3.0 * 2 * (T - masked) * C * (C + V), 1e-6 * dense);
  // The dense head is about a fifth of BERT-base's step (issue 10: 21%).
  const double head = 3.0 * 2 * T * C * (C + V);
  EXPECT_GT(head / dense, 0.19);
  EXPECT_LT(head / dense, 0.23);
}

}  // namespace
}  // namespace mpb
