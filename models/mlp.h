// A multi-layer perceptron classifier: hidden_layers x (Linear -> activation),
// then Linear -> logits, softmax cross-entropy. Weight layout [out, in] with
// PyTorch's names (layers.<i>.weight / .bias), so a state dict maps 1:1.
#pragma once

#include <memory>
#include <vector>

#include "core/precision.h"
#include "models/memory_estimate.h"
#include "models/model.h"

namespace mpb {

struct MlpConfig {
  int input_dim = 256;
  int width = 1024;
  int hidden_layers = 4;
  int classes = 16;
  Activation activation = Activation::Gelu;
  double init_scale = 1.0;
  bool fused = false;  // GEMM+bias(+act) epilogues and fused softmax-xent
};

std::unique_ptr<Model> make_mlp(Device& dev, const MlpConfig& cfg, const PrecisionPolicy& policy,
                                int64_t micro_batch, uint64_t seed);

// What make_mlp allocates (models/memory_estimate.h): its parameter store, the
// activation buffers of one micro-batch, GEMM conversion workspace.
// GEMM FLOPs of one training sample from the configuration alone (the model's
// train_flops_per_sample returns this; runner --dry-run's cost estimate reads
// it without building a model).
double mlp_train_flops_per_sample(const MlpConfig& cfg);

MemoryEstimate estimate_mlp_memory(const MlpConfig& cfg, const PrecisionPolicy& policy, double micro_batch);

}  // namespace mpb
