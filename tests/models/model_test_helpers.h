// Shared by the model and training tests and bench/bench_mlp.cpp: an MLP cell
// on teacher data of a given size, a BERT of a given size on the Markov
// corpus, and a tiny one (quickstart.yaml's BERT-tiny, smaller), everything
// else at its default.
#pragma once

#include "config/schema.h"

namespace mpb {
namespace model_test {

struct MlpCellSize {
  int hidden_layers, width;  // the model
  int input_dim, classes;    // the teacher data
  int batch_size, steps, warmup_steps, eval_samples;
};

inline CellConfig mlp_cell(const MlpCellSize& size) {
  CellConfig c;
  c.model.hidden_layers = size.hidden_layers;
  c.model.width = size.width;
  c.data.input_dim = size.input_dim;
  c.data.classes = size.classes;
  c.batch_size = size.batch_size;
  c.steps = size.steps;
  c.warmup_steps = size.warmup_steps;
  c.data.eval_samples = size.eval_samples;
  return c;
}

struct BertCellSize {
  int layers, hidden, heads, seq_len;  // the model
  int vocab;                           // the Markov corpus
  int batch_size;
};

// A BERT of `size` on the Markov corpus, set on a cell whose other settings
// (precision, steps, probes) the caller chose.
inline void make_bert(CellConfig& c, const BertCellSize& size) {
  c.model.kind = ModelKind::Bert;
  c.model.layers = size.layers;
  c.model.hidden = size.hidden;
  c.model.heads = size.heads;
  c.model.seq_len = size.seq_len;
  c.data.kind = DataKind::Markov;
  c.data.vocab = size.vocab;
  c.batch_size = size.batch_size;
}

// BERT: 2 layers, hidden 32, 2 heads, sequence 16, a 96-token Markov corpus, batch 8.
inline void make_tiny_bert(CellConfig& c) {
  make_bert(c, {/*layers=*/2, /*hidden=*/32, /*heads=*/2, /*seq_len=*/16, /*vocab=*/96, /*batch_size=*/8});
  c.model.size = "tiny";
}

inline CellConfig tiny_bert_cell() {
  CellConfig c;
  make_tiny_bert(c);
  return c;
}

}  // namespace model_test
}  // namespace mpb
