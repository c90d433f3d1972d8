// Shared by the BERT model tests (test_bert.cpp, test_bert_sparse_head.cpp):
// a model configuration with a batch of sequences to run it on.
#pragma once

#include <cstdint>
#include <vector>

#include "models/bert.h"

namespace mpb {
namespace model_test {

// `batch` sequences of cfg.seq_len tokens, each of ids, mask and y
// [batch, seq_len] row-major: the token ids, the attention mask (1 a real
// token, 0 padding) and the masked-LM labels (-1 where there is none).
struct BertBatch {
  BertConfig cfg;
  int64_t batch = 0;
  std::vector<int32_t> ids, mask, y;
};

}  // namespace model_test
}  // namespace mpb
