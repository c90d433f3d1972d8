#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "core/numerics.h"
#include "train/lamb_tensors.h"
#include "train/lr_schedule.h"

namespace mpb {

Trainer::Trainer(Device& dev, Model& model, const Dataset& data, const CellConfig& cfg, const TrainOptions& opt)
    : dev_(dev), model_(model), data_(data), cfg_(cfg), opt_(opt), scaler_(cfg.loss_scale) {
  if (model.micro_batch() * cfg.accumulation != cfg.batch_size)
    throw std::invalid_argument("Trainer: micro-batch x accumulation != batch_size");
  // Optimizer state: fp32, one flat buffer per moment, matching the flat parameters.
  const Shape s = model.params().shape;
  m_ = dev.alloc(s, DType::F32, MemCategory::Optimizer);
  dev.fill(m_, 0.0f);
  if (cfg.optimizer.kind != OptimizerKind::Sgd) {  // AdamW and LAMB: two moments
    v_ = dev.alloc(s, DType::F32, MemCategory::Optimizer);
    dev.fill(v_, 0.0f);
  }
  y_ = dev.alloc(Shape{model.micro_batch() * data.labels_per_sample()}, DType::I32, MemCategory::Activations);
  timer_ = dev.make_timer();
  const std::vector<ParamRole> exclude = effective_decay_exclude(cfg);
  for (const ParamInfo& p : model.param_info())
    decayed_.push_back(std::find(exclude.begin(), exclude.end(), p.role) == exclude.end());
  no_decay_ = no_decay_ranges(model.param_info(), exclude);
  if (cfg.optimizer.kind == OptimizerKind::Lamb) {
    lamb_tensors_ = lamb_tensors(model.param_info(), decayed_, cfg.optimizer.lamb_qkv);
    // Allocated here, once, so that no step allocates.
    lamb_scratch_ = dev.alloc(Shape{lamb_scratch_floats(lamb_tensors_.size())}, DType::F32, MemCategory::Optimizer);
  }
  rec_.flops_per_step = model.train_flops_per_sample() * double(cfg.batch_size);
  rec_.recompute_flops_per_step = model.recompute_flops_per_sample() * double(cfg.batch_size);
  rec_.model = model.describe();
}

Trainer::~Trainer() { model_.set_probe({}); }

Tensor Trainer::optimizer_state(int i) const { return i == 0 ? m_.tensor() : v_.tensor(); }

// The data loader's job, done before the step's timer starts: a half-
// precision model gets its inputs converted on the host, as a loader that
// produces batches in the compute dtype would.
void Trainer::prepare_inputs(const HostBatch& b) {
  const DType t = model_.input().dtype;
  if (t != DType::F16 && t != DType::BF16) return;
  staging16_.resize(b.x.size());
  for (size_t i = 0; i < b.x.size(); ++i)
    staging16_[i] = t == DType::F16 ? float_to_half_bits(b.x[i]) : float_to_bf16_bits(b.x[i]);
}

// Samples [first, first+rows) of a prepared batch: one copy each for inputs
// (token ids stay int32), the attention mask (token models) and labels.
void Trainer::upload_inputs(const HostBatch& b, int64_t first, int64_t rows) {
  Tensor x = model_.input().row_slice(0, rows);
  const int64_t offset = first * b.row_width;
  if (x.dtype == DType::I32) dev_.upload(x, b.ids.data() + offset);
  else if (x.dtype == DType::F32) dev_.upload(x, b.x.data() + offset);
  else dev_.upload(x, staging16_.data() + offset);
  const Tensor mask = model_.input_mask();
  if (!mask.empty()) {
    if (b.mask.size() != b.ids.size()) throw std::invalid_argument("upload_inputs: the model needs an attention mask");
    dev_.upload(mask.row_slice(0, rows), b.mask.data() + first * b.row_width);
  }
  const int64_t per = b.labels_per_sample;
  dev_.upload(y_.tensor().flat_slice(0, rows * per), b.y.data() + first * per);
}

namespace {
void add_stats(Device& dev, const Tensor& t, NumericsStats& out, bool histogram) {
  ExponentHistogram h = dev.exponent_histogram(t, kHistLo, kHistBins);
  out.total += h.total;
  out.zeros += h.zeros;
  out.nonfinite += h.nonfinite;
  if (!histogram) return;
  if (out.hist.empty()) out.hist.assign(kHistBins, 0);
  for (int i = 0; i < kHistBins; ++i) out.hist[static_cast<size_t>(i)] += h.bins[static_cast<size_t>(i)];
}
}  // namespace

void Trainer::probe(ProbeKind kind, const Tensor& t) {
  if (!sample_) return;
  if (kind == ProbeKind::Activation) add_stats(dev_, t, sample_->activations, false);
  else add_stats(dev_, t, sample_->grads, true);
}

void Trainer::step(int step) {
  // One profiler range per step, named by its number: a whole-step kernel timeline
  // selects exactly one step with it (bin/gpu-session's timeline: ncu --nvtx-include
  // "train step 12/"). Formatted into a stack buffer: nothing allocated per step.
  char range_name[32];
  std::snprintf(range_name, sizeof range_name, "train step %d", step);
  const DeviceRange whole_step(dev_, range_name);
  const int64_t B = cfg_.batch_size;
  const int64_t micro = model_.micro_batch();
  HostBatch batch = data_.train_batch(step, B);  // generating data is the loader's work, not timed
  prepare_inputs(batch);
  const bool probe_step = cfg_.numerics_every > 0 && step % cfg_.numerics_every == 0;
  NumericsSample sample;
  sample.step = step;
  const double S = scaler_.scale();
  // The loss is the mean over the step's real labels (all of them for the
  // MLP, the masked tokens for BERT), whichever micro-batch holds them.
  const double label_count = double(std::max<int64_t>(1, batch.label_count()));
  const int64_t per = data_.labels_per_sample();

  const DeviceCounters before = dev_.counters();
  const int64_t allocs_before = dev_.memory().snapshot().allocations + before.pinned_allocs;
  timer_->start();
  for (int mb = 0; mb < cfg_.accumulation; ++mb) {
    upload_inputs(batch, mb * micro, micro);
    if (probe_step && mb == cfg_.accumulation - 1) {
      sample_ = &sample;
      model_.set_probe([this](ProbeKind k, const Tensor& t) { probe(k, t); });
    }
    // Each micro-batch's summed loss is divided by the full batch's label
    // count, so N micro-batches of B/N equal one batch of B; the loss scale
    // (and loss_weight) multiply it. The losses add up on the device.
    const DeviceRange range(dev_, "micro-batch forward+backward");
    model_.train_micro(model_.input().row_slice(0, micro), y_.tensor().flat_slice(0, micro * per),
                       float(S * cfg_.loss_weight / label_count),
                       mb == 0 ? GradMode::Overwrite : GradMode::Accumulate);
    model_.set_probe({});
    sample_ = nullptr;
  }
  const auto& inject = cfg_.inject_nonfinite;
  if (std::find(inject.begin(), inject.end(), step) != inject.end())
    dev_.fill(model_.grads().flat_slice(0, 1), INFINITY);  // fault injection
  if (probe_step) add_stats(dev_, model_.grads(), sample.weight_grads, true);

  // Once per optimizer step: finite check, norm, unscale and clip, step or
  // skip, decided on the device, so nothing here waits for it.
  const DeviceRange range(dev_, "gradient statistics + optimizer step");
  dev_.decide_step(model_.grads(), S, cfg_.optimizer.grad_clip);
  apply_update();
  // Precision fp8: this step's amaxes into the histories and the next step's
  // scales, on the device and inside the step, as Transformer Engine does
  // (after skipped steps too); a probed step also reads them back.
  if (Fp8Linears* fp8 = model_.fp8()) {
    fp8->update(probe_step);
    if (probe_step) sample.fp8 = fp8->last_step();
  }
  if (opt_.inject_step_delay_ms > 0)  // the device keeps running queued work meanwhile; the timer sees the wait
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(opt_.inject_step_delay_ms));
  timer_->stop();

