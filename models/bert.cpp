#include "models/bert.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"

namespace mpb {

BertConfig bert_preset(const std::string& size) {
  struct Preset {
    const char* name;
    int layers, hidden, heads;
  };
  static const Preset presets[] = {{"tiny", 2, 128, 2},   {"mini", 4, 256, 4},   {"small", 4, 512, 8},
                                   {"medium", 8, 512, 8}, {"base", 12, 768, 12}, {"large", 24, 1024, 16}};
  for (const Preset& p : presets) {
    if (size != p.name) continue;
    BertConfig c;
    c.layers = p.layers;
    c.hidden = p.hidden;
    c.heads = p.heads;
    c.ffn = 4 * p.hidden;
    return c;
  }
  throw std::invalid_argument("unknown BERT size '" + size + "' (expected tiny, mini, small, medium, base or large)");
}

void validate_bert(const BertConfig& c) {
  auto fail = [](const std::string& m) { throw std::invalid_argument("bert: " + m); };
  if (c.layers < 1) fail("layers must be >= 1");
  if (c.hidden < 1 || c.heads < 1) fail("hidden and heads must be >= 1");
  if (c.hidden % c.heads != 0)
    fail("hidden " + std::to_string(c.hidden) + " is not divisible by heads " + std::to_string(c.heads));
  if (c.ffn < 0) fail("ffn must be >= 0 (0: 4 * hidden)");
  if (c.vocab < 5) fail("vocab must cover the 4 special tokens and at least one more");
  if (c.seq_len < 2) fail("seq_len must be >= 2 ([CLS] and [SEP])");
  if (!(c.dropout >= 0.0f && c.dropout < 1.0f)) fail("dropout must be in [0, 1)");
  if (!(c.ln_eps > 0.0f)) fail("ln_eps must be > 0");
  if (c.checkpointing != "off" && c.checkpointing != "every_layer" && c.checkpointing != "every_k" &&
      c.checkpointing != "sqrt")
    fail("checkpointing '" + c.checkpointing + "' (expected off, every_layer, every_k or sqrt)");
  if (c.checkpointing == "every_k" && c.checkpoint_k < 1) fail("checkpoint_k must be >= 1");
}

int bert_checkpoint_segment(const BertConfig& c) {
  int k = c.layers;
  if (c.checkpointing == "every_layer") k = 1;
  else if (c.checkpointing == "every_k") k = c.checkpoint_k;
  else if (c.checkpointing == "sqrt") k = static_cast<int>(std::ceil(std::sqrt(double(c.layers)) - 1e-9));
  return std::max(1, std::min(k, c.layers));
}

std::vector<std::string> bert_warnings(const BertConfig& c, int64_t micro_batch) {
  std::vector<std::string> w;
  const char* why = " is not a multiple of 8: tensor cores (fp16/bf16/tf32) want every GEMM dimension to be a "
                    "multiple of 8, so cuBLAS pads the operands or falls back to slower kernels";
  if (c.hidden % 8) w.push_back("hidden " + std::to_string(c.hidden) + why + " (every GEMM has it as a dimension)");
  if (c.ffn_dim() % 8) w.push_back("ffn " + std::to_string(c.ffn_dim()) + why + " (the two FFN GEMMs)");
  if (c.model_vocab() % 8)
    w.push_back("vocab " + std::to_string(c.model_vocab()) + why +
                " (the MLM decoder GEMM, usually the largest one; pad_vocab rounds it up to " +
                std::to_string((c.vocab + 7) / 8 * 8) + ")");
  if (c.heads > 0 && c.hidden % c.heads == 0 && (c.hidden / c.heads) % 8)
    w.push_back("head dim " + std::to_string(c.hidden / c.heads) + why + " (the inner dimension of q.k^T)");
  if (c.seq_len % 8) w.push_back("seq_len " + std::to_string(c.seq_len) + why + " (the attention GEMMs are T x T)");
  if (micro_batch > 0 && (micro_batch * c.seq_len) % 8)
    w.push_back("micro_batch x seq_len = " + std::to_string(micro_batch * c.seq_len) + why +
                " (the row count of every token GEMM)");
  if (c.fused && c.dropout > 0.0f)
    w.push_back("fused attention has no dropout; with dropout > 0 attention runs unfused (the other fusions stay)");
  if (c.checkpointing != "off" && bert_checkpoint_segment(c) >= c.layers)
    w.push_back("checkpointing '" + c.checkpointing + "' gives one segment of " + std::to_string(c.layers) +
                " layers: nothing is recomputed and no memory is saved");
  return w;
}

namespace {

// A parameter as the model uses it: p in the parameter dtype (biases,
// LayerNorm, gathers), c the GEMMs' copy in the compute dtype, g its gradient.
struct PRef {
  Tensor p, c, g;
};

struct LayerParams {
  // ln1 is the first LayerNorm of the layer (post-LN: after attention;
  // pre-LN: before it), ln2 the second.
  PRef qkv_w, qkv_b, o_w, o_b, ln1_g, ln1_b, f1_w, f1_b, f2_w, f2_b, ln2_g, ln2_b;
};

// What one layer's backward pass reads, as the forward pass leaves it.
struct LayerActs {
  DeviceBuffer hln;                       // pre-LN: LN1(x) [N,C], the attention input
  DeviceBuffer mean1, rstd1, mean2, rstd2;  // [N] fp32, statistics of LN1 / LN2
  DeviceBuffer q, k, v;                   // [B,H,T,D]
  DeviceBuffer probs;                     // unfused attention: softmax [B,H,T,T] (before dropout)
  DeviceBuffer a;                         // unfused attention: merged heads [N,C]
  DeviceBuffer att, lse;                  // fused attention: output [B,H,T,D], log-sum-exp [B,H,T] fp32
  DeviceBuffer r1;                        // first residual sum [N,C]
  DeviceBuffer h1;                        // the FFN input [N,C] (post-LN: LN1(r1); pre-LN: LN2(r1))
  DeviceBuffer f1pre, f1;                 // [N,F] before and after GELU
  DeviceBuffer r2;                        // post-LN: second residual sum [N,C]
  DeviceBuffer y;                         // the layer output [N,C] (absent where a checkpoint receives it)
};

enum Site : int { kSiteAttnProbs = 0, kSiteAttnOut = 1, kSiteFfnOut = 2, kSiteEmbed = 3 };

// The first s.numel() elements of a buffer as shape s (a buffer the config
// doesn't need stays empty, and so does its view).
Tensor first(const Tensor& t, Shape s) { return t.empty() ? Tensor{} : t.flat_slice(0, s.numel()).reshaped(s); }

class Bert final : public Model {
 public:
  Bert(Device& dev, const BertConfig& cfg, const PrecisionPolicy& policy, int64_t micro, uint64_t seed)
      : dev_(dev), cfg_(cfg), pol_(policy), B_(micro), seed_(seed) {
    validate_bert(cfg);
    if (micro < 1) throw std::invalid_argument("bert: micro_batch must be >= 1");
    L_ = cfg.layers;
    C_ = cfg.hidden;
    H_ = cfg.heads;
    D_ = C_ / H_;
    F_ = cfg.ffn_dim();
    V_ = cfg.model_vocab();
    T_ = cfg.seq_len;
    pre_ln_ = cfg.pre_ln;
    seg_ = bert_checkpoint_segment(cfg);
    ckpt_ = seg_ < L_;
    attn_fused_ = cfg.fused && cfg.dropout == 0.0f;  // the fused attention op has no dropout
    eps_ = layernorm_eps(pol_.compute, cfg.ln_eps);
    mask_value_ = attention_mask_value(pol_.compute);
    scale_ = 1.0f / std::sqrt(float(D_));
    build_params();
    alloc_activations();
    init_params(seed);
  }

