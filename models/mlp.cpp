#include "models/mlp.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/rng.h"
#include "models/linear.h"
#include "models/param_store.h"

namespace mpb {

namespace {

struct Layer {
  int in = 0, out = 0;
  bool hidden = true;  // followed by the activation
  ParamRef w, b;       // [out,in], [out]
  DeviceBuffer pre;    // [B,out] pre-activation (hidden) or logits (last)
  DeviceBuffer act;    // [B,out] activation output (hidden only)
  std::string forward_range, backward_range;  // profiler ranges: "layers.0 forward"
};

class Mlp final : public StoredParamsModel {
 public:
  Mlp(Device& dev, const MlpConfig& cfg, const PrecisionPolicy& policy, int64_t micro, uint64_t seed)
      : StoredParamsModel(dev, policy), dev_(dev), cfg_(cfg), pol_(policy), B_(micro),
        lin_(dev, policy.gemm, LinearFusion{cfg.fused, cfg.fused}, fp8_.get()) {
    // Layer dims: input -> width x hidden_layers -> classes.
    int prev = cfg.input_dim;
    for (int l = 0; l <= cfg.hidden_layers; ++l) {
      Layer L;
      L.in = prev;
      L.hidden = l < cfg.hidden_layers;
      L.out = L.hidden ? cfg.width : cfg.classes;
      const std::string name = "layers." + std::to_string(l);
      L.forward_range = name + " forward";
      L.backward_range = name + " backward";
      store_.add(name + ".weight", Shape{L.out, L.in}, ParamRole::Weight);
      store_.add(name + ".bias", Shape{L.out}, ParamRole::Bias);
      layers_.push_back(std::move(L));
      prev = layers_.back().out;
    }
    store_.allocate();
    for (size_t l = 0; l < layers_.size(); ++l) {
      Layer& L = layers_[l];
      L.w = store_.ref(2 * static_cast<int>(l));
      L.b = store_.ref(2 * static_cast<int>(l) + 1);
      L.pre = dev.alloc(Shape{B_, L.out}, L.hidden ? pol_.compute : pol_.output, MemCategory::Activations);
      if (L.hidden) L.act = dev.alloc(Shape{B_, L.out}, pol_.compute, MemCategory::Activations);
    }
    x_c_ = dev.alloc(Shape{B_, cfg.input_dim}, pol_.compute, MemCategory::Activations);
    dlogits_ = dev.alloc(Shape{B_, cfg.classes}, pol_.compute, MemCategory::Activations);
    if (!cfg.fused) probs_ = dev.alloc(Shape{B_, cfg.classes}, DType::F32, MemCategory::Activations);
    if (cfg.hidden_layers > 0)
      for (auto& g : dh_) g = dev.alloc(Shape{B_, cfg.width}, pol_.compute, MemCategory::Activations);
    init_params(seed);
  }

  std::string describe() const override {
    return "mlp " + std::to_string(cfg_.input_dim) + "-(" + std::to_string(cfg_.width) + "x" +
           std::to_string(cfg_.hidden_layers) + ")-" + std::to_string(cfg_.classes);
  }
  int64_t micro_batch() const override { return B_; }
  Tensor input() override { return x_c_.tensor(); }
  Tensor logits() const override { return logits_; }
  void set_probe(ProbeFn probe) override { probe_ = std::move(probe); }

  void train_micro(const Tensor& x, const Tensor& y, float grad_scale, GradMode mode) override {
    const Tensor& logits = forward(x);
    const int64_t b = x.rows();
    Tensor dlogits = dlogits_.tensor().row_slice(0, b);
    if (cfg_.fused) {
      dev_.softmax_xent_fused_deferred(dlogits, logits, y, grad_scale);
    } else {
      Tensor probs = probs_.tensor().row_slice(0, b);
      dev_.softmax_xent_forward_deferred(probs, logits, y);
      dev_.softmax_xent_backward(dlogits, probs, y, grad_scale);
    }
    backward(mode);
  }

  EvalSums eval_micro(const Tensor& x, const Tensor& y) override {
    const Tensor& logits = forward(x);
    EvalSums s;
    // The probs buffer (unfused) or dlogits (fused) is scratch here; the
    // gradient scale is irrelevant because nothing is backpropagated.
    const int64_t b = x.rows();
    s.loss_sum = cfg_.fused ? dev_.softmax_xent_fused(dlogits_.tensor().row_slice(0, b), logits, y, 0.0f)
                            : dev_.softmax_xent_forward(probs_.tensor().row_slice(0, b), logits, y);
    s.correct = dev_.count_correct(logits, y);
    s.count = x.rows();
    return s;
  }

  double train_flops_per_sample() const override { return mlp_train_flops_per_sample(cfg_); }

 private:
  // PyTorch nn.Linear's default init: U(-1/sqrt(in), 1/sqrt(in)) for weight
  // and bias (kaiming_uniform with a = sqrt(5)), times init_scale.
  void init_params(uint64_t seed) {
    std::vector<float> host(static_cast<size_t>(store_.numel()));
    Rng rng(Rng::stream_seed(seed, 0x1417));
    for (size_t l = 0; l < layers_.size(); ++l) {
      double bound = cfg_.init_scale / std::sqrt(double(layers_[l].in));
      for (int p = 0; p < 2; ++p) {
        const ParamInfo& pi = store_.info()[2 * l + static_cast<size_t>(p)];
        for (int64_t i = 0; i < pi.shape.numel(); ++i)
          host[static_cast<size_t>(pi.offset + i)] = static_cast<float>(rng.uniform(-bound, bound));
      }
    }
    store_.upload(host);
  }

