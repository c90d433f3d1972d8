// BERT's pad_vocab: the padded words are masked out of the softmax by their
// parameters (models/bert_layout.h, BertParams::init), so a padded model has
// the unpadded model's loss and gradients, and the padded words' own
// gradients are exactly 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "config/schema.h"
#include "core/rng.h"
#include "models/bert.h"
#include "train/cell_factory.h"

namespace mpb {
namespace {

struct Result {
  double loss = 0.0;
  std::map<std::string, std::vector<float>> grads, params;
};

// Two sequences of 8 tokens over a 37-word vocabulary; `pad` rounds it to 40.
// The padded model gets the unpadded model's weights for the real words.
Result run(bool pad, MlmHead head, const Result* weights_from) {
  BertConfig c;
  c.layers = 2, c.hidden = 16, c.heads = 2, c.ffn = 32, c.vocab = 37, c.seq_len = 8;
  c.pad_vocab = pad, c.mlm_head = head;
  const std::vector<int32_t> ids = {1, 9, 3, 22, 17, 30, 3, 2, 1, 36, 3, 12, 2, 0, 0, 0};
  const std::vector<int32_t> mask = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0};
  std::vector<int32_t> y(16, -1);
  y[2] = 14, y[4] = 17, y[6] = 5, y[10] = 33, y[11] = 12;
  auto dev = make_cpu_device();
  auto model = make_bert(*dev, c, PrecisionPolicy{}, 2, 3);
  const int64_t n = model->params().numel();
  std::vector<float> w(static_cast<size_t>(n));
  dev->download(w.data(), model->params());
  if (weights_from) {
    for (const ParamInfo& p : model->param_info()) {
      const std::vector<float>& src = weights_from->params.at(p.name);
      std::copy(src.begin(), src.end(), w.begin() + p.offset);  // the real words come first
    }
    dev->upload(model->params(), w.data());
    model->load_compute_weights();
  }
  dev->upload(model->input(), ids.data());
  dev->upload(model->input_mask(), mask.data());
  DeviceBuffer yb = dev->alloc(Shape{16}, DType::I32, MemCategory::Activations);
  dev->upload(yb, y.data());
  Result r;
  model->train_micro(model->input(), yb, 0.2f, GradMode::Overwrite);
  r.loss = dev->read_loss_sum() / 5.0;
  std::vector<float> g(static_cast<size_t>(n));
  dev->download(g.data(), model->grads());
  for (const ParamInfo& p : model->param_info()) {
    r.grads[p.name].assign(g.begin() + p.offset, g.begin() + p.offset + p.shape.numel());
    r.params[p.name].assign(w.begin() + p.offset, w.begin() + p.offset + p.shape.numel());
  }
  return r;
}

TEST(BertPadVocab, PaddedWordsAreMaskedOutOfTheLossAndGetNoGradient) {
  for (MlmHead head : {MlmHead::Dense, MlmHead::Sparse}) {
    SCOPED_TRACE(mlm_head_name(head));
    const Result plain = run(false, head, nullptr);
    const Result padded = run(true, head, &plain);
    const auto& tok = padded.params.at("embeddings.word_embeddings.weight");
    ASSERT_EQ(tok.size(), 40u * 16);
    EXPECT_EQ(padded.params.at("cls.predictions.bias")[39], -1e4f);
    // exp(-1e4 - max) is exactly 0 in fp32: the padded words add exact zeros
    // to every sum, so only the decoder GEMM's shape (N 40 instead of 37)
    // could change a rounding. The loss is bit-identical here on both CPU
    // kinds. The gradients behind the decoder need not be: with N 40 oneDNN's
    // AVX2 kernels block the weight-gradient GEMMs' sums differently (seen on
    // a Zen 3, 2026-11-29: 1.4e-6 relative in cls.predictions.transform.dense;
    // AVX-512 had kept the order). A reordered fp32 sum of k terms moves by up
    // to about k * 2^-24 of the terms' summed magnitude (k = 16 here, the batch's
    // 2 x 8 tokens: 1e-6), which cancellation can make several times the
    // result's own: 1e-5 relative to the result, while a real leak of the
    // padded words (a nonzero probability) would be orders larger.
    EXPECT_EQ(padded.loss, plain.loss);
    for (const auto& [name, g] : plain.grads) {
      const std::vector<float>& gp = padded.grads.at(name);
      for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(gp[i], g[i], 1e-5 * std::abs(g[i]) + 1e-9) << name << " " << i;
      for (size_t i = g.size(); i < gp.size(); ++i) ASSERT_EQ(gp[i], 0.0f) << name << " padded element " << i;
    }
  }
}

// On a CUDA device fused attention runs for fp16/bf16 compute (cuDNN SDPA);
// fp32/TF32 cells run the unfused tensor-core path with fusion on. The CPU
// always fuses.
TEST(BertPadVocab, CudaFusesAttentionOnlyForHalfCompute) {
  CellConfig cfg;
  cfg.model.kind = ModelKind::Bert;
  cfg.data.kind = DataKind::Markov;
  cfg.fused = true;
  for (const char* p : {"fp32", "tf32", "amp_fp16", "amp_bf16", "O2", "O3"}) {
    SCOPED_TRACE(p);
    set_precision(cfg, p);
    const bool half = cfg.policy.compute == DType::F16 || cfg.policy.compute == DType::BF16;
    EXPECT_EQ(bert_config(cfg, true).fused_attention, half);
    EXPECT_TRUE(bert_config(cfg, false).fused_attention);
  }
}

TEST(BertPadVocab, AutoPadsOnCudaOnly) {
  CellConfig cfg;
  cfg.model.kind = ModelKind::Bert;
  cfg.data.kind = DataKind::Markov;
  cfg.data.vocab = 30522;
  ASSERT_EQ(cfg.model.pad_vocab, PadVocab::Auto);  // the default
  EXPECT_EQ(bert_config(cfg, true).model_vocab(), 30528);
  EXPECT_EQ(bert_config(cfg, false).model_vocab(), 30522);
  cfg.model.pad_vocab = PadVocab::Off;
  EXPECT_EQ(bert_config(cfg, true).model_vocab(), 30522);
  cfg.model.pad_vocab = PadVocab::On;
  EXPECT_EQ(bert_config(cfg, false).model_vocab(), 30528);
  // What build_model decides is what the repeat records (Model::describe).
  cfg.model.pad_vocab = PadVocab::Auto;
  cfg.model.size = "tiny", cfg.model.seq_len = 16, cfg.batch_size = 2;
  auto dev = make_cpu_device();
  const std::string d = build_model(*dev, cfg, 1)->describe();
  EXPECT_NE(d.find(" V30522 "), std::string::npos) << d;
  cfg.model.pad_vocab = PadVocab::On;
  const std::string p = build_model(*dev, cfg, 1)->describe();
  EXPECT_NE(p.find(" V30528 "), std::string::npos) << p;
  EXPECT_NE(p.find("(pad_vocab: 30522 words)"), std::string::npos) << p;
}

}  // namespace
}  // namespace mpb