  std::string describe() const override {
    std::string s = "bert L" + std::to_string(L_) + " H" + std::to_string(C_) + " A" + std::to_string(H_) + " F" +
                    std::to_string(F_) + " V" + std::to_string(V_) + " T" + std::to_string(T_) +
                    (pre_ln_ ? " pre-LN" : " post-LN");
    if (cfg_.dropout > 0.0f) {
      std::ostringstream p;
      p << cfg_.dropout;
      s += " dropout " + p.str();
    }
    if (ckpt_) s += " checkpoint " + cfg_.checkpointing + " (" + std::to_string(seg_) + " layers/segment)";
    return s;
  }
  const std::vector<ParamInfo>& param_info() const override { return info_; }
  Tensor params() override { return master_.empty() ? half_params_.tensor() : master_.tensor(); }
  Tensor grads() override { return grads_.tensor(); }
  int64_t micro_batch() const override { return B_; }
  Tensor input() override { return ids_.tensor(); }
  Tensor input_mask() override { return mask_.tensor(); }
  Tensor logits() const override { return last_logits_; }  // [rows * T, V]
  void set_probe(ProbeFn probe) override { probe_ = std::move(probe); }

  Tensor weight_copy() override {  // as in models/mlp.cpp
    if (!compute_w_.empty()) return compute_w_.tensor();                        // autocast
    if (!master_.empty() && !half_params_.empty()) return half_params_.tensor();  // apex O2
    return Tensor{};
  }

  void load_compute_weights() override {
    if (!master_.empty() && !half_params_.empty()) dev_.cast(half_params_.tensor(), master_.tensor());
    const Tensor model_params = half_params_.empty() ? master_.tensor() : half_params_.tensor();
    if (!compute_w_.empty()) dev_.cast(compute_w_.tensor(), model_params);
  }

  double train_micro(const Tensor& x, const Tensor& y, float grad_scale, GradMode mode) override {
    training_ = true;
    ++step_;  // a new dropout stream for every micro-batch
    const int64_t b = x.rows();
    const Tensor logits = forward(x, b);
    Tensor dlogits = first(dlogits_, Shape{b * T_, V_});
    double loss;
    if (cfg_.fused) {
      loss = dev_.softmax_xent_fused(dlogits, logits, y, grad_scale);
    } else {
      Tensor probs = first(probs_, Shape{b * T_, V_});
      loss = dev_.softmax_xent_forward(probs, logits, y);
      dev_.softmax_xent_backward(dlogits, probs, y, grad_scale);
    }
    backward(x, b, mode);
    return loss;
  }

  EvalSums eval_micro(const Tensor& x, const Tensor& y) override {
    training_ = false;  // no dropout
    const int64_t b = x.rows();
    const Tensor logits = forward(x, b);
    EvalSums s;
    // probs (unfused) or dlogits (fused) is scratch here: nothing is backpropagated.
    s.loss_sum = cfg_.fused ? dev_.softmax_xent_fused(first(dlogits_, Shape{b * T_, V_}), logits, y, 0.0f)
                            : dev_.softmax_xent_forward(first(probs_, Shape{b * T_, V_}), logits, y);
    s.correct = dev_.count_correct(logits, y);
    std::vector<int32_t> labels(static_cast<size_t>(y.numel()));
    dev_.download(labels.data(), y);
    for (int32_t v : labels) s.count += v >= 0;
    return s;
  }

  // GEMM FLOPs of one sequence, forward (2mnk each) + backward (dX and dW:
  // twice that). Model FLOPs: checkpointing's recomputed forward is not
  // counted (the MFU convention), so GFLOP/s compare across policies.
  double train_flops_per_sample() const override {
    const double T = T_, C = C_, F = F_, V = V_;
    const double per_layer = 2 * T * C * 3 * C /*QKV*/ + 2 * T * T * C /*q.k^T*/ + 2 * T * T * C /*p.v*/ +
                             2 * T * C * C /*output dense*/ + 2 * 2 * T * C * F /*FFN*/;
    const double head = 2 * T * C * C /*transform*/ + 2 * T * C * V /*tied decoder*/;
    return 3.0 * (L_ * per_layer + head);
  }

