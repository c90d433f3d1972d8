#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <stdexcept>

#include "train/loss_scaler.h"

namespace mpb {

namespace {

// The optimizer and its fp32 state (one flat buffer per moment, matching the
// model's flat parameters).
class Optimizer {
 public:
  Optimizer(Device& dev, Model& model, const OptimizerConfig& cfg, bool fused)
      : dev_(dev), model_(model), cfg_(cfg), fused_(fused) {
    Shape s = model.params().shape;
    m_ = dev.alloc(s, DType::F32, MemCategory::Optimizer);
    dev.fill(m_, 0.0f);
    if (cfg.kind == "adamw") {
      v_ = dev.alloc(s, DType::F32, MemCategory::Optimizer);
      dev.fill(v_, 0.0f);
    }
  }

  // grad_scale: unscaling (1/loss scale) and clipping folded into one factor.
  void step(int64_t t, float grad_scale) {
    if (cfg_.kind == "sgd") {
      SgdHyper h{float(cfg_.lr), float(cfg_.momentum), float(cfg_.weight_decay)};
      dev_.sgd_step(model_.params(), model_.grads(), m_, h, grad_scale);
      return;
    }
    AdamWHyper h{float(cfg_.lr), float(cfg_.beta1), float(cfg_.beta2), float(cfg_.eps), float(cfg_.weight_decay), t};
    if (fused_) {  // one pass over every parameter
      dev_.adamw_step(model_.params(), model_.grads(), m_, v_, h, grad_scale, true);
      return;
    }
    // Unfused: per parameter tensor, as a framework's per-tensor loop does.
    for (const ParamInfo& p : model_.param_info()) {
      int64_t n = p.shape.numel();
      dev_.adamw_step(model_.params().flat_slice(p.offset, n), model_.grads().flat_slice(p.offset, n),
                      m_.tensor().flat_slice(p.offset, n), v_.tensor().flat_slice(p.offset, n), h, grad_scale, false);
    }
  }

 private:
  Device& dev_;
  Model& model_;
  OptimizerConfig cfg_;
  bool fused_;
  DeviceBuffer m_, v_;
};

EvalPoint evaluate(Device& dev, Model& model, const TeacherData& data, int eval_samples, int step, Tensor x,
                   Tensor y) {
  EvalSums total;
  const int64_t chunk = model.micro_batch();
  for (int64_t off = 0; off < eval_samples; off += chunk) {
    int64_t n = std::min<int64_t>(chunk, eval_samples - off);
    HostBatch b = data.eval_batch(off, n);
    Tensor xs = x.row_slice(0, n), ys = y.reshaped(Shape{chunk, 1}).row_slice(0, n).reshaped(Shape{n});
    dev.upload(xs, b.x.data());
    dev.upload(ys, b.y.data());
    EvalSums s = model.eval_micro(xs, ys);
    total.loss_sum += s.loss_sum;
    total.correct += s.correct;
    total.count += s.count;
  }
  return {step, total.loss_sum / double(total.count), double(total.correct) / double(total.count)};
}

}  // namespace

RunRecord train(Device& dev, Model& model, const TeacherData& data, const CellConfig& cfg,
                const StepCallback& on_step) {
  const int64_t B = cfg.batch_size;
  const int64_t micro = model.micro_batch();
  if (micro * cfg.accumulation != B) throw std::invalid_argument("train: micro-batch x accumulation != batch_size");
  const bool fused = cfg.fusion == "on";

  Optimizer opt(dev, model, cfg.optimizer, fused);
  LossScaler scaler(cfg.loss_scale);
  DeviceBuffer x = dev.alloc(Shape{micro, data.input_dim()}, DType::F32, MemCategory::Activations);
  DeviceBuffer y = dev.alloc(Shape{micro}, DType::I32, MemCategory::Activations);
  auto timer = dev.make_timer();

  RunRecord rec;
  rec.flops_per_step = model.train_flops_per_sample() * double(B);
  double wall = 0.0;
  int64_t applied = 0;  // AdamW's step count: skipped steps don't advance it (as with GradScaler)
  for (int step = 1; step <= cfg.steps; ++step) {
    HostBatch batch = data.train_batch(step, B);  // host-side data prep is not timed
    const double S = scaler.scale();
    timer->start();
    double loss_sum = 0.0;
    for (int mb = 0; mb < cfg.accumulation; ++mb) {
      dev.upload(x, batch.x.data() + mb * micro * data.input_dim());
      dev.upload(y, batch.y.data() + mb * micro);
      // Each micro-batch's summed loss is divided by the full batch size, so N
      // micro-batches of B/N equal one batch of B.
      loss_sum += model.train_micro(x, y, float(S / double(B)),
                                    mb == 0 ? GradMode::Overwrite : GradMode::Accumulate);
    }
    // Once per optimizer step: unscale, finite check, norm, clip, step or skip.
    TensorStats st = dev.stats(model.grads());
    const bool finite = st.nonfinite == 0 && std::isfinite(st.sum_squares);
    const double norm = finite ? std::sqrt(st.sum_squares) / S : NAN;
    const bool skip = scaler.update(finite);
    if (!skip) {
      double clip = (cfg.optimizer.grad_clip > 0 && norm > cfg.optimizer.grad_clip) ? cfg.optimizer.grad_clip / norm : 1.0;
      opt.step(++applied, float(clip / S));
      model.load_compute_weights();
    }
    timer->stop();
    double ms = timer->elapsed_ms();
    wall += ms / 1000.0;
    rec.step_ms.push_back(ms);
    rec.wall_s.push_back(wall);
    rec.loss.push_back(loss_sum / double(B));
    rec.loss_scale.push_back(S);
    rec.grad_norm.push_back(norm);
    rec.skipped.push_back(skip ? 1 : 0);
    if (cfg.eval_every > 0 && step % cfg.eval_every == 0 && step != cfg.steps)
      rec.evals.push_back(evaluate(dev, model, data, cfg.data.eval_samples, step, x, y));
    if (on_step) on_step(step, rec);
  }
  rec.evals.push_back(evaluate(dev, model, data, cfg.data.eval_samples, cfg.steps, x, y));
  rec.memory = dev.memory().snapshot();
  return rec;
}

}  // namespace mpb
