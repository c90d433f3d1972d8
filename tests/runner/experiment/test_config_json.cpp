// Pins cell_config_to_json and config_hash to the bytes that the string-typed
// configuration produced before the typed one (captured from main at 8e862aa): a
// result's config_hash names its configuration across versions, so the typed
// fields must print exactly as the strings did. Covers BERT keys, loss-scale maps
// and numbers, JMP precision, checkpointing, SGD, schedules and text data.
// optimizer.decay_exclude (issue 16) is [] in the pinned file: decay on every
// parameter, as before the key, keeps the bytes; BERT's default exclusion is a
// new configuration with a new hash (DecayExcludeIsRecorded below).
// data.tokenizer (issue 31) is written for text cells only: the text cell's
// bytes gained "tokenizer":"sentencepiece" and a new hash (its data changed:
// subwords, not bytes); every other cell keeps its bytes and hash.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/precision.h"
#include "runner/experiment/config.h"

namespace mpb {
namespace {

const char* kPinnedYaml = R"(name: pin
seed: 7
steps: 50
warmup_steps: 3
batch_size: 64
precision: "p = f32, c = bf16"
fusion: on
loss_scale: {mode: dynamic, init: 1024, growth_interval: 100, min: 1, max: 65536, hysteresis: 2}
inject_nonfinite: [9, 5]
checkpointing: every_k
checkpoint_k: 2
model: {kind: bert, size: mini, layers: 3, hidden: 64, heads: 4, ffn: 96, seq_len: 32, pre_ln: on, dropout: 0.1, pad_vocab: true, ln_eps: 1.0e-5}
data: {kind: markov, vocab: 1000}
optimizer: {kind: sgd, lr: 1e-3, momentum: 0.8, grad_clip: 1.5, warmup: 5, decay: cosine, decay_exclude: []}
matrix:
  precision: [O2, amp_fp16]
  loss_scale: [{mode: static, value: 128}, 512, none]
include:
  - {model.kind: mlp, data.kind: teacher, checkpointing: off, model.activation: relu, precision: tf32, optimizer.decay: linear, fusion: off}
  - {data.kind: text, data.path: corpus.txt, checkpointing: sqrt}
)";

// corpus.txt is a name, not a file: the configuration alone is under test.
LoadOptions without_files() {
  LoadOptions options;
  options.check_files = false;
  return options;
}

// One line of JSON each, as cell_config_to_json(...).dump() printed it.
struct Pinned {
  const char* id;  // "": a default-constructed CellConfig
  const char* hash;
  const char* json;
};

// clang-format off
const std::vector<Pinned> kPinned = {
    {"", "d6084980e26083be",
     R"json({"accumulation":1,"batch_size":256,"checkpoint_k":2,"checkpointing":"off","data":{"classes":16,"eval_samples":4096,"input_dim":256,"kind":"teacher","path":"","teacher_hidden":64,"vocab":8192},"eval_every":0,"fusion":"off","inject_nonfinite":[],"loss_scale":{"backoff_factor":0.5,"growth_factor":2.0,"growth_interval":2000,"hysteresis":1,"init":65536.0,"max":0.0,"min":0.0,"mode":"none","value":65536.0},"loss_weight":1.0,"model":{"activation":"gelu","dropout":0.0,"ffn":0,"heads":0,"hidden":0,"hidden_layers":4,"init_scale":1.0,"kind":"mlp","layers":0,"ln_eps":1e-12,"pad_vocab":"off","pre_ln":"off","seq_len":128,"size":"tiny","width":1024},"numerics_every":10,"optimizer":{"beta1":0.9,"beta2":0.999,"decay":"none","eps":1e-08,"grad_clip":0.0,"kind":"adamw","lr":0.001,"momentum":0.9,"warmup":0,"weight_decay":0.01},"precision":"fp32","repeats":1,"seed":1,"steps":60,"warmup_steps":5})json"},
    {"precision=O2,loss_scale=static{value:128}", "49de1b8f2a5402b9",
     R"json({"accumulation":1,"batch_size":64,"checkpoint_k":2,"checkpointing":"every_k","data":{"classes":16,"eval_samples":4096,"input_dim":256,"kind":"markov","path":"","teacher_hidden":64,"vocab":1000},"eval_every":0,"fusion":"on","inject_nonfinite":[5,9],"loss_scale":{"backoff_factor":0.5,"growth_factor":2.0,"growth_interval":2000,"hysteresis":1,"init":65536.0,"max":0.0,"min":0.0,"mode":"static","value":128.0},"loss_weight":1.0,"model":{"activation":"gelu","dropout":0.1,"ffn":96,"heads":4,"hidden":64,"hidden_layers":4,"init_scale":1.0,"kind":"bert","layers":3,"ln_eps":1e-05,"mlm_head":"sparse","pad_vocab":"on","pre_ln":"on","seq_len":32,"size":"mini","width":1024},"numerics_every":10,"optimizer":{"beta1":0.9,"beta2":0.999,"decay":"cosine","eps":1e-08,"grad_clip":1.5,"kind":"sgd","lr":0.001,"momentum":0.8,"warmup":5,"weight_decay":0.01},"precision":"O2","repeats":1,"seed":7,"steps":50,"warmup_steps":3})json"},
    {"precision=O2,loss_scale=static{value:512}", "13e99b5e326c085c",
     R"json({"accumulation":1,"batch_size":64,"checkpoint_k":2,"checkpointing":"every_k","data":{"classes":16,"eval_samples":4096,"input_dim":256,"kind":"markov","path":"","teacher_hidden":64,"vocab":1000},"eval_every":0,"fusion":"on","inject_nonfinite":[5,9],"loss_scale":{"backoff_factor":0.5,"growth_factor":2.0,"growth_interval":2000,"hysteresis":1,"init":65536.0,"max":0.0,"min":0.0,"mode":"static","value":512.0},"loss_weight":1.0,"model":{"activation":"gelu","dropout":0.1,"ffn":96,"heads":4,"hidden":64,"hidden_layers":4,"init_scale":1.0,"kind":"bert","layers":3,"ln_eps":1e-05,"mlm_head":"sparse","pad_vocab":"on","pre_ln":"on","seq_len":32,"size":"mini","width":1024},"numerics_every":10,"optimizer":{"beta1":0.9,"beta2":0.999,"decay":"cosine","eps":1e-08,"grad_clip":1.5,"kind":"sgd","lr":0.001,"momentum":0.8,"warmup":5,"weight_decay":0.01},"precision":"O2","repeats":1,"seed":7,"steps":50,"warmup_steps":3})json"},
    {"precision=O2,loss_scale=none", "411fc481340266e9",
     R"json({"accumulation":1,"batch_size":64,"checkpoint_k":2,"checkpointing":"every_k","data":{"classes":16,"eval_samples":4096,"input_dim":256,"kind":"markov","path":"","teacher_hidden":64,"vocab":1000},"eval_every":0,"fusion":"on","inject_nonfinite":[5,9],"loss_scale":{"backoff_factor":0.5,"growth_factor":2.0,"growth_interval":2000,"hysteresis":1,"init":65536.0,"max":0.0,"min":0.0,"mode":"none","value":65536.0},"loss_weight":1.0,"model":{"activation":"gelu","dropout":0.1,"ffn":96,"heads":4,"hidden":64,"hidden_layers":4,"init_scale":1.0,"kind":"bert","layers":3,"ln_eps":1e-05,"mlm_head":"sparse","pad_vocab":"on","pre_ln":"on","seq_len":32,"size":"mini","width":1024},"numerics_every":10,"optimizer":{"beta1":0.9,"beta2":0.999,"decay":"cosine","eps":1e-08,"grad_clip":1.5,"kind":"sgd","lr":0.001,"momentum":0.8,"warmup":5,"weight_decay":0.01},"precision":"O2","repeats":1,"seed":7,"steps":50,"warmup_steps":3})json"},
    {"precision=amp_fp16,loss_scale=static{value:128}", "72ef400498805328",
     R"json({"accumulation":1,"batch_size":64,"checkpoint_k":2,"checkpointing":"every_k","data":{"classes":16,"eval_samples":4096,"input_dim":256,"kind":"markov","path":"","teacher_hidden":64,"vocab":1000},"eval_every":0,"fusion":"on","inject_nonfinite":[5,9],"loss_scale":{"backoff_factor":0.5,"growth_factor":2.0,"growth_interval":2000,"hysteresis":1,"init":65536.0,"max":0.0,"min":0.0,"mode":"static","value":128.0},"loss_weight":1.0,"model":{"activation":"gelu","dropout":0.1,"ffn":96,"heads":4,"hidden":64,"hidden_layers":4,"init_scale":1.0,"kind":"bert","layers":3,"ln_eps":1e-05,"mlm_head":"sparse","pad_vocab":"on","pre_ln":"on","seq_len":32,"size":"mini","width":1024},"numerics_every":10,"optimizer":{"beta1":0.9,"beta2":0.999,"decay":"cosine","eps":1e-08,"grad_clip":1.5,"kind":"sgd","lr":0.001,"momentum":0.8,"warmup":5,"weight_decay":0.01},"precision":"amp_fp16","repeats":1,"seed":7,"steps":50,"warmup_steps":3})json"},
    {"precision=amp_fp16,loss_scale=static{value:512}", "7b0f7cba75cedfb9",
     R"json({"accumulation":1,"batch_size":64,"checkpoint_k":2,"checkpointing":"every_k","data":{"classes":16,"eval_samples":4096,"input_dim":256,"kind":"markov","path":"","teacher_hidden":64,"vocab":1000},"eval_every":0,"fusion":"on","inject_nonfinite":[5,9],"loss_scale":{"backoff_factor":0.5,"growth_factor":2.0,"growth_interval":2000,"hysteresis":1,"init":65536.0,"max":0.0,"min":0.0,"mode":"static","value":512.0},"loss_weight":1.0,"model":{"activation":"gelu","dropout":0.1,"ffn":96,"heads":4,"hidden":64,"hidden_layers":4,"init_scale":1.0,"kind":"bert","layers":3,"ln_eps":1e-05,"mlm_head":"sparse","pad_vocab":"on","pre_ln":"on","seq_len":32,"size":"mini","width":1024},"numerics_every":10,"optimizer":{"beta1":0.9,"beta2":0.999,"decay":"cosine","eps":1e-08,"grad_clip":1.5,"kind":"sgd","lr":0.001,"momentum":0.8,"warmup":5,"weight_decay":0.01},"precision":"amp_fp16","repeats":1,"seed":7,"steps":50,"warmup_steps":3})json"},
    {"precision=amp_fp16,loss_scale=none", "78821b5dcccf0d98",
     R"json({"accumulation":1,"batch_size":64,"checkpoint_k":2,"checkpointing":"every_k","data":{"classes":16,"eval_samples":4096,"input_dim":256,"kind":"markov","path":"","teacher_hidden":64,"vocab":1000},"eval_every":0,"fusion":"on","inject_nonfinite":[5,9],"loss_scale":{"backoff_factor":0.5,"growth_factor":2.0,"growth_interval":2000,"hysteresis":1,"init":65536.0,"max":0.0,"min":0.0,"mode":"none","value":65536.0},"loss_weight":1.0,"model":{"activation":"gelu","dropout":0.1,"ffn":96,"heads":4,"hidden":64,"hidden_layers":4,"init_scale":1.0,"kind":"bert","layers":3,"ln_eps":1e-05,"mlm_head":"sparse","pad_vocab":"on","pre_ln":"on","seq_len":32,"size":"mini","width":1024},"numerics_every":10,"optimizer":{"beta1":0.9,"beta2":0.999,"decay":"cosine","eps":1e-08,"grad_clip":1.5,"kind":"sgd","lr":0.001,"momentum":0.8,"warmup":5,"weight_decay":0.01},"precision":"amp_fp16","repeats":1,"seed":7,"steps":50,"warmup_steps":3})json"},
    {"model.kind=mlp,data.kind=teacher,checkpointing=off,model.activation=relu,precision=tf32,optimizer.decay=linear,fusion=off", "2bd7127212384fa0",
     R"json({"accumulation":1,"batch_size":64,"checkpoint_k":2,"checkpointing":"off","data":{"classes":16,"eval_samples":4096,"input_dim":256,"kind":"teacher","path":"","teacher_hidden":64,"vocab":1000},"eval_every":0,"fusion":"off","inject_nonfinite":[5,9],"loss_scale":{"backoff_factor":0.5,"growth_factor":2.0,"growth_interval":100,"hysteresis":2,"init":1024.0,"max":65536.0,"min":1.0,"mode":"dynamic","value":65536.0},"loss_weight":1.0,"model":{"activation":"relu","dropout":0.1,"ffn":96,"heads":4,"hidden":64,"hidden_layers":4,"init_scale":1.0,"kind":"mlp","layers":3,"ln_eps":1e-05,"pad_vocab":"on","pre_ln":"on","seq_len":32,"size":"mini","width":1024},"numerics_every":10,"optimizer":{"beta1":0.9,"beta2":0.999,"decay":"linear","eps":1e-08,"grad_clip":1.5,"kind":"sgd","lr":0.001,"momentum":0.8,"warmup":5,"weight_decay":0.01},"precision":"tf32","repeats":1,"seed":7,"steps":50,"warmup_steps":3})json"},
    {"data.kind=text,data.path=corpus.txt,checkpointing=sqrt", "6c80007001fb1bf0",
     R"json({"accumulation":1,"batch_size":64,"checkpoint_k":2,"checkpointing":"sqrt","data":{"classes":16,"eval_samples":4096,"input_dim":256,"kind":"text","path":"corpus.txt","teacher_hidden":64,"tokenizer":"sentencepiece","vocab":1000},"eval_every":0,"fusion":"on","inject_nonfinite":[5,9],"loss_scale":{"backoff_factor":0.5,"growth_factor":2.0,"growth_interval":100,"hysteresis":2,"init":1024.0,"max":65536.0,"min":1.0,"mode":"dynamic","value":65536.0},"loss_weight":1.0,"model":{"activation":"gelu","dropout":0.1,"ffn":96,"heads":4,"hidden":64,"hidden_layers":4,"init_scale":1.0,"kind":"bert","layers":3,"ln_eps":1e-05,"mlm_head":"sparse","pad_vocab":"on","pre_ln":"on","seq_len":32,"size":"mini","width":1024},"numerics_every":10,"optimizer":{"beta1":0.9,"beta2":0.999,"decay":"cosine","eps":1e-08,"grad_clip":1.5,"kind":"sgd","lr":0.001,"momentum":0.8,"warmup":5,"weight_decay":0.01},"precision":"p=f32,c=bf16","repeats":1,"seed":7,"steps":50,"warmup_steps":3})json"},
};
// clang-format on

void expect_pinned(const CellConfig& config, const Pinned& pinned) {
  const nlohmann::json json = cell_config_to_json(config);
  EXPECT_EQ(json.dump(), pinned.json);
  EXPECT_EQ(config_hash(json), pinned.hash);
}

TEST(ConfigJsonPin, DefaultConfig) { expect_pinned(CellConfig{}, kPinned.front()); }

TEST(ConfigJsonPin, DecayExcludeIsRecordedWhereItExcludesSomething) {
  CellConfig bert;
  bert.model.kind = ModelKind::Bert;
  bert.data.kind = DataKind::Markov;
  const nlohmann::json j = cell_config_to_json(bert);
  EXPECT_EQ(j["optimizer"]["decay_exclude"], nlohmann::json::array({"bias", "layernorm"}));  // the recipe's default
  bert.optimizer.decay_exclude = std::vector<ParamRole>{};
  EXPECT_FALSE(cell_config_to_json(bert)["optimizer"].contains("decay_exclude"));
  CellConfig mlp;
  EXPECT_FALSE(cell_config_to_json(mlp)["optimizer"].contains("decay_exclude"));  // the MLP decays all
  mlp.optimizer.decay_exclude = std::vector<ParamRole>{ParamRole::Norm, ParamRole::Bias};
  EXPECT_EQ(cell_config_to_json(mlp)["optimizer"]["decay_exclude"], nlohmann::json::array({"bias", "layernorm"}));
  EXPECT_EQ(config_value_string(mlp, "optimizer.decay_exclude"), "[bias,layernorm]");
}

TEST(ConfigJsonPin, MlmHeadIsInBertCellsOnlyAndPadVocabAutoLeavesMlpCellsAlone) {
  // BERT cells record the head, so results from before the key (every
  // position decoded) no longer match them; MLP cells keep their old JSON.
  CellConfig bert;
  bert.model.kind = ModelKind::Bert;
  bert.data.kind = DataKind::Markov;
  const nlohmann::json j = cell_config_to_json(bert);
  EXPECT_EQ(j["model"]["mlm_head"], "sparse");
  EXPECT_EQ(j["model"]["pad_vocab"], "auto");
  bert.model.mlm_head = MlmHead::Dense;
  EXPECT_EQ(cell_config_to_json(bert)["model"]["mlm_head"], "dense");
  EXPECT_NE(config_hash(cell_config_to_json(bert)), config_hash(j));
  CellConfig mlp;
  EXPECT_FALSE(cell_config_to_json(mlp)["model"].contains("mlm_head"));
  EXPECT_EQ(cell_config_to_json(mlp)["model"]["pad_vocab"], "off");
  mlp.model.pad_vocab = PadVocab::On;
  EXPECT_EQ(cell_config_to_json(mlp)["model"]["pad_vocab"], "on");
}

TEST(ConfigJsonPin, EveryCellOfThePinnedFile) {
  const ExperimentConfig exp = load_experiment_from_string(kPinnedYaml, "pin.yaml", without_files());
  ASSERT_EQ(exp.cells.size() + 1, kPinned.size());
  for (size_t i = 0; i < exp.cells.size(); ++i) {
    SCOPED_TRACE(exp.cells[i].id);
    EXPECT_EQ(exp.cells[i].id, kPinned[i + 1].id);
    expect_pinned(exp.cells[i].config, kPinned[i + 1]);
  }
}

// Each choice a YAML value can name is a distinct value of its enum (or bool), and
// prints back as the same name.
TEST(ConfigJsonPin, EveryChoiceRoundTripsThroughItsType) {
  for (const auto& spec : schema::keys()) {
    if (spec.type != schema::Type::Choice) continue;
    for (const std::string& choice : spec.choices) {
      CellConfig config;
      spec.set(config, choice);
      EXPECT_EQ(config_value_string(config, spec.key), choice) << spec.key;
    }
  }
}

// The loader resolves each precision it reads once; cells carry the policy.
TEST(ConfigJsonPin, CellsCarryTheResolvedPolicy) {
  const ExperimentConfig exp = load_experiment_from_string(kPinnedYaml, "pin.yaml", without_files());
  EXPECT_EQ(exp.base.policy.describe(), resolve_policy("p=f32,c=bf16").describe());
  for (const Cell& cell : exp.cells) {
    const PrecisionPolicy expected = resolve_policy(cell.config.precision);
    EXPECT_EQ(cell.config.policy.name, expected.name) << cell.id;
    EXPECT_EQ(cell.config.policy.describe(), expected.describe()) << cell.id;
  }
  const CellConfig defaults;
  EXPECT_EQ(defaults.policy.describe(), resolve_policy(defaults.precision).describe());
}

}  // namespace
}  // namespace mpb
