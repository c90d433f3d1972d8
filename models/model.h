// What the trainer needs from a model. Models are llm.c-style: explicit
// forward and backward over device ops, parameters in one flat fp32 buffer
// (so a fused optimizer is one pass over all of them), activations allocated
// once for the micro-batch size.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"

namespace mpb {

// What a parameter tensor is, for what treats kinds differently (weight
// decay: optimizer.decay_exclude in docs/CONFIG.md). Typed here rather than
// read from names, which differ between post-LN and pre-LN BERT.
enum class ParamRole {
  Weight,  // a linear layer's weight or an embedding table
  Bias,    // any additive bias, LayerNorm's beta included (HuggingFace's "bias")
  Norm,    // a LayerNorm gain (gamma; HuggingFace's "LayerNorm.weight")
};

struct ParamInfo {
  std::string name;  // "layers.0.weight" (PyTorch state_dict names)
  Shape shape;
  int64_t offset = 0;  // into the flat parameter / gradient buffers
  ParamRole role = ParamRole::Weight;
  // How many layers of the reference model this tensor packs as equal blocks
  // of its first dimension: BERT's attention.qkv is 3 (query, key, value
  // Linears concatenated along dim 0). An optimizer that treats each layer as
  // one tensor (LAMB's trust ratio, optimizer.lamb_qkv split) cuts it there.
  int packed_layers = 1;
};

struct EvalSums {
  double loss_sum = 0.0;
  int64_t correct = 0;
  int64_t count = 0;
};

// Numerics-health probes: when set, the model shows the trainer every
// activation and activation gradient it stores, in the compute dtype.
enum class ProbeKind { Activation, ActivationGrad };
using ProbeFn = std::function<void(ProbeKind, const Tensor&)>;

class Fp8Linears;  // models/fp8_linears.h

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string describe() const = 0;
  virtual const std::vector<ParamInfo>& param_info() const = 0;
  // The flat weights the optimizer updates: fp32 master weights, or the half
  // parameters themselves when the policy keeps no master copy (apex O3).
  virtual Tensor params() = 0;
  virtual Tensor grads() = 0;  // flat gradients [n], in the parameters' dtype
  // Refreshes the weights the forward pass reads (half parameters, the
  // compute-dtype copy) from the updated ones; call after every update.
  virtual void load_compute_weights() = 0;
  // The one copy of the parameters in another dtype that load_compute_weights
  // refreshes (autocast's compute copy, or O2's half model weights), for a
  // fused optimizer to write in its own pass; empty when there is none.
  virtual Tensor weight_copy() { return Tensor{}; }
  virtual int64_t micro_batch() const = 0;
  // The device buffer the trainer uploads inputs into: [micro_batch, in] in
  // the compute dtype (the data loader converts on the host, so no fp32 copy
  // of the input lives on the device).
  virtual Tensor input() = 0;
  // Token models: the attention mask buffer, int32 [micro_batch, T] (1 real
  // token, 0 padding), uploaded beside input(); empty for models without one.
  virtual Tensor input_mask() { return Tensor{}; }
  virtual void set_probe(ProbeFn probe) = 0;  // empty: off
  // Forward and backward on one micro-batch (x: rows of input(), y int32 [b]).
  // d(loss_sum)/d(logits) is multiplied by grad_scale (1/batch x loss scale);
  // gradients are written or added per `mode`. The summed loss stays on the
  // device, added to its deferred loss sum (Device::read_loss_sum), so that a
  // step's micro-batches do not each wait for the device.
  virtual void train_micro(const Tensor& x, const Tensor& y, float grad_scale, GradMode mode) = 0;
  virtual EvalSums eval_micro(const Tensor& x, const Tensor& y) = 0;
  // The logits of the last train_micro/eval_micro call ([rows, classes] or
  // [rows*T, vocab]), for checks against a reference implementation. A head
  // that decodes only the labelled positions (BERT's sparse MLM head) has
  // fewer rows: the labelled positions first, in order, then rows that only
  // fill its fixed shape.
  virtual Tensor logits() const { return Tensor{}; }
  // Precision fp8: the linear layers' FP8 scales (models/fp8_linears.h), which
  // the trainer updates after every step; null otherwise.
  virtual Fp8Linears* fp8() { return nullptr; }
  // Where the model's per-micro-batch random streams (dropout) stand. The
  // trainer's warm-up puts it back afterwards, so that step 1 draws what it
  // would have drawn without a warm-up.
  virtual uint64_t rng_position() const { return 0; }
  virtual void set_rng_position(uint64_t) {}
  // FLOPs of one training sample (forward + backward GEMMs), for GFLOP/s.
  virtual double train_flops_per_sample() const = 0;
  // The forward GEMM FLOPs of one sample that gradient checkpointing runs a
  // second time in the backward pass (0 without it): hardware FLOPs (HFU)
  // are train_flops_per_sample() plus these.
  virtual double recompute_flops_per_sample() const { return 0.0; }
};

}  // namespace mpb
