// Shared by the model tests and bench/bench_mlp.cpp: an MLP cell on teacher
// data of a given size, everything else at its default.
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

}  // namespace model_test
}  // namespace mpb
