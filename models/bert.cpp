#include "models/bert.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "models/bert_layout.h"
#include "models/linear.h"
#include "models/param_store.h"

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

std::optional<BertProblem> check_bert(const BertConfig& c) {
  using P = BertProblem;
  if (c.layers < 1) return P{{"layers"}, "layers must be >= 1"};
  if (c.hidden < 1 || c.heads < 1) return P{{"hidden", "heads"}, "hidden and heads must be >= 1"};
  if (c.hidden % c.heads != 0)
    return P{{"hidden", "heads"}, "hidden " + std::to_string(c.hidden) + " is not divisible by heads " +
                                      std::to_string(c.heads) + " (each head gets hidden / heads dimensions)"};
  if (c.ffn < 0) return P{{"ffn"}, "ffn must be >= 0 (0: 4 * hidden)"};
  if (c.vocab < 5) return P{{"vocab"}, "vocab must cover the 4 special tokens and at least one more"};
  if (c.seq_len < 2) return P{{"seq_len"}, "seq_len must be >= 2 ([CLS] and [SEP])"};
  if (!(c.dropout >= 0.0f && c.dropout < 1.0f)) return P{{"dropout"}, "dropout must be in [0, 1)"};
  if (!(c.ln_eps > 0.0f)) return P{{"ln_eps"}, "ln_eps must be > 0"};
  if (c.checkpointing == CheckpointPolicy::EveryK && c.checkpoint_k < 1)
    return P{{"checkpoint_k"}, "checkpoint_k must be >= 1"};
  return std::nullopt;
}

void validate_bert(const BertConfig& c) {
  if (const auto problem = check_bert(c)) throw std::invalid_argument("bert: " + problem->message);
}

int bert_checkpoint_segment(const BertConfig& c) {
  int k = c.layers;
  if (c.checkpointing == CheckpointPolicy::EveryLayer) k = 1;
  else if (c.checkpointing == CheckpointPolicy::EveryK) k = c.checkpoint_k;
  else if (c.checkpointing == CheckpointPolicy::Sqrt) k = static_cast<int>(std::ceil(std::sqrt(double(c.layers)) - 1e-9));
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
  if (c.checkpointing != CheckpointPolicy::Off && bert_checkpoint_segment(c) >= c.layers)
    w.push_back(std::string("checkpointing '") + checkpoint_policy_name(c.checkpointing) + "' gives one segment of " +
                std::to_string(c.layers) + " layers: nothing is recomputed and no memory is saved");
  return w;
}

namespace {

enum Site : int { kSiteAttnProbs = 0, kSiteAttnOut = 1, kSiteFfnOut = 2, kSiteEmbed = 3 };

const BertConfig& checked(const BertConfig& cfg, int64_t micro) {
  validate_bert(cfg);
  if (micro < 1) throw std::invalid_argument("bert: micro_batch must be >= 1");
  return cfg;
}

class Bert final : public StoredParamsModel {
 public:
  Bert(Device& dev, const BertConfig& cfg, const PrecisionPolicy& policy, int64_t micro, uint64_t seed)
      : StoredParamsModel(dev, policy), dev_(dev), cfg_(checked(cfg, micro)), pol_(policy), B_(micro), seed_(seed),
        L_(cfg.layers), C_(cfg.hidden), H_(cfg.heads), D_(C_ / H_), F_(cfg.ffn_dim()), V_(cfg.model_vocab()),
        T_(cfg.seq_len),
        seg_(bert_checkpoint_segment(cfg)), pre_ln_(cfg.pre_ln), ckpt_(seg_ < L_),
        attn_fused_(cfg.fused && cfg.fused_attention),
        eps_(layernorm_eps(policy.compute, cfg.ln_eps)), mask_value_(attention_mask_value(policy.compute)),
        scale_(1.0f / std::sqrt(float(D_))), sparse_(cfg.mlm_head == MlmHead::Sparse), P_(store_, cfg),
        acts_(dev, cfg, policy, micro, seg_, attn_fused_),
        // Fusion fuses the forward epilogues and, as in the MLP, the FFN's
        // GELU backward into its input-gradient GEMM (DGelu, or DGeluBGrad
        // writing the first FFN layer's bias gradient too).
        lin_(dev, policy.gemm, LinearFusion{cfg.fused, cfg.fused}, fp8_.get()) {
    P_.init(seed);
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
    if (ckpt_)
      s += std::string(" checkpoint ") + checkpoint_policy_name(cfg_.checkpointing) + " (" + std::to_string(seg_) +
           " layers/segment)";
    if (V_ != cfg_.vocab) s += " (pad_vocab: " + std::to_string(cfg_.vocab) + " words)";
    if (cfg_.fused && !attn_fused_) s += " unfused attention (tensor-core GEMMs + masked softmax)";
    if (sparse_) s += " sparse MLM head (" + std::to_string(bert_mlm_rows(cfg_, B_)) + " rows)";
    return s;
  }
  int64_t micro_batch() const override { return B_; }
  Tensor input() override { return acts_.ids.tensor(); }
  Tensor input_mask() override { return acts_.mask.tensor(); }
  // Dense [rows * T, V]; sparse [bert_mlm_rows, V], the masked positions
  // first, in order (Model::logits).
  Tensor logits() const override { return last_logits_; }
  void set_probe(ProbeFn probe) override { probe_ = std::move(probe); }
  uint64_t rng_position() const override { return step_; }
  void set_rng_position(uint64_t p) override { step_ = p; }

