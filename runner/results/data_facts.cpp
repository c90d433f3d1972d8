#include "runner/results/data_facts.h"

#include "models/mlm_data.h"

namespace mpb {

nlohmann::json data_facts_json(const Dataset& data, int64_t eval_samples) {
  nlohmann::json j = nlohmann::json::object();
  // Only MLM text data has a tokenizer and a held-out token stream; other sources have no facts to add.
  const auto* mlm = dynamic_cast<const MlmData*>(&data);
  if (!mlm) return j;
  if (const std::optional<TokenizerFacts> t = mlm->tokenizer()) {
    j["tokenizer"] = {{"kind", t->kind},         {"model_hash", t->model_hash}, {"corpus_hash", t->corpus_hash},
                      {"cache_key", t->cache_key}, {"pieces", t->pieces},         {"vocab", t->vocab}};
  }
  if (const std::optional<ContextFreeLoss> c = mlm->context_free_loss(eval_samples))
    j["context_free_loss"] = {{"loss", c->loss}, {"labels", c->labels}};
  return j;
}

}  // namespace mpb
