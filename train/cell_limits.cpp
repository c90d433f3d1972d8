#include "train/cell_limits.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "models/bert.h"
#include "models/mlm_data.h"
#include "models/mlp.h"
#include "models/teacher_data.h"
#include "train/cell_factory.h"
#include "train/trainer.h"

namespace mpb {

namespace {

// The keys that set a BertConfig field: the override, then the preset that
// gives it when the override is 0.
std::vector<std::string> keys_of_bert_field(const std::string& field) {
  if (field == "layers" || field == "hidden" || field == "heads") return {"model." + field, "model.size"};
  if (field == "vocab") return {"data.vocab"};
  if (field == "checkpoint_k") return {"checkpoint_k"};
  return {"model." + field};  // ffn, seq_len, dropout, ln_eps
}

// " (model.size base gives hidden 768 and heads 12)" for the fields the preset set.
std::string preset_note(const CellConfig& cfg, const BertConfig& bert, const std::vector<std::string>& fields) {
  std::vector<std::string> given;
  for (const std::string& f : fields) {
    if (f == "layers" && cfg.model.layers == 0) given.push_back("layers " + std::to_string(bert.layers));
    if (f == "hidden" && cfg.model.hidden == 0) given.push_back("hidden " + std::to_string(bert.hidden));
    if (f == "heads" && cfg.model.heads == 0) given.push_back("heads " + std::to_string(bert.heads));
  }
  if (given.empty()) return "";
  return " (model.size " + cfg.model.size + " gives " + schema::join(given, " and ") + ")";
}

}  // namespace

std::optional<CellProblem> check_cell_model(const CellConfig& cfg) {
  if (cfg.model.kind != ModelKind::Bert) return std::nullopt;  // the MLP takes whatever the schema allows
  const BertConfig bert = bert_config(cfg);
  const auto problem = check_bert(bert);
  if (!problem) return std::nullopt;
  std::vector<std::string> keys;
  for (const std::string& field : problem->fields) {
    for (const std::string& key : keys_of_bert_field(field)) {
      if (!schema::contains(keys, key)) keys.push_back(key);
    }
  }
  // The preset goes last: a key the file writes is more specific than model.size.
  if (schema::contains(keys, "model.size")) {
    keys.erase(std::find(keys.begin(), keys.end(), "model.size"));
    keys.push_back("model.size");
  }
  return CellProblem{keys, "BERT: " + problem->message + preset_note(cfg, bert, problem->fields)};
}

std::optional<CellProblem> check_cell_files(const CellConfig& cfg) {
  if (cfg.data.kind != DataKind::Text || cfg.data.path.empty()) return std::nullopt;  // empty: check_cell_config's
  const auto problem = MlmData::text_file_problem(cfg.data.path, cfg.model.seq_len);
  if (!problem) return std::nullopt;
  std::string where;
  if (std::filesystem::path(cfg.data.path).is_relative()) {
    std::error_code ec;
    where = " (relative to the current directory, " + std::filesystem::current_path(ec).string() + ")";
  }
  return CellProblem{{"data.path", "model.seq_len"}, "data.path: " + *problem + where};
}

MemoryEstimate estimate_cell_memory(const CellConfig& cfg, bool cuda) {
  const double batch = cfg.batch_size, micro = batch / cfg.accumulation;
  MemoryEstimate e;
  int labels_per_sample = 1;
  switch (cfg.model.kind) {
    case ModelKind::Mlp:
      e = estimate_mlp_memory(mlp_config(cfg), cfg.policy, micro);
      break;
    case ModelKind::Bert:
      e = estimate_bert_memory(bert_config(cfg, cuda), cfg.policy, micro);
      labels_per_sample = cfg.model.seq_len;
      break;
  }
  const DataConfig& d = cfg.data;
  switch (d.kind) {
    case DataKind::Teacher:
      e += estimate_teacher_data_memory(d.input_dim, d.classes, d.teacher_hidden, batch, micro);
      break;
    case DataKind::Markov:
      e += MlmData::estimate_memory(d.vocab - MlmData::kSpecials, 0, cfg.model.seq_len, batch, micro);
      break;
    case DataKind::Text: {
      std::error_code ec;
      const auto bytes = std::filesystem::file_size(d.path, ec);  // 0 if it can't be read: check_cell_files says so
      e += MlmData::estimate_memory(0, ec ? 0.0 : double(bytes), cfg.model.seq_len, batch, micro);
      break;
    }
  }
  e += estimate_trainer_memory(cfg, e.param_count, micro, labels_per_sample);
  return e;
}

}  // namespace mpb
