// A cell's model and data source from its resolved configuration: the one
// place that maps config keys to model and dataset constructors (the runner,
// the benchmarks and the tests all build cells through it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/cell_config.h"
#include "core/device.h"
#include "models/bert.h"
#include "models/dataset.h"
#include "models/mlp.h"
#include "models/model.h"

namespace mpb {

// Each throws std::invalid_argument for a configuration that check_cell_config
// (config/schema.h) rejects, with its message.
// Micro-batch = batch_size / accumulation; `seed` initialises the weights.
std::unique_ptr<Model> build_model(Device& dev, const CellConfig& cfg, uint64_t seed);
// `seed` draws the training batches; the held-out set never depends on it.
std::unique_ptr<Dataset> build_dataset(const CellConfig& cfg, uint64_t seed);
// Things worth telling the user about a cell before it runs (for BERT: GEMM
// dimensions that are not multiples of 8, and similar).
std::vector<std::string> cell_warnings(const CellConfig& cfg);

// The model configurations a cell's keys map to, as build_model makes them
// (not validated: check_cell_model in train/cell_limits.h says what is wrong).
MlpConfig mlp_config(const CellConfig& cfg);
// The preset model.size, with model.layers/hidden/heads/ffn > 0 overriding it.
// model.pad_vocab auto pads the vocabulary on a CUDA device (`cuda`): the
// decoder's bf16/fp16 rows are then 16-byte aligned (30522 -> 30528), which
// cuBLASLt's fastest kernels (Hopper's TMA among them) need; on the CPU the
// padded columns would be work for nothing. On a CUDA device fused attention
// runs only for fp16/bf16 compute (cuDNN SDPA's dtypes); fp32/TF32 cells run
// the unfused tensor-core path with fusion on too (BertConfig::fused_attention),
// which their model description says.
BertConfig bert_config(const CellConfig& cfg, bool cuda = false);
// The vocabulary the data source produces (BERT's embedding rows).
int token_vocab(const CellConfig& cfg);

// GEMM FLOPs of one optimizer step of the cell's model (batch_size samples),
// from the configuration alone, as the built model counts them: `model` the
// forward and backward GEMMs (what MFU counts), `recomputed` the forward GEMMs
// gradient checkpointing runs again (what HFU adds).
struct StepFlops {
  double model = 0, recomputed = 0;
  double hardware() const { return model + recomputed; }
};
StepFlops cell_step_flops(const CellConfig& cfg);

}  // namespace mpb
