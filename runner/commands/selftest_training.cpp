// The training checks of `runner selftest`; see selftest_training.h.
#include "runner/commands/selftest_training.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>

#include "config/schema.h"
#include "runner/io/seconds_since.h"
#include "runner/results/terminal_table.h"
#include "train/cell_factory.h"
#include "train/trainer.h"

namespace mpb::selftest {

namespace {

// The cells: small enough that all of them take a few seconds on two CPU
// cores, shaped like the real ones (BERT-tiny's preset widths; the MLP of the
// trainer's tests).
CellConfig mlp_cell(const std::string& precision) {
  CellConfig c;
  c.model.kind = ModelKind::Mlp;
  c.model.hidden_layers = 2;
  c.model.width = 256;
  c.data.input_dim = 64;
  c.data.classes = 16;
  c.data.eval_samples = 64;
  c.batch_size = 64;
  c.steps = 3;
  c.warmup_steps = 0;
  c.numerics_every = 0;
  set_precision(c, precision);
  return c;
}

CellConfig bert_cell(const std::string& precision) {
  CellConfig c = mlp_cell(precision);
  c.model.kind = ModelKind::Bert;
  c.model.size = "tiny";  // 2 layers, hidden 128, 2 heads, FFN 512
  c.model.seq_len = 64;
  // The same parameter layout on every device: auto would pad the decoder on a GPU only.
  c.model.pad_vocab = PadVocab::Off;
  c.data.kind = DataKind::Markov;
  c.data.vocab = 512;
  c.batch_size = 8;
  return c;
}

// One SGD step without momentum history, weight decay or clipping: the
// update is -lr x gradient, so comparing updates compares gradients.
void plain_sgd(CellConfig& c) {
  c.optimizer.kind = OptimizerKind::Sgd;
  c.optimizer.lr = 0.1;
  c.optimizer.momentum = 0.0;
  c.optimizer.weight_decay = 0.0;
  c.optimizer.grad_clip = 0.0;
  // fp16 gradients need a scale; a static one, so that the step is never skipped.
  if (c.policy.compute == DType::F16) {
    c.loss_scale.mode = LossScaleMode::Static;
    c.loss_scale.value = 1024.0;
  }
}

std::vector<float> download_f32(Device& dev, const Tensor& t) {
  if (t.dtype != DType::F32) throw std::runtime_error("selftest: expected fp32 master weights");
  std::vector<float> v(static_cast<size_t>(t.numel()));
  dev.download(v.data(), t);
  return v;
}

std::vector<uint8_t> download_bytes(Device& dev, const Tensor& t) {
  std::vector<uint8_t> b(t.bytes());
  dev.download(b.data(), t);
  return b;
}

// What one step of a cell did: its loss and each parameter's update.
struct StepResult {
  double loss = 0.0;
  bool skipped = false;
  std::vector<double> update;
  std::vector<ParamInfo> params;  // the tensors in `update`
};

StepResult one_step(Device& dev, const CellConfig& c) {
  std::unique_ptr<Model> model = build_model(dev, c, /*seed=*/7);
  std::unique_ptr<Dataset> data = build_dataset(c, c.seed);
  Trainer t(dev, *model, *data, c);
  const std::vector<float> before = download_f32(dev, model->params());
  t.step(1);
  const std::vector<float> after = download_f32(dev, model->params());
  StepResult r;
  r.loss = t.record().loss.back();
  r.skipped = t.record().skipped.back() != 0;
  r.update.resize(before.size());
  for (size_t i = 0; i < before.size(); ++i) r.update[i] = double(after[i]) - double(before[i]);
  r.params = model->param_info();
  return r;
}

// How many GEMMs one step runs, forward and backward (an upper bound on how
// many a gradient passes through), and the longest reduction among them.
struct GemmChain {
  int gemms, k_max;
};
GemmChain gemm_chain(const CellConfig& c) {
  if (c.model.kind == ModelKind::Mlp) {
    const int linears = c.model.hidden_layers + 1;
    // Forward one per linear; backward a weight gradient per linear and an
    // input gradient for all but the first. Reductions: the input or the
    // width (forward, input gradient), the batch (weight gradient).
    return {3 * linears - 1, std::max({c.data.input_dim, c.model.width, c.batch_size})};
  }
  const BertConfig b = bert_config(c);
  // Per layer 6 forward products (QKV, QK^T, PV, output projection, 2 FFN),
  // each with 2 in the backward; the MLM head's transform and decoder, also
  // with their backward. Reductions: the FFN width, the tokens of the batch
  // (weight gradients), the sequence (PV).
  const int tokens = c.batch_size * b.seq_len;
  return {18 * b.layers + 6, std::max({b.ffn, tokens, b.seq_len, b.hidden})};
}

// Runs `body` as one check; an exception is a failure.
TrainingCheck timed_check(const std::string& name, const std::function<void(TrainingCheck&)>& body) {
  TrainingCheck c;
  c.name = name;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    body(c);
  } catch (const std::exception& e) {
    c.failures.push_back(std::string("threw: ") + e.what());
  }
  if (!c.failures.empty()) c.status = opcheck::Status::Fail;
  c.seconds = seconds_since(t0);
  return c;
}

void require(TrainingCheck& c, bool ok, const std::string& what) {
  if (!ok) c.failures.push_back(what);
}

// An inf in a gradient at step 2 of an AMP cell with a dynamic scale.
void check_skip_path(TrainingCheck& c, Device& dev) {
  const bool fp16 = dev.supports(Feature::GemmF16).runs();
  CellConfig cfg = mlp_cell(fp16 ? "amp_fp16" : "amp_bf16");
  cfg.loss_scale.mode = LossScaleMode::Dynamic;
  cfg.loss_scale.init = 4096.0;
  cfg.inject_nonfinite = {2};
  std::unique_ptr<Model> model = build_model(dev, cfg, /*seed=*/7);
  std::unique_ptr<Dataset> data = build_dataset(cfg, cfg.seed);
  Trainer t(dev, *model, *data, cfg);
  t.step(1);
  const std::vector<uint8_t> w = download_bytes(dev, model->params());
  const std::vector<uint8_t> m = download_bytes(dev, t.optimizer_state(0));
  const std::vector<uint8_t> v = download_bytes(dev, t.optimizer_state(1));
  const double scale = t.loss_scale();
  t.step(2);
  const RunRecord& r = t.record();
  require(c, r.skipped.back() == 1, "the step with an injected inf was not skipped");
  require(c, std::isnan(r.grad_norm.back()), "the skipped step's gradient norm is not NaN");
  require(c, download_bytes(dev, model->params()) == w, "the master weights changed on the skipped step");
  require(c, download_bytes(dev, t.optimizer_state(0)) == m, "AdamW's m changed on the skipped step");
  require(c, download_bytes(dev, t.optimizer_state(1)) == v, "AdamW's v changed on the skipped step");
  require(c, t.loss_scale() == scale * cfg.loss_scale.backoff_factor,
          fmt("the loss scale went %g -> %g, not halved", scale, t.loss_scale()));
  t.step(3);
  require(c, r.skipped.back() == 0, "the step after the skipped one was skipped too");
  require(c, std::isfinite(r.loss.back()), "the step after the skipped one has a non-finite loss");
  require(c, download_bytes(dev, model->params()) != w, "the step after the skipped one changed no weight");
  c.measured = cfg.precision + fmt(": step 2 skipped, weights, m and v unchanged, scale %g -> %g; step 3 applied",
                                   scale, scale * cfg.loss_scale.backoff_factor);
  c.bound = "exact";
}

// Relative 2-norm difference of a[begin, end) against the reference b.
double relative_error(const std::vector<double>& a, const std::vector<double>& b, size_t begin, size_t end) {
  double diff = 0.0, ref = 0.0;
  for (size_t i = begin; i < end; ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    ref += b[i] * b[i];
  }
  return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
}

// Each parameter tensor's update against the reference's, so that one wrong
// gradient (a bias, a LayerNorm gain) can't hide in the norm of the rest.
struct UpdateError {
  double worst = 0.0;
  std::string tensor;  // the worst one's name
};
UpdateError worst_tensor_error(const StepResult& got, const StepResult& ref) {
  UpdateError e;
  for (const ParamInfo& p : ref.params) {
    const size_t begin = size_t(p.offset), end = begin + size_t(p.shape.numel());
    const double err = relative_error(got.update, ref.update, begin, end);
    if (err >= e.worst) e = {err, p.name};
  }
  return e;
}

void compare_step(TrainingCheck& c, Device& dev, const CellConfig& cfg, const StepResult& ref, bool bitwise) {
  const StepResult got = one_step(dev, cfg);
  require(c, !got.skipped, "the step was skipped (a non-finite gradient)");
  require(c, got.update.size() == ref.update.size(),
          fmt("%zu parameters, the reference has %zu", got.update.size(), ref.update.size()));
  if (!c.failures.empty()) return;
  const UpdateError update = worst_tensor_error(got, ref);
  const double loss_err = std::fabs(got.loss - ref.loss) / std::fabs(ref.loss);
  const GemmChain chain = gemm_chain(cfg);
  const double bound = step_error_bound(cfg.precision, chain.gemms, chain.k_max);
  c.measured = fmt("update %.2e (%s), loss %.2e", update.worst, update.tensor.c_str(), loss_err);
  c.bound = fmt("%.1e", bound) + " (" + std::to_string(chain.gemms) + " GEMMs, K <= " + std::to_string(chain.k_max) + ")";
  c.worst_ratio = std::max(update.worst, loss_err) / bound;
  require(c, std::isfinite(got.loss), "non-finite loss");
  require(c, update.worst <= bound,
          fmt("%s's update differs from fp32's on the CPU by %.3g (relative 2-norm), over %.3g",
              update.tensor.c_str(), update.worst, bound));
  require(c, loss_err <= bound, fmt("the loss %.9g differs from fp32's on the CPU %.9g by %.3g (relative), over %.3g",
                                    got.loss, ref.loss, loss_err, bound));
  if (bitwise) {
    c.bound = "bit for bit (the CPU is deterministic)";
    require(c, update.worst == 0.0 && loss_err == 0.0, "not bit for bit the same as a second CPU device's step");
  }
}

}  // namespace