  const double ms = timer_->elapsed_ms();
  // The step's loss and decision, read once after the timer (the device is
  // idle by now); counted with the step's syncs. The host's loss scaler and
  // step count follow the device's decision: skip == a non-finite gradient,
  // which is what LossScaler::update returns a skip for.
  const StepResults r = dev_.read_step_results();
  const bool skip = scaler_.update(!r.skip);
  if (skip != r.skip) throw std::logic_error("Trainer: the loss scaler and the device disagree on a skip");
  if (!skip) ++applied_;
  const double norm = skip ? NAN : r.grad_norm;  // of the (weighted) loss's gradient
  rec_.host_syncs.push_back(dev_.counters().host_syncs - before.host_syncs);
  rec_.allocs.push_back(dev_.memory().snapshot().allocations + dev_.counters().pinned_allocs - allocs_before);
  rec_.plans_created.push_back(dev_.counters().plans_created - before.plans_created);
  wall_ += ms / 1000.0;
  rec_.step_ms.push_back(ms);
  rec_.wall_s.push_back(wall_);
  rec_.loss.push_back(r.loss_sum / label_count);
  rec_.loss_scale.push_back(S);
  rec_.grad_norm.push_back(norm);
  rec_.skipped.push_back(skip ? 1 : 0);
  rec_.probed.push_back(probe_step ? 1 : 0);
  if (probe_step) rec_.numerics.push_back(sample);
}