  void train_micro(const Tensor& x, const Tensor& y, float grad_scale, GradMode mode) override {
    training_ = true;
    ++step_;  // a new dropout stream for every micro-batch
    const int64_t b = x.rows();
    const Tensor logits = forward(x, y, b);
    const Tensor yh = head_labels(y, b);
    Tensor dlogits = first_view(acts_.dlogits, Shape{head_rows(b), V_});
    if (cfg_.fused) {
      dev_.softmax_xent_fused_deferred(dlogits, logits, yh, grad_scale);
    } else {
      Tensor probs = first_view(acts_.probs, Shape{head_rows(b), V_});
      dev_.softmax_xent_forward_deferred(probs, logits, yh);
      dev_.softmax_xent_backward(dlogits, probs, yh, grad_scale);
    }
    backward(x, b, mode);
  }

  EvalSums eval_micro(const Tensor& x, const Tensor& y) override {
    training_ = false;  // no dropout
    const int64_t b = x.rows();
    const Tensor logits = forward(x, y, b);
    const Tensor yh = head_labels(y, b);
    const Shape sh{head_rows(b), V_};
    EvalSums s;
    // probs (unfused) or dlogits (fused) is scratch here: nothing is backpropagated.
    s.loss_sum = cfg_.fused ? dev_.softmax_xent_fused(first_view(acts_.dlogits, sh), logits, yh, 0.0f)
                            : dev_.softmax_xent_forward(first_view(acts_.probs, sh), logits, yh);
    s.correct = dev_.count_correct(logits, yh);
    std::vector<int32_t> labels(static_cast<size_t>(y.numel()));
    dev_.download(labels.data(), y);
    for (int32_t v : labels) s.count += v >= 0;
    return s;
  }

  double train_flops_per_sample() const override { return bert_train_flops_per_sample(cfg_); }
  double recompute_flops_per_sample() const override { return bert_recompute_flops_per_sample(cfg_); }

 private:

  // Views of the first b sequences.
  Tensor nc(const Tensor& t, int64_t b) const { return first_view(t, Shape{b * T_, C_}); }
  Tensor nf(const Tensor& t, int64_t b) const { return first_view(t, Shape{b * T_, F_}); }
  Tensor rows(const Tensor& t, int64_t b) const { return first_view(t, Shape{b * T_}); }
  Tensor heads(const Tensor& t, int64_t b) const { return first_view(t, Shape{b, H_, T_, D_}); }
  Tensor scores(const Tensor& t, int64_t b) const { return first_view(t, Shape{b, H_, T_, T_}); }
  // The MLM head's rows for b sequences, its [rows, C] views, and its labels.
  int64_t head_rows(int64_t b) const { return bert_mlm_rows(cfg_, b); }
  Tensor mc(const Tensor& t, int64_t b) const { return first_view(t, Shape{head_rows(b), C_}); }
  Tensor mrows(const Tensor& t, int64_t b) const { return first_view(t, Shape{head_rows(b)}); }
  Tensor head_labels(const Tensor& y, int64_t b) const { return sparse_ ? mrows(acts_.pos_labels, b) : y; }