// Derivation. Against the fp32 step, a precision's step differs by its
// roundings: each GEMM rounds its two operands to the compute format, and AMP
// stores its output there too (three relative perturbations <= u_p each, u_p
// the format's unit roundoff: bf16 2^-8, fp16 and tf32 2^-11, fp32 0), and
// each GEMM sums K products in fp32 in its own order (another backend's order
// differs: sqrt(K) u_32 for rounding errors of random sign). The roundings
// are independent and of random sign, so over the G GEMMs of a step their
// effects on one tensor's update add in quadrature, sqrt(3G) (u_p + sqrt(K)
// u_32), times how much the nonlinear steps between them (softmax, LayerNorm,
// GELU, cross-entropy) amplify a relative perturbation, taken as at most 4.
// TF32 on a GPU rounds operands by truncation or RNA, <= 2 u_tf32, which the
// factor 4 also covers. This is a statistical bound, not a worst case (that
// would be G K u_p, past 1 for BERT in bf16): measured errors on the CPU are
// 1-9 u_p, 5-30x under it, and what it is for are bugs, whose errors are O(1).
double step_error_bound(const std::string& precision, int gemms, int k_max) {
  const double u32 = std::ldexp(1.0, -24);
  double u = 0.0;
  if (precision == "amp_bf16") u = std::ldexp(1.0, -8);
  else if (precision == "amp_fp16" || precision == "tf32") u = std::ldexp(1.0, -11);
  return 4.0 * std::sqrt(3.0 * gemms) * (u + std::sqrt(double(k_max)) * u32);
}

