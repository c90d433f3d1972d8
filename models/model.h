// What the trainer needs from a model. Models are llm.c-style: explicit
// forward and backward over device ops, parameters in one flat fp32 buffer
// (so a fused optimizer is one pass over all of them), activations allocated
// once for the micro-batch size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"

namespace mpb {

struct ParamInfo {
  std::string name;  // "layers.0.weight" (PyTorch state_dict names)
  Shape shape;
  int64_t offset = 0;  // into the flat parameter / gradient buffers
};

struct EvalSums {
  double loss_sum = 0.0;
  int64_t correct = 0;
  int64_t count = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string describe() const = 0;
  virtual const std::vector<ParamInfo>& param_info() const = 0;
  virtual Tensor params() = 0;  // flat fp32 master weights [n]
  virtual Tensor grads() = 0;   // flat fp32 gradients [n]
  // Refreshes the weights the forward pass reads (the compute-dtype copy under
  // mixed precision) from the master weights; call after every update.
  virtual void load_compute_weights() = 0;
  virtual int64_t micro_batch() const = 0;
  // Forward and backward on one micro-batch (x fp32 [b, in], y int32 [b]).
  // d(loss_sum)/d(logits) is multiplied by grad_scale (1/batch x loss scale);
  // gradients are written or added per `mode`. Returns the summed loss.
  virtual double train_micro(const Tensor& x, const Tensor& y, float grad_scale, GradMode mode) = 0;
  virtual EvalSums eval_micro(const Tensor& x, const Tensor& y) = 0;
  // FLOPs of one training sample (forward + backward GEMMs), for GFLOP/s.
  virtual double train_flops_per_sample() const = 0;
};

}  // namespace mpb