  // x [b,in] (rows of input(), already in the compute dtype; b <= the
  // micro-batch: the last eval chunk may be short) -> logits [b,classes].
  const Tensor& forward(const Tensor& x) {
    const int64_t b = x.rows();
    x_ = x;
    Tensor in = x;
    for (Layer& L : layers_) {
      const DeviceRange range(dev_, L.forward_range);
      Tensor pre = L.pre.tensor().row_slice(0, b);
      if (!L.hidden) {
        lin_.forward(pre, in, L.w, L.b);  // logits
        logits_ = pre;
        break;
      }
      Tensor act = L.act.tensor().row_slice(0, b);
      lin_.forward(act, pre, in, L.w, L.b, cfg_.activation);
      if (probe_) probe_(ProbeKind::Activation, act);
      in = act;
    }
    return logits_;
  }

  void backward(GradMode mode) {
    const int64_t b = logits_.rows();
    Tensor dy = dlogits_.tensor().row_slice(0, b);  // gradient wrt this layer's pre-activation output
    if (probe_) probe_(ProbeKind::ActivationGrad, dy);
    int ping = 0;
    bool db_done = false;  // this layer's db already written by the layer above's fused GEMM
    for (size_t li = layers_.size(); li-- > 0;) {
      Layer& L = layers_[li];
      const DeviceRange range(dev_, L.backward_range);
      const Tensor in = li == 0 ? x_ : layers_[li - 1].act.tensor().row_slice(0, b);
      lin_.weight_grad(L.w, db_done ? ParamRef{} : L.b, dy, in, mode);
      if (li == 0) break;  // no gradient wrt the input data
      // dx[B,in] = dy . W, through the previous layer's activation.
      const Layer& P = layers_[li - 1];
      Tensor dx = dh_[ping].tensor().row_slice(0, b);
      db_done = lin_.input_grad(dx, dy, L.w, cfg_.activation, P.pre.tensor().row_slice(0, b), P.b, mode);
      if (probe_) probe_(ProbeKind::ActivationGrad, dx);
      dy = dx;
      ping ^= 1;
    }
  }

  Device& dev_;
  MlpConfig cfg_;
  PrecisionPolicy pol_;
  int64_t B_;
  LinearOps lin_;
  std::vector<Layer> layers_;
  ProbeFn probe_;
  DeviceBuffer x_c_, dlogits_, probs_;
  DeviceBuffer dh_[2];
  Tensor x_, logits_;  // this micro-batch's input and logits (views)
};

}  // namespace

// Layer l maps in -> out (input_dim -> width x hidden_layers -> classes): a
// forward GEMM, its weight gradient, and the input gradient except for the
// first layer, whose input needs none: 2 mnk each.
double mlp_train_flops_per_sample(const MlpConfig& cfg) {
  double f = 0.0;
  double in = cfg.input_dim;
  for (int l = 0; l <= cfg.hidden_layers; ++l) {
    const double out = l < cfg.hidden_layers ? cfg.width : cfg.classes;
    const double mac = in * out;
    f += 2 * mac /*forward*/ + 2 * mac /*dW*/ + (l > 0 ? 2 * mac /*dX*/ : 0.0);
    in = out;
  }
  return f;
}

// Mirrors the Mlp constructor above: keep the two together.
MemoryEstimate estimate_mlp_memory(const MlpConfig& cfg, const PrecisionPolicy& pol, double micro) {
  const double B = micro, W = cfg.width, I = cfg.input_dim, K = cfg.classes;
  const double compute = dtype_bytes(pol.compute);
  double numel = 0, largest = 0;  // parameters; the largest matrix of a GEMM
  double in = I;
  for (int l = 0; l <= cfg.hidden_layers; ++l) {
    const double out = l < cfg.hidden_layers ? W : K;
    numel += out * in + out;
    largest = std::max({largest, B * in, B * out, out * in});  // x, y, W (and dW, dx)
    in = out;
  }
  MemoryEstimate e = estimate_param_store(numel, pol);
  double acts = cfg.hidden_layers * (2 * B * W * compute);  // pre and act per hidden layer
  acts += B * K * dtype_bytes(pol.output);                   // the logits
  acts += B * I * compute + B * K * compute;                 // x_c_, dlogits_
  if (!cfg.fused) acts += B * K * 4;                          // probs_
  if (cfg.hidden_layers > 0) acts += 2 * B * W * compute;    // dh_
  e[MemCategory::Activations] += acts;
  // The upload's staging is freed before the first GEMM: the two never coexist.
  e[MemCategory::Workspace] =
      std::max(e[MemCategory::Workspace], gemm_conversion_workspace(pol, largest, std::max(W, K)));
  return e;
}

std::unique_ptr<Model> make_mlp(Device& dev, const MlpConfig& cfg, const PrecisionPolicy& policy,
                                int64_t micro_batch, uint64_t seed) {
  return std::make_unique<Mlp>(dev, cfg, policy, micro_batch, seed);
}

}  // namespace mpb