std::vector<TrainingCheck> training_checks(Device& dev, Device& cpu, bool quick,
                                           const std::function<void(const std::string&)>& progress) {
  std::vector<TrainingCheck> out;
  const auto run = [&](const std::string& name, const std::function<void(TrainingCheck&)>& body) {
    if (progress) progress(name);
    out.push_back(timed_check(name, body));
  };
  run("loss scaler skip path (inf injected)", [&](TrainingCheck& c) { check_skip_path(c, dev); });

  const bool on_cpu = dev.info().kind == DeviceKind::Cpu;
  std::vector<std::pair<std::string, std::function<CellConfig(const std::string&)>>> models = {{"mlp", mlp_cell}};
  if (!quick) models.push_back({"bert-tiny", bert_cell});
  for (const auto& [model, make] : models) {
    CellConfig ref_cfg = make("fp32");
    plain_sgd(ref_cfg);
    std::optional<StepResult> ref;
    try {
      ref = one_step(cpu, ref_cfg);
    } catch (const std::exception& e) {
      run("step " + model + " (reference: fp32 on the CPU)",
          [&](TrainingCheck& c) { c.failures.push_back(std::string("the CPU reference step threw: ") + e.what()); });
      continue;
    }
    for (const char* precision : {"fp32", "tf32", "amp_fp16", "amp_bf16"})
      for (bool fused : {false, true}) {
        CellConfig cfg = make(precision);
        cfg.fused = fused;
        plain_sgd(cfg);
        const std::string name = "step " + model + " " + precision + (fused ? " fused" : " unfused");
        // The CPU promises the same bits on any CpuDevice for the same cell.
        const bool bitwise = on_cpu && std::string(precision) == "fp32" && !fused;
        run(name, [&](TrainingCheck& c) { compare_step(c, dev, cfg, *ref, bitwise); });
      }
  }
  return out;
}

}  // namespace mpb::selftest
