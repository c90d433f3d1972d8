#include "train/cell_factory.h"

#include <stdexcept>

#include "config/schema.h"
#include "models/mlm_data.h"
#include "models/subword_tokenizer.h"
#include "models/teacher_data.h"
#include "train/cell_limits.h"

namespace mpb {

namespace {

// The configuration checks (config/schema.h and train/cell_limits.h: the places
// that know them), for configurations that did not come through the loader
// (benchmarks, tests). The loader also checks the data files; from_text does here.
void check(const CellConfig& cfg) {
  if (const auto problem = check_cell_config(cfg)) throw std::invalid_argument(problem->message);
  if (const auto problem = check_cell_model(cfg)) throw std::invalid_argument(problem->message);
}

MlmOptions mlm_options(const CellConfig& cfg) {
  MlmOptions o;
  o.seq_len = cfg.model.seq_len;
  return o;
}

TextTokenizer text_tokenizer(const CellConfig& cfg) {
  TextTokenizer t;
  if (cfg.data.tokenizer == TextTokenizerKind::Bytes) {
    t.kind = TextTokenizer::Kind::Bytes;
    return t;
  }
  t.pieces = cfg.data.vocab - MlmData::kSpecials;
  t.cache_dir = tokenizer_cache_dir();
  return t;
}

}  // namespace

int token_vocab(const CellConfig& cfg) {
  if (cfg.data.kind == DataKind::Text && cfg.data.tokenizer == TextTokenizerKind::Bytes) return 256 + MlmData::kSpecials;
  return cfg.data.vocab;  // markov, text + sentencepiece: data.vocab includes the 4 special tokens
}

MlpConfig mlp_config(const CellConfig& cfg) {
  MlpConfig m;
  m.input_dim = cfg.data.input_dim;
  m.width = cfg.model.width;
  m.hidden_layers = cfg.model.hidden_layers;
  m.classes = cfg.data.classes;
  m.activation = cfg.model.activation;
  m.init_scale = cfg.model.init_scale;
  m.fused = cfg.fused;
  return m;
}

BertConfig bert_config(const CellConfig& cfg, bool cuda) {
  BertConfig c = bert_preset(cfg.model.size);
  if (cfg.model.layers > 0) c.layers = cfg.model.layers;
  if (cfg.model.hidden > 0) c.hidden = cfg.model.hidden;
  if (cfg.model.heads > 0) c.heads = cfg.model.heads;
  c.ffn = cfg.model.ffn;  // 0: 4 x hidden, also after hidden is overridden
  c.vocab = token_vocab(cfg);
  c.seq_len = cfg.model.seq_len;
  c.pre_ln = cfg.model.pre_ln;
  c.dropout = float(cfg.model.dropout);
  c.pad_vocab = cfg.model.pad_vocab == PadVocab::On || (cfg.model.pad_vocab == PadVocab::Auto && cuda);
  c.mlm_head = cfg.model.mlm_head;
  c.mask_prob = mlm_options(cfg).mask_prob;  // the data's masking: the sparse head's capacity
  c.ln_eps = float(cfg.model.ln_eps);
  c.fused = cfg.fused;
  const DType compute = cfg.policy.compute;
  c.fused_attention = !cuda || compute == DType::F16 || compute == DType::BF16;
  c.checkpointing = cfg.checkpointing;
  c.checkpoint_k = cfg.checkpoint_k;
  return c;
}

std::unique_ptr<Model> build_model(Device& dev, const CellConfig& cfg, uint64_t seed) {
  check(cfg);
  const int64_t micro = cfg.batch_size / cfg.accumulation;
  PrecisionPolicy policy = cfg.policy;
  if (policy.fp8) {
    // Before anything is allocated: a GPU without FP8 tensor cores says so
    // here, naming its compute capability (CudaDevice::supports' reason).
    const Support support = dev.supports(Feature::GemmFp8);
    if (!support.runs()) throw DeviceError("precision fp8: " + support.describe());
    policy.fp8_recipe = cfg.fp8;
  }
  switch (cfg.model.kind) {
    case ModelKind::Mlp:
      return make_mlp(dev, mlp_config(cfg), policy, micro, seed);
    case ModelKind::Bert:
      return make_bert(dev, bert_config(cfg, dev.info().kind == DeviceKind::Cuda), policy, micro, seed);
  }
  throw std::invalid_argument("model.kind has no builder");
}

std::unique_ptr<Dataset> build_dataset(const CellConfig& cfg, uint64_t seed) {
  check(cfg);
  switch (cfg.data.kind) {
    case DataKind::Teacher:
      return std::make_unique<TeacherData>(seed, cfg.data.input_dim, cfg.data.classes, cfg.data.teacher_hidden);
    case DataKind::Markov:
      return std::make_unique<MlmData>(MlmData::synthetic(seed, cfg.data.vocab - MlmData::kSpecials, mlm_options(cfg)));
    case DataKind::Text:
      return std::make_unique<MlmData>(MlmData::from_text(cfg.data.path, seed, mlm_options(cfg), text_tokenizer(cfg)));
  }
  throw std::invalid_argument("data.kind has no builder");
}

std::vector<std::string> cell_warnings(const CellConfig& cfg) {
  if (cfg.model.kind != ModelKind::Bert) return {};
  return bert_warnings(bert_config(cfg), cfg.batch_size / cfg.accumulation);
}

StepFlops cell_step_flops(const CellConfig& cfg) {
  const double batch = cfg.batch_size;
  switch (cfg.model.kind) {
    case ModelKind::Mlp:
      return {mlp_train_flops_per_sample(mlp_config(cfg)) * batch, 0.0};
    case ModelKind::Bert: {
      const BertConfig b = bert_config(cfg);
      return {bert_train_flops_per_sample(b) * batch, bert_recompute_flops_per_sample(b) * batch};
    }
  }
  return {};
}

}  // namespace mpb