 private:
  // --- parameters -------------------------------------------------------------
  enum class Init { Normal, Zero, One };

  int add_param(const std::string& name, Shape shape, Init init) {
    info_.push_back({name, shape, offset_});
    init_.push_back(init);
    offset_ += shape.numel();
    return static_cast<int>(info_.size()) - 1;
  }

  void build_params() {
    // Names follow Hugging Face's BertForMaskedLM state_dict (pre-LN:
    // MegatronBertForMaskedLM's), weights [out, in].
    const int tok = add_param("embeddings.word_embeddings.weight", Shape{V_, C_}, Init::Normal);
    const int pos = add_param("embeddings.position_embeddings.weight", Shape{T_, C_}, Init::Normal);
    const int seg = add_param("embeddings.token_type_embeddings.weight", Shape{2, C_}, Init::Normal);
    int eln_g = -1, eln_b = -1;
    if (!pre_ln_) {
      eln_g = add_param("embeddings.LayerNorm.weight", Shape{C_}, Init::One);
      eln_b = add_param("embeddings.LayerNorm.bias", Shape{C_}, Init::Zero);
    }
    std::vector<std::array<int, 12>> lp(static_cast<size_t>(L_));
    for (int l = 0; l < L_; ++l) {
      const std::string p = "encoder.layer." + std::to_string(l) + ".";
      auto& a = lp[static_cast<size_t>(l)];
      const std::string ln1 = pre_ln_ ? p + "attention.ln." : p + "attention.output.LayerNorm.";
      const std::string ln2 = pre_ln_ ? p + "ln." : p + "output.LayerNorm.";
      if (pre_ln_) {
        a[4] = add_param(ln1 + "weight", Shape{C_}, Init::One);
        a[5] = add_param(ln1 + "bias", Shape{C_}, Init::Zero);
      }
      // One fused QKV projection instead of attention.self.query/key/value:
      // rows [0,C) are the query weight, [C,2C) the key, [2C,3C) the value
      // (torch.cat of the three [C,C] weights along dim 0; likewise the bias).
      a[0] = add_param(p + "attention.qkv.weight", Shape{3 * C_, C_}, Init::Normal);
      a[1] = add_param(p + "attention.qkv.bias", Shape{3 * C_}, Init::Zero);
      a[2] = add_param(p + "attention.output.dense.weight", Shape{C_, C_}, Init::Normal);
      a[3] = add_param(p + "attention.output.dense.bias", Shape{C_}, Init::Zero);
      if (!pre_ln_) {
        a[4] = add_param(ln1 + "weight", Shape{C_}, Init::One);
        a[5] = add_param(ln1 + "bias", Shape{C_}, Init::Zero);
      } else {
        a[10] = add_param(ln2 + "weight", Shape{C_}, Init::One);
        a[11] = add_param(ln2 + "bias", Shape{C_}, Init::Zero);
      }
      a[6] = add_param(p + "intermediate.dense.weight", Shape{F_, C_}, Init::Normal);
      a[7] = add_param(p + "intermediate.dense.bias", Shape{F_}, Init::Zero);
      a[8] = add_param(p + "output.dense.weight", Shape{C_, F_}, Init::Normal);
      a[9] = add_param(p + "output.dense.bias", Shape{C_}, Init::Zero);
      if (!pre_ln_) {
        a[10] = add_param(ln2 + "weight", Shape{C_}, Init::One);
        a[11] = add_param(ln2 + "bias", Shape{C_}, Init::Zero);
      }
    }
    int fln_g = -1, fln_b = -1;
    if (pre_ln_) {
      fln_g = add_param("encoder.ln.weight", Shape{C_}, Init::One);
      fln_b = add_param("encoder.ln.bias", Shape{C_}, Init::Zero);
    }
    const int t_w = add_param("cls.predictions.transform.dense.weight", Shape{C_, C_}, Init::Normal);
    const int t_b = add_param("cls.predictions.transform.dense.bias", Shape{C_}, Init::Zero);
    const int t_g = add_param("cls.predictions.transform.LayerNorm.weight", Shape{C_}, Init::One);
    const int t_beta = add_param("cls.predictions.transform.LayerNorm.bias", Shape{C_}, Init::Zero);
    // The decoder weight is the word embedding (tied); only its bias is a
    // parameter of its own.
    const int dec_b = add_param("cls.predictions.bias", Shape{V_}, Init::Zero);

    // Storage by policy, as in models/mlp.cpp: master_ fp32 weights the
    // optimizer updates; half_params_ the parameters in a half param dtype;
    // compute_w_ the compute-dtype copy the GEMMs read when it differs.
    const int64_t n = offset_;
    const bool half_params = pol_.param != DType::F32;
    if (!half_params || pol_.master_weights) master_ = dev_.alloc(Shape{n}, DType::F32, MemCategory::Params);
    if (half_params) half_params_ = dev_.alloc(Shape{n}, pol_.param, MemCategory::Params);
    if (pol_.compute != pol_.param) compute_w_ = dev_.alloc(Shape{n}, pol_.compute, MemCategory::Params);
    grads_ = dev_.alloc(Shape{n}, pol_.grad(), MemCategory::Grads);
    const Tensor model_params = half_params ? half_params_.tensor() : master_.tensor();
    const Tensor gemm_weights = compute_w_.empty() ? model_params : compute_w_.tensor();
    auto ref = [&](int i) {
      const ParamInfo& pi = info_[static_cast<size_t>(i)];
      const int64_t count = pi.shape.numel();
      return PRef{model_params.flat_slice(pi.offset, count).reshaped(pi.shape),
                  gemm_weights.flat_slice(pi.offset, count).reshaped(pi.shape),
                  grads_.tensor().flat_slice(pi.offset, count).reshaped(pi.shape)};
    };
    tok_ = ref(tok);
    pos_ = ref(pos);
    seg_emb_ = ref(seg);
    if (!pre_ln_) eln_g_ = ref(eln_g), eln_b_ = ref(eln_b);
    for (const auto& a : lp) {
      LayerParams P;
      P.qkv_w = ref(a[0]), P.qkv_b = ref(a[1]), P.o_w = ref(a[2]), P.o_b = ref(a[3]);
      P.ln1_g = ref(a[4]), P.ln1_b = ref(a[5]), P.f1_w = ref(a[6]), P.f1_b = ref(a[7]);
      P.f2_w = ref(a[8]), P.f2_b = ref(a[9]), P.ln2_g = ref(a[10]), P.ln2_b = ref(a[11]);
      layers_.push_back(P);
    }
    if (pre_ln_) fln_g_ = ref(fln_g), fln_b_ = ref(fln_b);
    t_w_ = ref(t_w), t_b_ = ref(t_b), t_g_ = ref(t_g), t_beta_ = ref(t_beta), dec_b_ = ref(dec_b);
  }

