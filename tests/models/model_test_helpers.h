// Shared by the model and training tests and bench/bench_mlp.cpp: an MLP cell
// on teacher data of a given size, and a tiny BERT (quickstart.yaml's
// BERT-tiny, smaller) on the Markov corpus, everything else at its default.
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

// BERT: 2 layers, hidden 32, 2 heads, sequence 16, a 96-token Markov corpus, batch 8,
// set on a cell whose other settings (precision, steps, probes) the caller chose.
inline void make_tiny_bert(CellConfig& c) {
  c.model.kind = ModelKind::Bert;
  c.model.size = "tiny";
  c.model.layers = 2;
  c.model.hidden = 32;
  c.model.heads = 2;
  c.model.seq_len = 16;
  c.data.kind = DataKind::Markov;
  c.data.vocab = 96;
  c.batch_size = 8;
}

inline CellConfig tiny_bert_cell() {
  CellConfig c;
  make_tiny_bert(c);
  return c;
}

}  // namespace model_test
}  // namespace mpb