// The update of applied step applied_ + 1 (the learning rate and bias
// correction a step that is not skipped uses), its gradients multiplied by the
// device's decision (Device::decide_step), which makes every op do nothing on
// a skip. The compute copy is refreshed either way: after a skip it gets the
// same values.
void Trainer::apply_update() {
  const GradScale grad_scale = GradScale::decided();
  const OptimizerConfig& o = cfg_.optimizer;
  const int64_t next = applied_ + 1;
  const float lr = float(scheduled_lr(o.lr, o.warmup, o.decay, next, cfg_.steps));
  bool copies_written = false;
  if (o.kind == OptimizerKind::Sgd) {
    dev_.sgd_step(model_.params(), model_.grads(), m_, SgdHyper{lr, float(o.momentum), float(o.weight_decay)},
                  grad_scale, no_decay_);
  } else if (o.kind == OptimizerKind::Lamb) {
    // Always the fused op (the trust ratio needs every tensor's norms);
    // fusion decides only whether it also writes the compute copy.
    const LambHyper h{lr, o.beta1, o.beta2, float(o.eps), float(o.weight_decay), next,
                      o.bias_correction};
    const Tensor copy = cfg_.fused ? model_.weight_copy() : Tensor{};
    dev_.lamb_step(model_.params(), model_.grads(), m_, v_, h, grad_scale, copy, lamb_tensors_, lamb_scratch_);
    copies_written = !copy.empty();
  } else {
    const AdamWHyper h{lr, o.beta1, o.beta2, float(o.eps), float(o.weight_decay), next};
    if (cfg_.fused) {  // fused: one pass over every parameter, writing the compute copy too
      const Tensor copy = model_.weight_copy();
      dev_.adamw_step(model_.params(), model_.grads(), m_, v_, h, grad_scale, true, copy, no_decay_);
      copies_written = !copy.empty();
    } else {  // per parameter tensor, as a framework's per-tensor loop over its parameter groups does
      AdamWHyper no_decay = h;
      no_decay.weight_decay = 0.0f;
      const auto& params = model_.param_info();
      for (size_t i = 0; i < params.size(); ++i) {
        const ParamInfo& p = params[i];
        const int64_t n = p.shape.numel();
        dev_.adamw_step(model_.params().flat_slice(p.offset, n), model_.grads().flat_slice(p.offset, n),
                        m_.tensor().flat_slice(p.offset, n), v_.tensor().flat_slice(p.offset, n),
                        decayed_[i] ? h : no_decay, grad_scale, false, Tensor{});
      }
    }
  }
  if (!copies_written) model_.load_compute_weights();
}

// Eval samples [offset, offset + n), n <= the micro-batch.
EvalSums Trainer::eval_chunk(int64_t offset, int64_t n) {
  HostBatch b = data_.eval_batch(offset, n);
  prepare_inputs(b);
  upload_inputs(b, 0, n);
  return model_.eval_micro(model_.input().row_slice(0, n), y_.tensor().flat_slice(0, n * data_.labels_per_sample()));
}

EvalPoint Trainer::evaluate(int step) {
  EvalSums total;
  const int64_t chunk = model_.micro_batch();
  const int64_t n_eval = cfg_.data.eval_samples;
  for (int64_t off = 0; off < n_eval; off += chunk) {
    EvalSums s = eval_chunk(off, std::min(chunk, n_eval - off));
    total.loss_sum += s.loss_sum;
    total.correct += s.correct;
    total.count += s.count;
    if (opt_.on_eval_chunk) opt_.on_eval_chunk();
  }
  if (Fp8Linears* fp8 = model_.fp8()) fp8->discard();  // evaluation's amaxes are no training step's
  return {step, total.loss_sum / double(total.count), double(total.correct) / double(total.count)};
}