  // BERT's initializer: weights and embeddings N(0, 0.02) (initializer_range),
  // biases 0, LayerNorm gamma 1 and beta 0.
  void init_params(uint64_t seed) {
    std::vector<float> host(static_cast<size_t>(offset_));
    Rng rng(Rng::stream_seed(seed, 0xBE27));
    for (size_t i = 0; i < info_.size(); ++i) {
      const ParamInfo& pi = info_[i];
      for (int64_t j = 0; j < pi.shape.numel(); ++j) {
        float v = 0.0f;
        if (init_[i] == Init::Normal) v = static_cast<float>(0.02 * rng.normal());
        else if (init_[i] == Init::One) v = 1.0f;
        host[static_cast<size_t>(pi.offset + j)] = v;
      }
    }
    if (!master_.empty()) {
      dev_.upload(master_.tensor(), host.data());
    } else {
      DeviceBuffer staging = dev_.alloc(Shape{offset_}, DType::F32, MemCategory::Workspace);
      dev_.upload(staging, host.data());
      dev_.cast(half_params_.tensor(), staging);
    }
    load_compute_weights();
  }

  // --- activations ------------------------------------------------------------
  // Kept for the whole step: the inputs, the embedding block's activations,
  // the MLM head's, and per layer a LayerActs set. Without checkpointing
  // there are L sets. With checkpointing (segments of seg_ layers) there are
  // seg_ sets, reused by every segment, plus one [N,C] boundary per segment
  // (bounds_[s] is the input of segment s, bounds_[S] the encoder output;
  // segment 0's input is the embedding output): the forward pass runs each
  // segment through the sets, keeping only its output; the backward pass
  // recomputes segment s's forward from bounds_[s] (the last segment's
  // activations are still in the sets) and then backpropagates through it.
  // Scratch shared by all layers: one layer's worth of temporaries.
  DeviceBuffer act(Shape s, DType t = DType::F32) { return dev_.alloc(s, t, MemCategory::Activations); }
  DeviceBuffer act_c(Shape s) { return act(s, pol_.compute); }

  void alloc_activations() {
    const int64_t N = B_ * T_;
    const Shape nc{N, C_}, nf{N, F_}, heads{B_, H_, T_, D_}, scores{B_, H_, T_, T_}, rows{N};
    ids_ = act(Shape{B_, T_}, DType::I32);
    mask_ = act(Shape{B_, T_}, DType::I32);
    emb_sum_ = act_c(nc);
    if (!pre_ln_) {
      emb_mean_ = act(rows);
      emb_rstd_ = act(rows);
    }
    if (!pre_ln_ || cfg_.dropout > 0.0f) x0_ = act_c(nc);  // pre-LN without dropout: x0 is emb_sum_
    const int nsets = ckpt_ ? seg_ : L_;
    sets_.resize(static_cast<size_t>(nsets));
    for (int i = 0; i < nsets; ++i) {
      LayerActs& A = sets_[static_cast<size_t>(i)];
      if (pre_ln_) A.hln = act_c(nc);
      A.mean1 = act(rows), A.rstd1 = act(rows), A.mean2 = act(rows), A.rstd2 = act(rows);
      A.q = act_c(heads), A.k = act_c(heads), A.v = act_c(heads);
      if (attn_fused_) {
        A.att = act_c(heads);
        A.lse = act(Shape{B_, H_, T_});
      } else {
        A.probs = act_c(scores);
        A.a = act_c(nc);
      }
      A.r1 = act_c(nc), A.h1 = act_c(nc);
      A.f1pre = act_c(nf), A.f1 = act_c(nf);
      if (!pre_ln_) A.r2 = act_c(nc);
      if (!ckpt_ || i < seg_ - 1) A.y = act_c(nc);  // a segment's last layer writes into a boundary
    }
    if (ckpt_) {
      const int S = (L_ + seg_ - 1) / seg_;
      bounds_.resize(static_cast<size_t>(S) + 1);
      for (int s = 1; s <= S; ++s) bounds_[static_cast<size_t>(s)] = act_c(nc);
    }
    if (pre_ln_) {
      fin_out_ = act_c(nc);
      fin_mean_ = act(rows);
      fin_rstd_ = act(rows);
    }
    t_pre_ = act_c(nc), t_act_ = act_c(nc), hm_ = act_c(nc);
    t_mean_ = act(rows), t_rstd_ = act(rows);
    logits_ = act(Shape{N, V_}, pol_.output);
    dlogits_ = act_c(Shape{N, V_});
    if (!cfg_.fused) probs_ = act(Shape{N, V_});
    // Scratch (one layer's temporaries, forward and backward).
    qkv_ = act_c(Shape{N, 3 * C_});  // forward: the QKV projection; backward: dQKV
    proj_ = act_c(nc);               // dense outputs before dropout; their gradients after it
    if (cfg_.dropout > 0.0f) projd_ = act_c(nc);
    if (attn_fused_) {
      a_s_ = act_c(nc);  // the merged heads, recomputed from the stored output in the backward pass
    } else {
      scores_ = act_c(scores);  // raw scores, then the dropped-out probabilities; backward: dprobs
      att_s_ = act_c(heads);    // p.v before merging the heads
      dprobs_ = act_c(scores);
    }
    g_ = act_c(nc), s_ = act_c(nc), da_ = act_c(nc);
    df_ = act_c(nf);
    datt_ = act_c(heads), dq_ = act_c(heads), dk_ = act_c(heads), dv_ = act_c(heads);
  }

