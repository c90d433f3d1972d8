// The training loop: micro-batches -> forward/backward (scaled loss) ->
// unscale + finite check -> optimizer step or skip -> scale update, with
// device-timed steps, numerics-health probes and periodic evaluation.
// Nothing here is model-specific.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device.h"
#include "models/fp8_linears.h"
#include "models/model.h"
#include "models/dataset.h"
#include "models/memory_estimate.h"
#include "config/cell_config.h"
#include "train/loss_scaler.h"

namespace mpb {

struct EvalPoint {
  int step = 0;
  double loss = 0.0;
  double accuracy = 0.0;
};

// Gradient and activation health on one sampled step (docs/RESULTS.md).
struct NumericsStats {
  int64_t total = 0, zeros = 0, nonfinite = 0;
  std::vector<int64_t> hist;  // log2 magnitude bins from kHistLo
};
struct NumericsSample {
  int step = 0;
  NumericsStats grads;         // activation gradients, compute dtype
  NumericsStats weight_grads;  // weight gradients as stored (scaled by the loss scale)
  NumericsStats activations;   // stored activations, compute dtype
  // Precision fp8: each linear layer's FP8 tensors (input, weight,
  // grad_output) with the scale this step used, its amax and saturated fraction.
  std::vector<Fp8TensorReport> fp8;
};
constexpr int kHistLo = -50;     // bins cover 2^-50 .. 2^22
constexpr int kHistBins = 72;

struct RunRecord {
  std::vector<double> step_ms, loss, wall_s, loss_scale, grad_norm;
  std::vector<int> skipped, probed;  // probed: numerics sampled on this step (excluded from timing stats)
  std::vector<EvalPoint> evals;
  std::vector<NumericsSample> numerics;
  MemorySnapshot memory;  // peaks over the whole run
  // Per step, what the device counted from just before the step's timer
  // started to the timer's read (core/device_counters.h): host waits,
  // allocations (device memory through the tracker, and pinned host
  // buffers), GEMM plans created. After warm-up the last two must be 0.
  std::vector<int64_t> host_syncs, allocs, plans_created;
  // GEMM epilogue fallbacks over the whole run (warm-up and eval included), by epilogue.
  std::map<std::string, int64_t> gemm_fallbacks;
  // Fused attention calls over the whole run by implementation
  // (DeviceCounters::attention_impls: cudnn_sdpa, cuda_kernel, cpu_kernel).
  std::map<std::string, int64_t> attention_impls;
  double flops_per_step = 0.0;            // model FLOPs (MFU)
  double recompute_flops_per_step = 0.0;  // checkpointing's second forward (HFU adds it)
  // The model as built (Model::describe): what the configuration leaves to
  // the device, such as BERT's decoder width under pad_vocab auto ("V30528"),
  // and the sparse MLM head's rows.
  std::string model;
};

// Testing aids that are not part of a cell's configuration (not in its JSON
// or hash); the runner records them in the manifest so that a result made
// with one can never pass for a real measurement.
struct TrainOptions {
  // Sleep this long inside every timed step: a planted, known slowdown for
  // testing the regression gate end to end (runner --inject-step-delay-ms).
  double inject_step_delay_ms = 0.0;
  // Called after each chunk of an evaluation pass: a long evaluation is
  // progress to the runner's watchdog, not a stall (runner/results/watchdog.h).
  std::function<void()> on_eval_chunk;
};

// One training run, step by step (tests drive it directly; train() loops).
class Trainer {
 public:
  Trainer(Device& dev, Model& model, const Dataset& data, const CellConfig& cfg, const TrainOptions& opt = {});
  ~Trainer();
  // An untimed forward/backward over every micro-batch, with the probes and
  // the evaluation's batch sizes, that leaves no trace (see trainer.cpp).
  void warm_up();
  // Runs optimizer step `step` (1-based) and appends it to the record.
  void step(int step);
  EvalPoint evaluate(int step);
  RunRecord& record() { return rec_; }
  double loss_scale() const { return scaler_.scale(); }
  // The optimizer's fp32 state (AdamW m and v; SGD: momentum, empty).
  Tensor optimizer_state(int i) const;

 private:
  void prepare_inputs(const HostBatch& b);
  void upload_inputs(const HostBatch& b, int64_t first, int64_t rows);
  void probe(ProbeKind kind, const Tensor& t);
  void apply_update();
  EvalSums eval_chunk(int64_t offset, int64_t n);

  Device& dev_;
  Model& model_;
  const Dataset& data_;
  CellConfig cfg_;
  TrainOptions opt_;
  LossScaler scaler_;
  DeviceBuffer m_, v_, y_;
  std::unique_ptr<DeviceTimer> timer_;
  RunRecord rec_;
  // optimizer.decay_exclude: whether each of model.param_info() gets weight
  // decay, and the flat ranges that don't, adjacent tensors merged.
  std::vector<bool> decayed_;
  std::vector<ElementRange> no_decay_;
  // LAMB: one trust ratio per tensor (train/lamb_tensors.h: BERT's packed QKV
  // as q, k, v unless optimizer.lamb_qkv packed), and the device's scratch for its norms.
  std::vector<LambTensor> lamb_tensors_;
  DeviceBuffer lamb_scratch_;
  int64_t applied_ = 0;  // AdamW's step count: skipped steps don't advance it (as with GradScaler)
  double wall_ = 0.0;
  NumericsSample* sample_ = nullptr;
  std::vector<uint16_t> staging16_;
};

// The element ranges of the flat parameters that get no weight decay: the
// tensors whose role is in `exclude`, adjacent ones merged into one range
// (what Device::adamw_step / sgd_step take as no_decay).
std::vector<ElementRange> no_decay_ranges(const std::vector<ParamInfo>& params, const std::vector<ParamRole>& exclude);

// Called after every optimizer step (for progress lines).
using StepCallback = std::function<void(int step, const RunRecord&)>;

// Trains `model` for cfg.steps optimizer steps on `data`, evaluating every
// cfg.eval_every steps and at the end.
RunRecord train(Device& dev, Model& model, const Dataset& data, const CellConfig& cfg,
                const StepCallback& on_step = {}, const TrainOptions& opt = {});

// What a Trainer for `cfg` allocates beside the model (models/memory_estimate.h):
// the optimizer state for `param_count` parameters and the labels of one
// micro-batch on the device; the run record of every step on the host, and
// the result JSON the runner keeps of each repeat (about 16 bytes per value).
MemoryEstimate estimate_trainer_memory(const CellConfig& cfg, double param_count, double micro_batch,
                                       int labels_per_sample);

}  // namespace mpb
