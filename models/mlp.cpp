#include "models/mlp.h"

#include <cmath>
#include <string>

#include "core/rng.h"

namespace mpb {

namespace {

struct Layer {
  int in = 0, out = 0;
  bool hidden = true;  // followed by the activation
  Tensor w, b;         // parameter views in the param dtype [out,in], [out]
  Tensor dw, db;       // gradient views (param dtype)
  Tensor wc;           // the weight the GEMMs read (compute dtype)
  DeviceBuffer pre;    // [B,out] pre-activation (hidden) or logits (last)
  DeviceBuffer act;    // [B,out] activation output (hidden only)
};

class Mlp final : public Model {
 public:
  Mlp(Device& dev, const MlpConfig& cfg, const PrecisionPolicy& policy, int64_t micro, uint64_t seed)
      : dev_(dev), cfg_(cfg), pol_(policy), B_(micro) {
    // Layer dims: input -> width x hidden_layers -> classes.
    int prev = cfg.input_dim;
    int64_t offset = 0;
    for (int l = 0; l <= cfg.hidden_layers; ++l) {
      Layer L;
      L.in = prev;
      L.hidden = l < cfg.hidden_layers;
      L.out = L.hidden ? cfg.width : cfg.classes;
      std::string name = "layers." + std::to_string(l);
      info_.push_back({name + ".weight", Shape{L.out, L.in}, offset});
      offset += int64_t{L.out} * L.in;
      info_.push_back({name + ".bias", Shape{L.out}, offset});
      offset += L.out;
      layers_.push_back(std::move(L));
      prev = layers_.back().out;
    }
    // Storage by policy (core/precision.h):
    //   master_  fp32 weights the optimizer updates (fp32 params, or O2's copy)
    //   half_params_  the model's parameters in the param dtype (O2/O3: half;
    //            otherwise the master buffer itself)
    //   compute_ the GEMMs' copy in the compute dtype when that differs from
    //            the param dtype (autocast's cast weights)
    const bool half_params = pol_.param != DType::F32;
    if (!half_params || pol_.master_weights) master_ = dev.alloc(Shape{offset}, DType::F32, MemCategory::Params);
    if (half_params) half_params_ = dev.alloc(Shape{offset}, pol_.param, MemCategory::Params);
    if (pol_.compute != pol_.param) compute_w_ = dev.alloc(Shape{offset}, pol_.compute, MemCategory::Params);
    grads_ = dev.alloc(Shape{offset}, pol_.grad(), MemCategory::Grads);
    const Tensor model_params = half_params ? half_params_.tensor() : master_.tensor();
    const Tensor gemm_weights = compute_w_.empty() ? model_params : compute_w_.tensor();
    for (size_t l = 0; l < layers_.size(); ++l) {
      Layer& L = layers_[l];
      const ParamInfo& wi = info_[2 * l];
      const ParamInfo& bi = info_[2 * l + 1];
      L.w = model_params.flat_slice(wi.offset, wi.shape.numel()).reshaped(wi.shape);
      L.b = model_params.flat_slice(bi.offset, bi.shape.numel());
      L.dw = grads_.tensor().flat_slice(wi.offset, wi.shape.numel()).reshaped(wi.shape);
      L.db = grads_.tensor().flat_slice(bi.offset, bi.shape.numel());
      L.wc = gemm_weights.flat_slice(wi.offset, wi.shape.numel()).reshaped(wi.shape);
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
  const std::vector<ParamInfo>& param_info() const override { return info_; }
  Tensor params() override { return master_.empty() ? half_params_.tensor() : master_.tensor(); }
  Tensor grads() override { return grads_.tensor(); }
  int64_t micro_batch() const override { return B_; }
  Tensor input() override { return x_c_.tensor(); }
  Tensor logits() const override { return logits_; }
  Tensor weight_copy() override {
    if (!compute_w_.empty()) return compute_w_.tensor();                        // autocast
    if (!master_.empty() && !half_params_.empty()) return half_params_.tensor();  // apex O2
    return Tensor{};
  }
  void set_probe(ProbeFn probe) override { probe_ = std::move(probe); }

  void load_compute_weights() override {
    if (!master_.empty() && !half_params_.empty()) dev_.cast(half_params_.tensor(), master_.tensor());
    const Tensor model_params = half_params_.empty() ? master_.tensor() : half_params_.tensor();
    if (!compute_w_.empty()) dev_.cast(compute_w_.tensor(), model_params);
  }

  double train_micro(const Tensor& x, const Tensor& y, float grad_scale, GradMode mode) override {
    const Tensor& logits = forward(x);
    const int64_t b = x.rows();
    Tensor dlogits = dlogits_.tensor().row_slice(0, b);
    double loss;
    if (cfg_.fused) {
      loss = dev_.softmax_xent_fused(dlogits, logits, y, grad_scale);
    } else {
      Tensor probs = probs_.tensor().row_slice(0, b);
      loss = dev_.softmax_xent_forward(probs, logits, y);
      dev_.softmax_xent_backward(dlogits, probs, y, grad_scale);
    }
    backward(mode);
    return loss;
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

  double train_flops_per_sample() const override {
    double f = 0.0;
    for (size_t l = 0; l < layers_.size(); ++l) {
      double mac = double(layers_[l].in) * layers_[l].out;
      f += 2 * mac /*forward*/ + 2 * mac /*dW*/ + (l > 0 ? 2 * mac /*dX*/ : 0.0);
    }
    return f;
  }

 private:
  // PyTorch nn.Linear's default init: U(-1/sqrt(in), 1/sqrt(in)) for weight
  // and bias (kaiming_uniform with a = sqrt(5)), times init_scale.
  void init_params(uint64_t seed) {
    std::vector<float> host(static_cast<size_t>(grads_.tensor().numel()));
    Rng rng(Rng::stream_seed(seed, 0x1417));
    for (size_t l = 0; l < layers_.size(); ++l) {
      double bound = cfg_.init_scale / std::sqrt(double(layers_[l].in));
      for (int p = 0; p < 2; ++p) {
        const ParamInfo& pi = info_[2 * l + p];
        for (int64_t i = 0; i < pi.shape.numel(); ++i)
          host[static_cast<size_t>(pi.offset + i)] = static_cast<float>(rng.uniform(-bound, bound));
      }
    }
    if (!master_.empty()) {
      dev_.upload(master_.tensor(), host.data());
    } else {  // no master copy: the half parameters are initialised directly
      DeviceBuffer staging = dev_.alloc(Shape{static_cast<int64_t>(host.size())}, DType::F32, MemCategory::Workspace);
      dev_.upload(staging, host.data());
      dev_.cast(half_params_.tensor(), staging);
    }
    load_compute_weights();
  }

  GemmArgs linear_args(const Tensor& in, const Layer& L, const Tensor& out) const {
    GemmArgs g;  // out[B,out] = in[B,in] . W^T
    g.m = in.rows();
    g.n = L.out;
    g.k = L.in;
    g.a = in;
    g.b = L.wc;
    g.trans_b = true;
    g.c = out;
    g.compute = pol_.gemm;
    return g;
  }

  const Tensor& forward(const Tensor& x) {
    const int64_t b = x.rows();  // <= the micro-batch (the last eval chunk may be short)
    Tensor in = x;  // rows of input(), already in the compute dtype
    x_ = x;
    for (Layer& L : layers_) {
      Tensor pre = L.pre.tensor().row_slice(0, b);
      GemmArgs g = linear_args(in, L, pre);
      if (!L.hidden) {
        if (cfg_.fused) {
          g.epilogue = Epilogue::Bias;
          g.bias = L.b;
          dev_.gemm(g);
        } else {
          dev_.gemm(g);
          dev_.add_bias(pre, L.b);
        }
        logits_ = pre;
        break;
      }
      Tensor act = L.act.tensor().row_slice(0, b);
      if (cfg_.fused) {
        g.c = act;
        g.pre_act = pre;
        g.epilogue = cfg_.activation == Activation::Gelu ? Epilogue::BiasGelu : Epilogue::BiasRelu;
        g.bias = L.b;
        dev_.gemm(g);
      } else {
        dev_.gemm(g);
        dev_.add_bias(pre, L.b);
        dev_.activation_forward(cfg_.activation, act, pre);
      }
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
    bool db_done = false;  // this layer's db already written by the DGeluBGrad GEMM
    for (size_t li = layers_.size(); li-- > 0;) {
      Layer& L = layers_[li];
      Tensor in = li == 0 ? x_ : layers_[li - 1].act.tensor().row_slice(0, b);
      // dW[out,in] (+)= dy^T . in, accumulated in fp32, stored in the grad dtype
      GemmArgs gw;
      gw.m = L.out;
      gw.n = L.in;
      gw.k = b;
      gw.trans_a = true;
      gw.a = dy;
      gw.b = in;
      gw.c = L.dw;
      gw.beta = mode == GradMode::Accumulate ? 1.0f : 0.0f;
      gw.compute = pol_.gemm;
      dev_.gemm(gw);
      if (!db_done) dev_.bias_grad(L.db, dy, mode);
      db_done = false;
      if (li == 0) break;  // no gradient wrt the input data
      // dx[B,in] = dy . W, then through the previous layer's activation.
      Layer& P = layers_[li - 1];
      Tensor dx = dh_[ping].tensor().row_slice(0, b);
      GemmArgs gx;
      gx.m = b;
      gx.n = L.in;
      gx.k = L.out;
      gx.a = dy;
      gx.b = L.wc;
      gx.c = dx;
      gx.compute = pol_.gemm;
      if (cfg_.fused && cfg_.activation == Activation::Gelu) {
        // One GEMM with the GELU-derivative epilogue: dx = (dy . W) *
        // gelu'(pre). With GradMode::Overwrite the previous layer's db (the
        // column sums of this same dx) comes out of it too (DGeluBGrad
        // writes, it never accumulates: micro-batches keep bias_grad).
        gx.pre_act = P.pre.tensor().row_slice(0, b);
        gx.epilogue = mode == GradMode::Overwrite ? Epilogue::DGeluBGrad : Epilogue::DGelu;
        if (mode == GradMode::Overwrite) gx.bias_grad_out = P.db;
        dev_.gemm(gx);
        db_done = mode == GradMode::Overwrite;
      } else {
        dev_.gemm(gx);
        dev_.activation_backward(cfg_.activation, dx, dx, P.pre.tensor().row_slice(0, b));
      }
      if (probe_) probe_(ProbeKind::ActivationGrad, dx);
      dy = dx;
      ping ^= 1;
    }
  }

  Device& dev_;
  MlpConfig cfg_;
  PrecisionPolicy pol_;
  int64_t B_;
  std::vector<ParamInfo> info_;
  std::vector<Layer> layers_;
  DeviceBuffer master_, half_params_, compute_w_, grads_;
  ProbeFn probe_;
  DeviceBuffer x_c_, dlogits_, probs_;
  DeviceBuffer dh_[2];
  Tensor x_, logits_;  // this micro-batch's input and logits (views)
};

}  // namespace

std::unique_ptr<Model> make_mlp(Device& dev, const MlpConfig& cfg, const PrecisionPolicy& policy,
                                int64_t micro_batch, uint64_t seed) {
  return std::make_unique<Mlp>(dev, cfg, policy, micro_batch, seed);
}

}  // namespace mpb