  // Views of the first b samples.
  Tensor nc(const Tensor& t, int64_t b) const { return first(t, Shape{b * T_, C_}); }
  Tensor nf(const Tensor& t, int64_t b) const { return first(t, Shape{b * T_, F_}); }
  Tensor rows(const Tensor& t, int64_t b) const { return first(t, Shape{b * T_}); }
  Tensor heads(const Tensor& t, int64_t b) const { return first(t, Shape{b, H_, T_, D_}); }
  Tensor scores(const Tensor& t, int64_t b) const { return first(t, Shape{b, H_, T_, T_}); }

  LayerActs& set(int l) { return sets_[static_cast<size_t>(ckpt_ ? l % seg_ : l)]; }
  bool segment_end(int l) const { return (l + 1) % seg_ == 0 || l == L_ - 1; }
  Tensor embed_out(int64_t b) const { return nc(x0_.empty() ? emb_sum_.tensor() : x0_.tensor(), b); }
  Tensor layer_in(int l, int64_t b) {
    if (l == 0) return embed_out(b);
    if (ckpt_ && l % seg_ == 0) return nc(bounds_[static_cast<size_t>(l / seg_)], b);
    return nc(set(l - 1).y, b);
  }
  Tensor layer_out(int l, int64_t b) {
    if (ckpt_ && segment_end(l)) return nc(bounds_[static_cast<size_t>(l / seg_ + 1)], b);
    return nc(set(l).y, b);
  }

  void probe(ProbeKind kind, const Tensor& t) {
    if (probe_ && probing_) probe_(kind, t);
  }

  // --- op helpers -----------------------------------------------------------------
  // out[M,n] = in[M,k] . W[n,k]^T + bias, optionally GELU (pre_act keeps the input of the GELU).
  void linear(const Tensor& out, const Tensor& in, const PRef& w, const PRef& bias, bool gelu,
              const Tensor& pre_act = Tensor{}) {
    GemmArgs g;
    g.m = in.rows();
    g.n = w.c.shape[0];
    g.k = w.c.shape[1];
    g.a = in;
    g.b = w.c;
    g.trans_b = true;
    g.c = gelu ? pre_act : out;
    g.compute = pol_.gemm;
    if (cfg_.fused) {
      g.c = out;
      g.epilogue = gelu ? Epilogue::BiasGelu : Epilogue::Bias;
      g.bias = bias.p;
      if (gelu) g.pre_act = pre_act;
      dev_.gemm(g);
      return;
    }
    dev_.gemm(g);
    dev_.add_bias(g.c, bias.p);
    if (gelu) dev_.activation_forward(Activation::Gelu, out, pre_act);
  }

  // dW[n,k] (+)= dy[M,n]^T . in[M,k]; db (+)= column sums of dy.
  void linear_param_grads(const PRef& w, const PRef& bias, const Tensor& dy, const Tensor& in, GradMode mode) {
    GemmArgs g;
    g.m = w.g.shape[0];
    g.n = w.g.shape[1];
    g.k = dy.rows();
    g.trans_a = true;
    g.a = dy;
    g.b = in;
    g.c = w.g;
    g.beta = mode == GradMode::Accumulate ? 1.0f : 0.0f;
    g.compute = pol_.gemm;
    dev_.gemm(g);
    if (bias.g.data) dev_.bias_grad(bias.g, dy, mode);
  }

  // dx[M,k] = dy[M,n] . W[n,k] (+ dx when accumulate: a residual branch).
  void linear_input_grad(const Tensor& dx, const Tensor& dy, const PRef& w, bool accumulate) {
    GemmArgs g;
    g.m = dy.rows();
    g.n = w.c.shape[1];
    g.k = w.c.shape[0];
    g.a = dy;
    g.b = w.c;
    g.c = dx;
    g.beta = accumulate ? 1.0f : 0.0f;
    g.compute = pol_.gemm;
    dev_.gemm(g);
  }

  // batch x (C[m,n] = op(A)[m,k] . op(B)[k,n]) over contiguous [batch, ., .] operands.
  void bgemm(const Tensor& c, const Tensor& a, const Tensor& b, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
             int64_t batch) {
    GemmArgs g;
    g.m = m, g.n = n, g.k = k;
    g.trans_a = ta, g.trans_b = tb;
    g.a = a, g.b = b, g.c = c;
    g.compute = pol_.gemm;
    g.batch = batch;
    g.stride_a = m * k, g.stride_b = k * n, g.stride_c = m * n;
    dev_.gemm(g);
  }

  // post-LN and the fused path: out = LN(a + b), sum = a + b.
  void residual_ln(const Tensor& out, const Tensor& sum, const Tensor& mean, const Tensor& rstd, const Tensor& a,
                   const Tensor& b, const PRef& g, const PRef& beta) {
    if (cfg_.fused) {
      dev_.residual_layernorm_forward(out, sum, mean, rstd, a, b, g.p, beta.p, eps_);
    } else {
      dev_.add(sum, a, b);
      dev_.layernorm_forward(out, mean, rstd, sum, g.p, beta.p, eps_);
    }
  }

  uint64_t drop_seed(int layer, int site) const {
    return Rng::stream_seed(Rng::stream_seed(Rng::stream_seed(seed_, 0xD5A7ull), step_),
                            static_cast<uint64_t>(layer) * 8 + static_cast<uint64_t>(site));
  }
  bool dropping() const { return training_ && cfg_.dropout > 0.0f; }
  // Dropout of `in` into `out`; returns the tensor to use (in itself when off).
  Tensor drop(const Tensor& out, const Tensor& in, int layer, int site) {
    if (!dropping()) return in;
    dev_.dropout(out, in, cfg_.dropout, drop_seed(layer, site));
    return out;
  }