  void probe(ProbeKind kind, const Tensor& t) {
    if (probe_ && probing_) probe_(kind, t);
  }

  // --- op helpers -----------------------------------------------------------------
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
                   const Tensor& b, const ParamRef& g, const ParamRef& beta) {
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
  // Fused attention's dropout on the probabilities: the unfused path's site
  // and seed, so both paths drop the same elements (on the CPU and the CUDA
  // kernel; cuDNN draws its own mask from the seed).
  AttnDropout attention_dropout(int layer) const {
    return dropping() ? AttnDropout{cfg_.dropout, drop_seed(layer, kSiteAttnProbs)} : AttnDropout{};
  }
  // Dropout of `in` into `out`; returns the tensor to use (in itself when off).
  Tensor drop(const Tensor& out, const Tensor& in, int layer, int site) {
    if (!dropping()) return in;
    dev_.dropout(out, in, cfg_.dropout, drop_seed(layer, site));
    return out;
  }

  // Profiler range names (Device::range_push): "encoder.layer.3 forward",
  // "... backward", "... recompute" (checkpointing's second forward), one
  // per layer, made once.
  static std::vector<std::string> layer_ranges(int64_t layers, const char* what) {
    std::vector<std::string> names;
    for (int64_t i = 0; i < layers; ++i) names.push_back("encoder.layer." + std::to_string(i) + " " + what);
    return names;
  }

  // --- forward ------------------------------------------------------------------------
  Tensor forward(const Tensor& x, const Tensor& y, int64_t b) {
    probing_ = true;
    {
      const DeviceRange range(dev_, "embeddings forward");
      embeddings_forward(x, b);
    }
    for (int l = 0; l < L_; ++l) {
      const DeviceRange range(dev_, forward_ranges_[static_cast<size_t>(l)]);
      layer_forward(l, b);
    }
    const DeviceRange range(dev_, "cls head forward");
    last_logits_ = head_forward(y, b);
    probing_ = false;
    return last_logits_;
  }

  void embeddings_forward(const Tensor& x, int64_t b) {
    const int64_t N = b * T_;
    const Tensor ids = x.reshaped(Shape{N});
    Tensor e = nc(acts_.emb_sum, b);
    dev_.embedding_forward(e, P_.tok.p, ids);
    // Position t's row is added to every sequence's token t (the rows of
    // [b, T*C]); every token has segment 0 (single-sentence MLM), whose row
    // is added like a bias.
    dev_.add_bias(first_view(acts_.emb_sum, Shape{b, T_ * C_}), P_.pos.p.reshaped(Shape{T_ * C_}));
    dev_.add_bias(e, P_.seg.p.flat_slice(0, C_));
    Tensor x0 = acts_.embed_out(b);
    if (!pre_ln_) {
      Tensor ln = dropping() ? nc(acts_.proj, b) : x0;
      dev_.layernorm_forward(ln, rows(acts_.emb_mean, b), rows(acts_.emb_rstd, b), e, P_.eln_g.p, P_.eln_b.p, eps_);
      drop(x0, ln, L_, kSiteEmbed);
    } else if (dropping()) {
      drop(x0, e, L_, kSiteEmbed);
    } else if (x0.data != e.data) {
      dev_.copy(x0, e);  // evaluation of a model with dropout: x0 has a buffer of its own
    }
    probe(ProbeKind::Activation, x0);
  }

  // Attention of layer l from qkv [N,3C]; returns the merged heads [N,C].
  // Fused: one op reads the heads from qkv by stride and writes them merged
  // (no head shuffles); both stay for the backward pass.
  Tensor attention_forward(int l, BertLayerActs& A, const Tensor& qkv, int64_t b) {
    const Tensor key_valid = first_view(acts_.mask, Shape{b, T_});
    if (attn_fused_) {
      Tensor a = nc(A.att, b);
      dev_.attention_forward_packed(a, first_view(A.lse, Shape{b, H_, T_}), qkv, key_valid, scale_, mask_value_,
                                    attention_dropout(l));
      probe(ProbeKind::Activation, a);
      return a;
    }
    Tensor q = heads(A.q, b), k = heads(A.k, b), v = heads(A.v, b);
    dev_.split_heads(q, k, v, qkv);
    Tensor s = scores(acts_.scores, b), p = scores(A.probs, b);
    bgemm(s, q, k, T_, T_, D_, false, true, b * H_);  // q . k^T
    dev_.masked_softmax_forward(p, s, key_valid, scale_, mask_value_);
    const Tensor pd = drop(s, p, l, kSiteAttnProbs);  // the raw scores are dead: reuse their buffer
    Tensor att = heads(acts_.att_s, b);
    bgemm(att, pd, v, T_, D_, T_, false, false, b * H_);  // p . v
    Tensor a = nc(A.a, b);
    dev_.merge_heads(a, att);
    probe(ProbeKind::Activation, p);
    probe(ProbeKind::Activation, a);
    return a;
  }

  void layer_forward(int l, int64_t b) {
    const BertLayerParams& P = P_.layers[static_cast<size_t>(l)];
    BertLayerActs& A = acts_.set(l);
    const Tensor x = acts_.layer_in(l, b), y = acts_.layer_out(l, b);
    // Fused attention reads the projection again in the backward pass: its own per layer.
    Tensor qkv = first_view(attn_fused_ ? A.qkv : acts_.qkv, Shape{b * T_, 3 * C_});
    Tensor attn_in = x;
    if (pre_ln_) {
      attn_in = nc(A.hln, b);
      dev_.layernorm_forward(attn_in, rows(A.mean1, b), rows(A.rstd1, b), x, P.ln1_g.p, P.ln1_b.p, eps_);
      probe(ProbeKind::Activation, attn_in);
    }
    lin_.forward(qkv, attn_in, P.qkv_w, P.qkv_b);
    probe(ProbeKind::Activation, qkv);
    const Tensor a = attention_forward(l, A, qkv, b);
    Tensor proj = nc(acts_.proj, b);
    lin_.forward(proj, a, P.o_w, P.o_b);
    Tensor od = drop(nc(acts_.projd, b), proj, l, kSiteAttnOut);
    Tensor r1 = nc(A.r1, b), h1 = nc(A.h1, b);
    if (pre_ln_) residual_ln(h1, r1, rows(A.mean2, b), rows(A.rstd2, b), x, od, P.ln2_g, P.ln2_b);
    else residual_ln(h1, r1, rows(A.mean1, b), rows(A.rstd1, b), x, od, P.ln1_g, P.ln1_b);
    probe(ProbeKind::Activation, h1);
    Tensor f1 = nf(A.f1, b);
    lin_.forward(f1, nf(A.f1pre, b), h1, P.f1_w, P.f1_b, Activation::Gelu);
    probe(ProbeKind::Activation, f1);
    lin_.forward(proj, f1, P.f2_w, P.f2_b);
    Tensor fd = drop(nc(acts_.projd, b), proj, l, kSiteFfnOut);
    if (pre_ln_) dev_.add(y, r1, fd);
    else residual_ln(y, nc(A.r2, b), rows(A.mean2, b), rows(A.rstd2, b), h1, fd, P.ln2_g, P.ln2_b);
    probe(ProbeKind::Activation, y);
  }

  // The head's input: the encoder output (pre-LN: after the final LayerNorm), [b*T, C].
  Tensor head_in(int64_t b) { return pre_ln_ ? nc(acts_.fin_out, b) : acts_.encoder_out(b); }

  Tensor head_forward(const Tensor& y, int64_t b) {
    Tensor in = acts_.encoder_out(b);
    if (pre_ln_) {
      Tensor f = nc(acts_.fin_out, b);
      dev_.layernorm_forward(f, rows(acts_.fin_mean, b), rows(acts_.fin_rstd, b), in, P_.fln_g.p, P_.fln_b.p, eps_);
      in = f;
    }
    if (sparse_) {
      // Sparse: gather the masked positions' rows [M,C] (then the other
      // positions up to the capacity, whose labels are < 0 and whose rows
      // only fill the fixed shape).
      const Tensor pos = mrows(acts_.pos, b);
      dev_.label_positions(pos, mrows(acts_.pos_labels, b), y);
      Tensor hs = mc(acts_.hs, b);
      dev_.embedding_forward(hs, in, pos);
      in = hs;
    }
    Tensor t = mc(acts_.t_act, b), hm = mc(acts_.hm, b);
    lin_.forward(t, mc(acts_.t_pre, b), in, P_.t_w, P_.t_b, Activation::Gelu);
    dev_.layernorm_forward(hm, mrows(acts_.t_mean, b), mrows(acts_.t_rstd, b), t, P_.t_g.p, P_.t_beta.p, eps_);
    probe(ProbeKind::Activation, hm);
    // Tied decoder: logits[M,V] = hm . E^T + bias (M = b*T when dense).
    Tensor logits = first_view(acts_.logits, Shape{head_rows(b), V_});
    lin_.forward(logits, hm, P_.tok, P_.dec_b);
    probe(ProbeKind::Activation, logits);
    return logits;
  }

  // --- backward -----------------------------------------------------------------------
  void backward(const Tensor& x, int64_t b, GradMode mode) {
    Tensor G = nc(acts_.g, b), S = nc(acts_.s, b);
    probing_ = true;
    {
      const DeviceRange range(dev_, "cls head backward");
      head_backward(b, mode, G, S);  // G: gradient wrt the encoder output
    }
    for (int l = L_ - 1; l >= 0; --l) {
      // Entering a segment from its end: recompute its forward (the last
      // segment's activations are still in the sets from the forward pass).
      // The probes saw these activations in the forward pass already.
      if (const int from = acts_.recompute_from(l); from >= 0) {
        probing_ = false;
        for (int r = from; r <= l; ++r) {
          const DeviceRange range(dev_, recompute_ranges_[static_cast<size_t>(r)]);
          layer_forward(r, b);
        }
        probing_ = true;
      }
      const DeviceRange range(dev_, backward_ranges_[static_cast<size_t>(l)]);
      layer_backward(l, b, mode, G, S);
    }
    const DeviceRange range(dev_, "embeddings backward");
    embeddings_backward(x, b, mode, G, S);
    probing_ = false;
  }

  void head_backward(int64_t b, GradMode mode, Tensor& G, Tensor& S) {
    const Tensor dlogits = first_view(acts_.dlogits, Shape{head_rows(b), V_});
    probe(ProbeKind::ActivationGrad, dlogits);
    // The head's rows: [M,C] views of the [b*T,C] scratch (M <= b*T).
    const Tensor Gm = mc(G, b), Sm = mc(S, b);
    // Tied decoder: the bias, then dE (+)= dlogits^T . hm — the word
    // embedding's gradient starts here (Overwrite on a step's first
    // micro-batch) and the embedding lookup adds to it at the end.
    dev_.bias_grad(P_.dec_b.g, dlogits, mode);
    lin_.backward(Sm, P_.tok, ParamRef{}, dlogits, mc(acts_.hm, b), mode);  // S = dhm
    const Tensor t = mc(acts_.t_act, b);
    dev_.layernorm_backward(Gm, P_.t_g.g, P_.t_beta.g, Sm, t, mrows(acts_.t_mean, b), mrows(acts_.t_rstd, b),
                            P_.t_g.p, GradMode::Overwrite, mode);
    dev_.activation_backward(Activation::Gelu, Gm, Gm, mc(acts_.t_pre, b));
    if (sparse_) {
      // d hs into S's first rows, then scattered to the gathered positions
      // of G (every other row 0: the loss does not depend on it through the
      // head); S = d head_in as below.
      lin_.backward(Sm, P_.t_w, P_.t_b, Gm, mc(acts_.hs, b), mode);
      dev_.embedding_backward(G, Sm, mrows(acts_.pos, b), GradMode::Overwrite);
      std::swap(G, S);
    } else {
      lin_.backward(S, P_.t_w, P_.t_b, G, head_in(b), mode);  // S = d head_in
    }
    if (pre_ln_) {
      dev_.layernorm_backward(G, P_.fln_g.g, P_.fln_b.g, S, acts_.encoder_out(b), rows(acts_.fin_mean, b),
                              rows(acts_.fin_rstd, b), P_.fln_g.p, GradMode::Overwrite, mode);
    } else {
      std::swap(G, S);
    }
    probe(ProbeKind::ActivationGrad, G);
  }

  // Backward of the attention core: from da [N,C] (gradient of the merged
  // heads) to dqkv [N,3C].
  void attention_backward(int l, BertLayerActs& A, const Tensor& da, const Tensor& dqkv, int64_t b) {
    if (attn_fused_) {
      dev_.attention_backward_packed(dqkv, da, nc(A.att, b), first_view(A.lse, Shape{b, H_, T_}),
                                     first_view(A.qkv, Shape{b * T_, 3 * C_}), first_view(acts_.mask, Shape{b, T_}),
                                     scale_, mask_value_, attention_dropout(l));
      probe(ProbeKind::ActivationGrad, dqkv);
      return;
    }
    const Tensor q = heads(A.q, b), k = heads(A.k, b), v = heads(A.v, b);
    Tensor datt = heads(acts_.datt, b), dq = heads(acts_.dq, b), dk = heads(acts_.dk, b), dv = heads(acts_.dv, b);
    dev_.split_heads_grad(datt, da);
    const Tensor p = scores(A.probs, b);
    Tensor s1 = scores(acts_.scores, b), s2 = scores(acts_.dprobs, b);
    const Tensor pd = drop(s2, p, l, kSiteAttnProbs);  // the same mask as the forward pass
    bgemm(dv, pd, datt, T_, D_, T_, true, false, b * H_);  // dv = pd^T . datt
    bgemm(s1, datt, v, T_, T_, D_, false, true, b * H_);   // d(pd) = datt . v^T
    Tensor dp = s1, ds = s2;
    if (dropping()) dp = drop(s2, s1, l, kSiteAttnProbs), ds = s1;
    dev_.softmax_backward(ds, p, dp, scale_);  // d scores (the scale included)
    bgemm(dq, ds, k, T_, D_, T_, false, false, b * H_);  // dq = ds . k
    bgemm(dk, ds, q, T_, D_, T_, true, false, b * H_);   // dk = ds^T . q
    dev_.merge_qkv_grads(dqkv, dq, dk, dv);
    probe(ProbeKind::ActivationGrad, dqkv);
  }

  // G: in, the gradient wrt the layer output; out, wrt its input. S: scratch.
  void layer_backward(int l, int64_t b, GradMode mode, const Tensor& G, const Tensor& S) {
    const BertLayerParams& P = P_.layers[static_cast<size_t>(l)];
    BertLayerActs& A = acts_.set(l);
    const Tensor x = acts_.layer_in(l, b);
    const Tensor h1 = nc(A.h1, b), f1 = nf(A.f1, b), r1 = nc(A.r1, b);
    Tensor dproj = nc(acts_.proj, b), dF = nf(acts_.df, b), da = nc(acts_.da, b);
    Tensor dqkv = first_view(acts_.qkv, Shape{b * T_, 3 * C_});
    // The branch gradient of the FFN (through the dropout).
    Tensor dff;
    if (!pre_ln_) {
      dev_.layernorm_backward(S, P.ln2_g.g, P.ln2_b.g, G, nc(A.r2, b), rows(A.mean2, b), rows(A.rstd2, b),
                              P.ln2_g.p, GradMode::Overwrite, mode);  // S = d r2
      dff = drop(dproj, S, l, kSiteFfnOut);
    } else {
      dff = drop(dproj, G, l, kSiteFfnOut);  // G = dy = d r2
    }
    lin_.weight_grad(P.f2_w, P.f2_b, dff, f1, mode);
    const bool f1_bias_done = lin_.input_grad(dF, dff, P.f2_w, Activation::Gelu, nf(A.f1pre, b), P.f1_b, mode);
    const ParamRef& f1_b = f1_bias_done ? ParamRef{} : P.f1_b;  // DGeluBGrad wrote it
    probe(ProbeKind::ActivationGrad, dF);
    if (!pre_ln_) {
      lin_.backward(S, P.f1_w, f1_b, dF, h1, mode, GradMode::Accumulate);  // S = d h1 = d r2 + FFN path
      dev_.layernorm_backward(G, P.ln1_g.g, P.ln1_b.g, S, r1, rows(A.mean1, b), rows(A.rstd1, b), P.ln1_g.p,
                              GradMode::Overwrite, mode);  // G = d r1
    } else {
      lin_.backward(S, P.f1_w, f1_b, dF, h1, mode);  // S = d LN2(r1)
      dev_.layernorm_backward(G, P.ln2_g.g, P.ln2_b.g, S, r1, rows(A.mean2, b), rows(A.rstd2, b), P.ln2_g.p,
                              GradMode::Accumulate, mode);  // G = d r1 = dy + LN2 path
    }
    const Tensor dattn = drop(dproj, G, l, kSiteAttnOut);  // the branch gradient of attention
    const Tensor a = nc(attn_fused_ ? A.att : A.a, b);  // the merged heads, as the forward pass left them
    lin_.backward(da, P.o_w, P.o_b, dattn, a, mode);
    attention_backward(l, A, da, dqkv, b);
    const Tensor attn_in = pre_ln_ ? nc(A.hln, b) : x;
    if (!pre_ln_) {
      lin_.backward(G, P.qkv_w, P.qkv_b, dqkv, attn_in, mode, GradMode::Accumulate);  // G = dx = d r1 + attention
    } else {
      lin_.backward(S, P.qkv_w, P.qkv_b, dqkv, attn_in, mode);
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
      dev_.layernorm_backward(de, P_.eln_g.g, P_.eln_b.g, d, nc(acts_.emb_sum, b), rows(acts_.emb_mean, b),
                              rows(acts_.emb_rstd, b), P_.eln_g.p, GradMode::Overwrite, mode);
    }
    // The lookup adds to what the tied decoder wrote.
    dev_.embedding_backward(P_.tok.g, de, x.reshaped(Shape{N}), GradMode::Accumulate);
    dev_.bias_grad(P_.pos.g.reshaped(Shape{T_ * C_}), de.reshaped(Shape{b, T_ * C_}), mode);
    dev_.bias_grad(P_.seg.g.flat_slice(0, C_), de, mode);
    if (mode == GradMode::Overwrite) dev_.fill(P_.seg.g.flat_slice(C_, C_), 0.0f);  // segment 1 is never used
  }

  Device& dev_;
  BertConfig cfg_;
  PrecisionPolicy pol_;
  int64_t B_;
  uint64_t seed_;
  int64_t L_, C_, H_, D_, F_, V_, T_;
  std::vector<std::string> forward_ranges_ = layer_ranges(L_, "forward"), backward_ranges_ = layer_ranges(L_, "backward"),
                           recompute_ranges_ = layer_ranges(L_, "recompute");
  int seg_;
  bool pre_ln_, ckpt_, attn_fused_;
  float eps_, mask_value_, scale_;
  bool sparse_;
  BertParams P_;
  BertActivations acts_;
  LinearOps lin_;
  uint64_t step_ = 0;
  bool training_ = false, probing_ = false;
  ProbeFn probe_;
  Tensor last_logits_;
};

}  // namespace

std::unique_ptr<Model> make_bert(Device& dev, const BertConfig& cfg, const PrecisionPolicy& policy,
                                 int64_t micro_batch, uint64_t seed) {
  return std::make_unique<Bert>(dev, cfg, policy, micro_batch, seed);
}

}  // namespace mpb