void Trainer::warm_up() {
  // Every path a later step takes, once, untimed and with a zero gradient
  // scale: library set-up (oneDNN primitives, cuBLASLt plans, first-touch
  // page faults) and grow-only scratch (the probes' histograms, the
  // accumulating micro-batches' GEMMs, the evaluation's batch sizes) happen
  // here instead of inside a timed step, which must then allocate nothing and
  // create no plan (tests/train/test_step_counters.cpp). The optimizer runs
  // on its skip path: a planted inf makes the device decide a skip, so every
  // update op launches and changes nothing (the host's loss scaler does not
  // see it), and step 1 overwrites the gradients.
  HostBatch batch = data_.train_batch(1, cfg_.batch_size);
  const int64_t micro = model_.micro_batch();
  const int64_t per = data_.labels_per_sample();
  const uint64_t rng = model_.rng_position();
  prepare_inputs(batch);
  NumericsSample sample;
  const bool probes = cfg_.numerics_every > 0;
  for (int mb = 0; mb < cfg_.accumulation; ++mb) {
    upload_inputs(batch, mb * micro, micro);
    if (probes && mb == cfg_.accumulation - 1) {
      sample_ = &sample;
      model_.set_probe([this](ProbeKind k, const Tensor& t) { probe(k, t); });
    }
    model_.train_micro(model_.input().row_slice(0, micro), y_.tensor().flat_slice(0, micro * per), 0.0f,
                       mb == 0 ? GradMode::Overwrite : GradMode::Accumulate);
    model_.set_probe({});
    sample_ = nullptr;
  }
  if (probes) add_stats(dev_, model_.grads(), sample.weight_grads, true);
  dev_.fill(model_.grads().flat_slice(0, 1), INFINITY);
  dev_.decide_step(model_.grads(), scaler_.scale(), cfg_.optimizer.grad_clip);
  apply_update();
  if (!dev_.read_step_results().skip) throw std::logic_error("Trainer::warm_up: the planted inf was not a skip");
  // The evaluation's two batch sizes: full micro-batches and the remainder.
  const int64_t n_eval = cfg_.data.eval_samples;
  if (n_eval > 0) eval_chunk(0, std::min(micro, n_eval));
  if (n_eval > micro && n_eval % micro != 0) eval_chunk(n_eval - n_eval % micro, n_eval % micro);
  // fp8: the amaxes and saturation counts these passes recorded are no
  // step's (the evaluation's batches would otherwise reach step 1's scales).
  if (Fp8Linears* fp8 = model_.fp8()) fp8->discard();
  model_.set_rng_position(rng);  // step 1's dropout masks are the ones it would draw unwarmed
  dev_.synchronize();
}

RunRecord train(Device& dev, Model& model, const Dataset& data, const CellConfig& cfg,
                const StepCallback& on_step, const TrainOptions& opt) {
  Trainer t(dev, model, data, cfg, opt);
  t.warm_up();
  for (int step = 1; step <= cfg.steps; ++step) {
    t.step(step);
    if (cfg.eval_every > 0 && step % cfg.eval_every == 0 && step != cfg.steps)
      t.record().evals.push_back(t.evaluate(step));
    if (on_step) on_step(step, t.record());
  }
  t.record().evals.push_back(t.evaluate(cfg.steps));
  t.record().memory = dev.memory().snapshot();
  t.record().gemm_fallbacks = dev.counters().gemm_fallbacks;
  t.record().attention_impls = dev.counters().attention_impls;
  return t.record();
}

std::vector<ElementRange> no_decay_ranges(const std::vector<ParamInfo>& params, const std::vector<ParamRole>& exclude) {
  std::vector<ElementRange> out;
  for (const ParamInfo& p : params) {  // in table order: offsets increase
    if (std::find(exclude.begin(), exclude.end(), p.role) == exclude.end() || p.shape.numel() == 0) continue;
    const int64_t end = p.offset + p.shape.numel();
    if (!out.empty() && out.back().end == p.offset) out.back().end = end;
    else out.push_back({p.offset, end});
  }
  return out;
}

// Mirrors the Trainer constructor (m_, v_, y_) and RunRecord: keep them together.
MemoryEstimate estimate_trainer_memory(const CellConfig& cfg, double param_count, double micro, int labels_per_sample) {
  MemoryEstimate e;
  // (LAMB's norm scratch, 256 bytes per parameter tensor, is left out.)
  e[MemCategory::Optimizer] = param_count * 4 * (cfg.optimizer.kind == OptimizerKind::Sgd ? 1 : 2);
  e[MemCategory::Activations] = micro * labels_per_sample * 4;
  // Per step: five doubles, two ints and three int64 counters in the record
  // (twice: vectors grow by doubling), and ten values in each repeat's JSON.
  e.host = double(cfg.steps) * (2 * (5 * 8 + 2 * 4 + 3 * 8) + 10 * 16.0 * cfg.repeats);
  return e;
}

}  // namespace mpb