  // --- forward ------------------------------------------------------------------------
  Tensor forward(const Tensor& x, int64_t b) {
    probing_ = true;
    embeddings_forward(x, b);
    for (int l = 0; l < L_; ++l) layer_forward(l, b);
    last_logits_ = head_forward(b);
    probing_ = false;
    return last_logits_;
  }

  void embeddings_forward(const Tensor& x, int64_t b) {
    const int64_t N = b * T_;
    const Tensor ids = x.reshaped(Shape{N});
    Tensor e = nc(emb_sum_, b);
    dev_.embedding_forward(e, tok_.p, ids);
    // Position t's row is added to every sequence's token t (the rows of
    // [b, T*C]); every token has segment 0 (single-sentence MLM), whose row
    // is added like a bias.
    dev_.add_bias(first(emb_sum_, Shape{b, T_ * C_}), pos_.p.reshaped(Shape{T_ * C_}));
    dev_.add_bias(e, seg_emb_.p.flat_slice(0, C_));
    Tensor x0 = embed_out(b);
    if (!pre_ln_) {
      Tensor ln = dropping() ? nc(proj_, b) : x0;
      dev_.layernorm_forward(ln, rows(emb_mean_, b), rows(emb_rstd_, b), e, eln_g_.p, eln_b_.p, eps_);
      drop(x0, ln, L_, kSiteEmbed);
    } else if (dropping()) {
      drop(x0, e, L_, kSiteEmbed);
    } else if (x0.data != e.data) {
      dev_.copy(x0, e);  // evaluation of a model with dropout: x0 has a buffer of its own
    }
    probe(ProbeKind::Activation, x0);
  }

  // Attention of layer l from qkv [N,3C]; returns the merged heads [N,C].
  Tensor attention_forward(int l, LayerActs& A, const Tensor& qkv, int64_t b) {
    Tensor q = heads(A.q, b), k = heads(A.k, b), v = heads(A.v, b);
    dev_.split_heads(q, k, v, qkv);
    const Tensor key_valid = first(mask_, Shape{b, T_});
    if (attn_fused_) {
      Tensor o = heads(A.att, b);
      dev_.attention_forward(o, first(A.lse, Shape{b, H_, T_}), q, k, v, key_valid, scale_, mask_value_);
      Tensor a = nc(a_s_, b);
      dev_.merge_heads(a, o);
      probe(ProbeKind::Activation, o);
      return a;
    }
    Tensor s = scores(scores_, b), p = scores(A.probs, b);
    bgemm(s, q, k, T_, T_, D_, false, true, b * H_);  // q . k^T
    dev_.masked_softmax_forward(p, s, key_valid, scale_, mask_value_);
    const Tensor pd = drop(s, p, l, kSiteAttnProbs);  // the raw scores are dead: reuse their buffer
    Tensor att = heads(att_s_, b);
    bgemm(att, pd, v, T_, D_, T_, false, false, b * H_);  // p . v
    Tensor a = nc(A.a, b);
    dev_.merge_heads(a, att);
    probe(ProbeKind::Activation, p);
    probe(ProbeKind::Activation, a);
    return a;
  }

  void layer_forward(int l, int64_t b) {
    const LayerParams& P = layers_[static_cast<size_t>(l)];
    LayerActs& A = set(l);
    const Tensor x = layer_in(l, b), y = layer_out(l, b);
    Tensor qkv = first(qkv_, Shape{b * T_, 3 * C_});
    Tensor attn_in = x;
    if (pre_ln_) {
      attn_in = nc(A.hln, b);
      dev_.layernorm_forward(attn_in, rows(A.mean1, b), rows(A.rstd1, b), x, P.ln1_g.p, P.ln1_b.p, eps_);
      probe(ProbeKind::Activation, attn_in);
    }
    linear(qkv, attn_in, P.qkv_w, P.qkv_b, false);
    probe(ProbeKind::Activation, qkv);
    const Tensor a = attention_forward(l, A, qkv, b);
    Tensor proj = nc(proj_, b);
    linear(proj, a, P.o_w, P.o_b, false);
    Tensor od = drop(nc(projd_, b), proj, l, kSiteAttnOut);
    Tensor r1 = nc(A.r1, b), h1 = nc(A.h1, b);
    if (pre_ln_) residual_ln(h1, r1, rows(A.mean2, b), rows(A.rstd2, b), x, od, P.ln2_g, P.ln2_b);
    else residual_ln(h1, r1, rows(A.mean1, b), rows(A.rstd1, b), x, od, P.ln1_g, P.ln1_b);
    probe(ProbeKind::Activation, h1);
    Tensor f1 = nf(A.f1, b);
    linear(f1, h1, P.f1_w, P.f1_b, true, nf(A.f1pre, b));
    probe(ProbeKind::Activation, f1);
    linear(proj, f1, P.f2_w, P.f2_b, false);
    Tensor fd = drop(nc(projd_, b), proj, l, kSiteFfnOut);
    if (pre_ln_) dev_.add(y, r1, fd);
    else residual_ln(y, nc(A.r2, b), rows(A.mean2, b), rows(A.rstd2, b), h1, fd, P.ln2_g, P.ln2_b);
    probe(ProbeKind::Activation, y);
  }

  Tensor encoder_out(int64_t b) { return layer_out(L_ - 1, b); }

