// What preparing a cell's data produced that its configuration does not say:
// for data.kind text with SentencePiece, the trained tokenizer's hashes, and
// for any text, the best context-free loss on its held-out tokens. It is an
// output, like a library's version, so it sits in the cell JSON's
// "data" (and each repeat's), never in "config" or config_hash: the same
// experiment file keeps its hash when the corpus file changes, and the
// tokenizer hash says that it did (docs/RESULTS.md, "data").
#pragma once

#include <nlohmann/json.hpp>

#include "models/dataset.h"

namespace mpb {

// {"tokenizer": {"kind", "model_hash", "corpus_hash", "cache_key", "pieces",
// "vocab"}} for a SentencePiece text corpus, and {"context_free_loss":
// {"loss", "labels"}} for any text corpus (MlmData::context_free_loss over the
// cell's `eval_samples`); an empty object for other data.
nlohmann::json data_facts_json(const Dataset& data, int64_t eval_samples);

}  // namespace mpb