  Tensor head_forward(int64_t b) {
    Tensor in = encoder_out(b);
    if (pre_ln_) {
      Tensor f = nc(fin_out_, b);
      dev_.layernorm_forward(f, rows(fin_mean_, b), rows(fin_rstd_, b), in, fln_g_.p, fln_b_.p, eps_);
      in = f;
    }
    Tensor t = nc(t_act_, b), hm = nc(hm_, b);
    linear(t, in, t_w_, t_b_, true, nc(t_pre_, b));
    dev_.layernorm_forward(hm, rows(t_mean_, b), rows(t_rstd_, b), t, t_g_.p, t_beta_.p, eps_);
    probe(ProbeKind::Activation, hm);
    // Tied decoder: logits[N,V] = hm . E^T + bias.
    Tensor logits = first(logits_, Shape{b * T_, V_});
    PRef dec{Tensor{}, tok_.c, Tensor{}};
    linear(logits, hm, dec, dec_b_, false);
    probe(ProbeKind::Activation, logits);
    return logits;
  }

  // --- backward -----------------------------------------------------------------------
  void backward(const Tensor& x, int64_t b, GradMode mode) {
    Tensor G = nc(g_, b), S = nc(s_, b);
    probing_ = true;
    head_backward(b, mode, G, S);  // G: gradient wrt the encoder output
    const int nseg = (L_ + seg_ - 1) / seg_;
    for (int l = L_ - 1; l >= 0; --l) {
      // Entering a segment from its end: recompute its forward (the last
      // segment's activations are still in the sets from the forward pass).
      // The probes saw these activations in the forward pass already.
      if (ckpt_ && segment_end(l) && l / seg_ < nseg - 1) {
        probing_ = false;
        for (int r = (l / seg_) * seg_; r <= l; ++r) layer_forward(r, b);
        probing_ = true;
      }
      layer_backward(l, b, mode, G, S);
    }
    embeddings_backward(x, b, mode, G, S);
    probing_ = false;
  }

  void head_backward(int64_t b, GradMode mode, Tensor& G, Tensor& S) {
    const int64_t N = b * T_;
    const Tensor dlogits = first(dlogits_, Shape{N, V_});
    probe(ProbeKind::ActivationGrad, dlogits);
    const Tensor hm = nc(hm_, b);
    // Tied decoder: the bias, then dE (+)= dlogits^T . hm — the word
    // embedding's gradient starts here (Overwrite on a step's first
    // micro-batch) and the embedding lookup adds to it at the end.
    dev_.bias_grad(dec_b_.g, dlogits, mode);
    PRef dec{Tensor{}, tok_.c, tok_.g};
    linear_param_grads(dec, PRef{}, dlogits, hm, mode);
    linear_input_grad(S, dlogits, dec, false);  // dhm
    const Tensor t = nc(t_act_, b);
    dev_.layernorm_backward(G, t_g_.g, t_beta_.g, S, t, rows(t_mean_, b), rows(t_rstd_, b), t_g_.p,
                            GradMode::Overwrite, mode);
    dev_.activation_backward(Activation::Gelu, G, G, nc(t_pre_, b));
    const Tensor head_in = pre_ln_ ? nc(fin_out_, b) : encoder_out(b);
    linear_param_grads(t_w_, t_b_, G, head_in, mode);
    linear_input_grad(S, G, t_w_, false);  // d head_in
    if (pre_ln_) {
      dev_.layernorm_backward(G, fln_g_.g, fln_b_.g, S, encoder_out(b), rows(fin_mean_, b), rows(fin_rstd_, b),
                              fln_g_.p, GradMode::Overwrite, mode);
    } else {
      std::swap(G, S);
    }
    probe(ProbeKind::ActivationGrad, G);
  }

  // Backward of the attention core: from da [N,C] (gradient of the merged
  // heads) to dqkv [N,3C].
  void attention_backward(int l, LayerActs& A, const Tensor& da, const Tensor& dqkv, int64_t b) {
    const Tensor q = heads(A.q, b), k = heads(A.k, b), v = heads(A.v, b);
    Tensor datt = heads(datt_, b), dq = heads(dq_, b), dk = heads(dk_, b), dv = heads(dv_, b);
    dev_.split_heads_grad(datt, da);
    if (attn_fused_) {
      dev_.attention_backward(dq, dk, dv, datt, heads(A.att, b), first(A.lse, Shape{b, H_, T_}), q, k, v,
                              first(mask_, Shape{b, T_}), scale_, mask_value_);
    } else {
      const Tensor p = scores(A.probs, b);
      Tensor s1 = scores(scores_, b), s2 = scores(dprobs_, b);
      const Tensor pd = drop(s2, p, l, kSiteAttnProbs);  // the same mask as the forward pass
      bgemm(dv, pd, datt, T_, D_, T_, true, false, b * H_);  // dv = pd^T . datt
      bgemm(s1, datt, v, T_, T_, D_, false, true, b * H_);   // d(pd) = datt . v^T
      Tensor dp = s1, ds = s2;
      if (dropping()) dp = drop(s2, s1, l, kSiteAttnProbs), ds = s1;
      dev_.softmax_backward(ds, p, dp, scale_);  // d scores (the scale included)
      bgemm(dq, ds, k, T_, D_, T_, false, false, b * H_);  // dq = ds . k
      bgemm(dk, ds, q, T_, D_, T_, true, false, b * H_);   // dk = ds^T . q
    }
    probe(ProbeKind::ActivationGrad, dq);
    dev_.merge_qkv_grads(dqkv, dq, dk, dv);
  }

  // G: in, the gradient wrt the layer output; out, wrt its input. S: scratch.
  void layer_backward(int l, int64_t b, GradMode mode, const Tensor& G, const Tensor& S) {
    const LayerParams& P = layers_[static_cast<size_t>(l)];
    LayerActs& A = set(l);
    const Tensor x = layer_in(l, b);
    const Tensor h1 = nc(A.h1, b), f1 = nf(A.f1, b), r1 = nc(A.r1, b);
    Tensor dproj = nc(proj_, b), dF = nf(df_, b), da = nc(da_, b);
    Tensor dqkv = first(qkv_, Shape{b * T_, 3 * C_});
    // The branch gradient of the FFN (through the dropout) and of attention.
    Tensor dff, dattn;
    if (!pre_ln_) {
      dev_.layernorm_backward(S, P.ln2_g.g, P.ln2_b.g, G, nc(A.r2, b), rows(A.mean2, b), rows(A.rstd2, b),
                              P.ln2_g.p, GradMode::Overwrite, mode);  // S = d r2
      dff = drop(dproj, S, l, kSiteFfnOut);
    } else {
      dff = drop(dproj, G, l, kSiteFfnOut);  // G = dy = d r2
    }
    linear_param_grads(P.f2_w, P.f2_b, dff, f1, mode);
    linear_input_grad(dF, dff, P.f2_w, false);
    dev_.activation_backward(Activation::Gelu, dF, dF, nf(A.f1pre, b));
    probe(ProbeKind::ActivationGrad, dF);
    linear_param_grads(P.f1_w, P.f1_b, dF, h1, mode);
    if (!pre_ln_) {
      linear_input_grad(S, dF, P.f1_w, true);  // S = d h1 = d r2 + FFN path
      dev_.layernorm_backward(G, P.ln1_g.g, P.ln1_b.g, S, r1, rows(A.mean1, b), rows(A.rstd1, b), P.ln1_g.p,
                              GradMode::Overwrite, mode);  // G = d r1
    } else {
      linear_input_grad(S, dF, P.f1_w, false);  // S = d LN2(r1)
      dev_.layernorm_backward(G, P.ln2_g.g, P.ln2_b.g, S, r1, rows(A.mean2, b), rows(A.rstd2, b), P.ln2_g.p,
                              GradMode::Accumulate, mode);  // G = d r1 = dy + LN2 path
    }
    dattn = drop(dproj, G, l, kSiteAttnOut);
    Tensor a = attn_fused_ ? nc(a_s_, b) : nc(A.a, b);
    if (attn_fused_) dev_.merge_heads(a, heads(A.att, b));
    linear_param_grads(P.o_w, P.o_b, dattn, a, mode);
    linear_input_grad(da, dattn, P.o_w, false);
    attention_backward(l, A, da, dqkv, b);
    const Tensor attn_in = pre_ln_ ? nc(A.hln, b) : x;
    linear_param_grads(P.qkv_w, P.qkv_b, dqkv, attn_in, mode);
    if (!pre_ln_) {
      linear_input_grad(G, dqkv, P.qkv_w, true);  // G = dx = d r1 + attention path
    } else {
      linear_input_grad(S, dqkv, P.qkv_w, false);
      dev_.layernorm_backward(G, P.ln1_g.g, P.ln1_b.g, S, x, rows(A.mean1, b), rows(A.rstd1, b), P.ln1_g.p,
                              GradMode::Accumulate, mode);  // G = dx = d r1 + LN1 path
    }
    probe(ProbeKind::ActivationGrad, G);
  }

  void embeddings_backward(const Tensor& x, int64_t b, GradMode mode, const Tensor& G, const Tensor& S) {
    const int64_t N = b * T_;
    Tensor d = drop(S, G, L_, kSiteEmbed);  // d (LN output or embedding sum)
    Tensor de = d;
    if (!pre_ln_) {
      de = d.data == G.data ? S : G;
      dev_.layernorm_backward(de, eln_g_.g, eln_b_.g, d, nc(emb_sum_, b), rows(emb_mean_, b), rows(emb_rstd_, b),
                              eln_g_.p, GradMode::Overwrite, mode);
    }
    // The lookup adds to what the tied decoder wrote.
    dev_.embedding_backward(tok_.g, de, x.reshaped(Shape{N}), GradMode::Accumulate);
    dev_.bias_grad(pos_.g.reshaped(Shape{T_ * C_}), de.reshaped(Shape{b, T_ * C_}), mode);
    dev_.bias_grad(seg_emb_.g.flat_slice(0, C_), de, mode);
    if (mode == GradMode::Overwrite) dev_.fill(seg_emb_.g.flat_slice(C_, C_), 0.0f);  // segment 1 is never used
  }

  Device& dev_;
  BertConfig cfg_;
  PrecisionPolicy pol_;
  int64_t B_;
  uint64_t seed_;
  int64_t L_ = 0, C_ = 0, H_ = 0, D_ = 0, F_ = 0, V_ = 0, T_ = 0;
  int seg_ = 1;
  bool pre_ln_ = false, ckpt_ = false, attn_fused_ = false;
  float eps_ = 1e-12f, mask_value_ = -1e9f, scale_ = 1.0f;
  uint64_t step_ = 0;
  bool training_ = false, probing_ = false;
  ProbeFn probe_;
  Tensor last_logits_;

  std::vector<ParamInfo> info_;
  std::vector<Init> init_;
  int64_t offset_ = 0;
  DeviceBuffer master_, half_params_, compute_w_, grads_;
  PRef tok_, pos_, seg_emb_, eln_g_, eln_b_, fln_g_, fln_b_, t_w_, t_b_, t_g_, t_beta_, dec_b_;
  std::vector<LayerParams> layers_;

  DeviceBuffer ids_, mask_;
  DeviceBuffer emb_sum_, emb_mean_, emb_rstd_, x0_;
  std::vector<LayerActs> sets_;
  std::vector<DeviceBuffer> bounds_;
  DeviceBuffer fin_out_, fin_mean_, fin_rstd_;
  DeviceBuffer t_pre_, t_act_, hm_, t_mean_, t_rstd_, logits_, dlogits_, probs_;
  DeviceBuffer qkv_, proj_, projd_, a_s_, scores_, att_s_, dprobs_;
  DeviceBuffer g_, s_, da_, df_, datt_, dq_, dk_, dv_;
};

}  // namespace

std::unique_ptr<Model> make_bert(Device& dev, const BertConfig& cfg, const PrecisionPolicy& policy,
                                 int64_t micro_batch, uint64_t seed) {
  return std::make_unique<Bert>(dev, cfg, policy, micro_batch, seed);
}

}  // namespace mpb
