#include "models/bert_layout.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "core/rng.h"

namespace mpb {

// In BERT's table the initialisation says what a tensor is: every
// zero-initialised tensor is a bias (LayerNorm's beta included), every
// one-initialised one a LayerNorm gain (tests/models/test_bert.cpp checks the
// roles against the names).
int BertParams::add(const std::string& name, Shape shape, Init init, int packed_layers) {
  init_.push_back(init);
  const ParamRole role = init == Init::Zero  ? ParamRole::Bias
                         : init == Init::One ? ParamRole::Norm
                                             : ParamRole::Weight;
  return store_->add(name, shape, role, packed_layers);
}

BertParams::BertParams(ParamStore& store, const BertConfig& cfg)
    : store_(&store), vocab_(cfg.vocab), model_vocab_(cfg.model_vocab()), hidden_(cfg.hidden) {
  const int64_t C = cfg.hidden, F = cfg.ffn_dim(), V = cfg.model_vocab(), T = cfg.seq_len;
  const bool pre_ln = cfg.pre_ln;
  const int itok = add("embeddings.word_embeddings.weight", Shape{V, C}, Init::Normal);
  const int ipos = add("embeddings.position_embeddings.weight", Shape{T, C}, Init::Normal);
  const int iseg = add("embeddings.token_type_embeddings.weight", Shape{2, C}, Init::Normal);
  int ieln_g = -1, ieln_b = -1;
  if (!pre_ln) {
    ieln_g = add("embeddings.LayerNorm.weight", Shape{C}, Init::One);
    ieln_b = add("embeddings.LayerNorm.bias", Shape{C}, Init::Zero);
  }
  std::vector<std::array<int, 12>> lp(static_cast<size_t>(cfg.layers));
  for (int l = 0; l < cfg.layers; ++l) {
    const std::string p = "encoder.layer." + std::to_string(l) + ".";
    auto& a = lp[static_cast<size_t>(l)];
    const std::string ln1 = pre_ln ? p + "attention.ln." : p + "attention.output.LayerNorm.";
    const std::string ln2 = pre_ln ? p + "ln." : p + "output.LayerNorm.";
    if (pre_ln) {
      a[4] = add(ln1 + "weight", Shape{C}, Init::One);
      a[5] = add(ln1 + "bias", Shape{C}, Init::Zero);
    }
    // One fused QKV projection instead of attention.self.query/key/value:
    // rows [0,C) are the query weight, [C,2C) the key, [2C,3C) the value
    // (torch.cat of the three [C,C] weights along dim 0; likewise the bias),
    // so both pack 3 layers of the reference model (ParamInfo::packed_layers).
    a[0] = add(p + "attention.qkv.weight", Shape{3 * C, C}, Init::Normal, 3);
    a[1] = add(p + "attention.qkv.bias", Shape{3 * C}, Init::Zero, 3);
    a[2] = add(p + "attention.output.dense.weight", Shape{C, C}, Init::Normal);
    a[3] = add(p + "attention.output.dense.bias", Shape{C}, Init::Zero);
    if (!pre_ln) {
      a[4] = add(ln1 + "weight", Shape{C}, Init::One);
      a[5] = add(ln1 + "bias", Shape{C}, Init::Zero);
    } else {
      a[10] = add(ln2 + "weight", Shape{C}, Init::One);
      a[11] = add(ln2 + "bias", Shape{C}, Init::Zero);
    }
    a[6] = add(p + "intermediate.dense.weight", Shape{F, C}, Init::Normal);
    a[7] = add(p + "intermediate.dense.bias", Shape{F}, Init::Zero);
    a[8] = add(p + "output.dense.weight", Shape{C, F}, Init::Normal);
    a[9] = add(p + "output.dense.bias", Shape{C}, Init::Zero);
    if (!pre_ln) {
      a[10] = add(ln2 + "weight", Shape{C}, Init::One);
      a[11] = add(ln2 + "bias", Shape{C}, Init::Zero);
    }
  }
  int ifln_g = -1, ifln_b = -1;
  if (pre_ln) {
    ifln_g = add("encoder.ln.weight", Shape{C}, Init::One);
    ifln_b = add("encoder.ln.bias", Shape{C}, Init::Zero);
  }
  const int it_w = add("cls.predictions.transform.dense.weight", Shape{C, C}, Init::Normal);
  const int it_b = add("cls.predictions.transform.dense.bias", Shape{C}, Init::Zero);
  const int it_g = add("cls.predictions.transform.LayerNorm.weight", Shape{C}, Init::One);
  const int it_beta = add("cls.predictions.transform.LayerNorm.bias", Shape{C}, Init::Zero);
  // The decoder weight is the word embedding (tied); only its bias is a
  // parameter of its own.
  const int idec_b = add("cls.predictions.bias", Shape{V}, Init::Zero);

  itok_ = itok, idec_b_ = idec_b;
  store.allocate();
  tok = store.ref(itok), pos = store.ref(ipos), seg = store.ref(iseg);
  if (!pre_ln) eln_g = store.ref(ieln_g), eln_b = store.ref(ieln_b);
  for (const auto& a : lp) {
    BertLayerParams P;
    P.qkv_w = store.ref(a[0]), P.qkv_b = store.ref(a[1]), P.o_w = store.ref(a[2]), P.o_b = store.ref(a[3]);
    P.ln1_g = store.ref(a[4]), P.ln1_b = store.ref(a[5]), P.f1_w = store.ref(a[6]), P.f1_b = store.ref(a[7]);
    P.f2_w = store.ref(a[8]), P.f2_b = store.ref(a[9]), P.ln2_g = store.ref(a[10]), P.ln2_b = store.ref(a[11]);
    layers.push_back(P);
  }
  if (pre_ln) fln_g = store.ref(ifln_g), fln_b = store.ref(ifln_b);
  t_w = store.ref(it_w), t_b = store.ref(it_b), t_g = store.ref(it_g), t_beta = store.ref(it_beta);
  dec_b = store.ref(idec_b);
}

void BertParams::init(uint64_t seed) {
  std::vector<float> host(static_cast<size_t>(store_->numel()));
  Rng rng(Rng::stream_seed(seed, 0xBE27));
  const std::vector<ParamInfo>& info = store_->info();
  for (size_t i = 0; i < info.size(); ++i) {
    const ParamInfo& pi = info[i];
    for (int64_t j = 0; j < pi.shape.numel(); ++j) {
      float v = 0.0f;
      if (init_[i] == Init::Normal) v = static_cast<float>(0.02 * rng.normal());
      else if (init_[i] == Init::One) v = 1.0f;
      host[static_cast<size_t>(pi.offset + j)] = v;
    }
  }
  // pad_vocab's words (the header says why).
  const int64_t tok_at = info[static_cast<size_t>(itok_)].offset, bias_at = info[static_cast<size_t>(idec_b_)].offset;
  for (int64_t w = vocab_; w < model_vocab_; ++w) {
    for (int64_t c = 0; c < hidden_; ++c) host[static_cast<size_t>(tok_at + w * hidden_ + c)] = 0.0f;
    host[static_cast<size_t>(bias_at + w)] = kPaddedLogit;
  }
  store_->upload(host);
}

BertActivations::BertActivations(Device& dev, const BertConfig& cfg, const PrecisionPolicy& pol, int64_t micro,
                                 int seg, bool attn_fused)
    : L_(cfg.layers), seg_(seg), T_(cfg.seq_len), C_(cfg.hidden), ckpt_(seg < cfg.layers) {
  auto act = [&](Shape shape, DType t = DType::F32) { return dev.alloc(shape, t, MemCategory::Activations); };
  auto act_c = [&](Shape shape) { return act(shape, pol.compute); };
  const int64_t B = micro, N = B * T_, C = C_, H = cfg.heads, D = C / H, F = cfg.ffn_dim(), V = cfg.model_vocab();
  const bool pre_ln = cfg.pre_ln;
  const Shape s_nc{N, C}, s_nf{N, F}, s_heads{B, H, T_, D}, s_scores{B, H, T_, T_}, s_rows{N};
  ids = act(Shape{B, T_}, DType::I32);
  mask = act(Shape{B, T_}, DType::I32);
  emb_sum = act_c(s_nc);
  if (!pre_ln) {
    emb_mean = act(s_rows);
    emb_rstd = act(s_rows);
  }
  if (!pre_ln || cfg.dropout > 0.0f) x0 = act_c(s_nc);  // pre-LN without dropout: x0 is emb_sum
  const int nsets = ckpt_ ? seg_ : L_;
  sets.resize(static_cast<size_t>(nsets));
  for (int i = 0; i < nsets; ++i) {
    BertLayerActs& A = sets[static_cast<size_t>(i)];
    if (pre_ln) A.hln = act_c(s_nc);
    A.mean1 = act(s_rows), A.rstd1 = act(s_rows), A.mean2 = act(s_rows), A.rstd2 = act(s_rows);
    if (attn_fused) {
      A.qkv = act_c(Shape{N, 3 * C});
      A.att = act_c(s_nc);
      A.lse = act(Shape{B, H, T_});
    } else {
      A.q = act_c(s_heads), A.k = act_c(s_heads), A.v = act_c(s_heads);
      A.probs = act_c(s_scores);
      A.a = act_c(s_nc);
    }
    A.r1 = act_c(s_nc), A.h1 = act_c(s_nc);
    A.f1pre = act_c(s_nf), A.f1 = act_c(s_nf);
    if (!pre_ln) A.r2 = act_c(s_nc);
    if (!ckpt_ || i < seg_ - 1) A.y = act_c(s_nc);  // a segment's last layer writes into a boundary
  }
  if (ckpt_) {
    const int S = (L_ + seg_ - 1) / seg_;
    bounds.resize(static_cast<size_t>(S) + 1);
    for (int s_i = 1; s_i <= S; ++s_i) bounds[static_cast<size_t>(s_i)] = act_c(s_nc);
  }
  if (pre_ln) {
    fin_out = act_c(s_nc);
    fin_mean = act(s_rows);
    fin_rstd = act(s_rows);
  }
  const int64_t M = bert_mlm_rows(cfg, micro);
  const Shape s_mc{M, C};
  if (cfg.mlm_head == MlmHead::Sparse) {
    pos = act(Shape{M}, DType::I32);
    pos_labels = act(Shape{M}, DType::I32);
    hs = act_c(s_mc);
  }
  t_pre = act_c(s_mc), t_act = act_c(s_mc), hm = act_c(s_mc);
  t_mean = act(Shape{M}), t_rstd = act(Shape{M});
  logits = act(Shape{M, V}, pol.output);
  dlogits = act_c(Shape{M, V});
  if (!cfg.fused) probs = act(Shape{M, V});
  // Scratch (one layer's temporaries, forward and backward).
  qkv = act_c(Shape{N, 3 * C});  // forward (unfused): the QKV projection; backward: dQKV
  proj = act_c(s_nc);              // dense outputs before dropout; their gradients after it
  if (cfg.dropout > 0.0f) projd = act_c(s_nc);
  if (!attn_fused) {
    scores = act_c(s_scores);  // raw scores, then the dropped-out probabilities; backward: dprobs
    att_s = act_c(s_heads);          // p.v before merging the heads
    dprobs = act_c(s_scores);
    datt = act_c(s_heads), dq = act_c(s_heads), dk = act_c(s_heads), dv = act_c(s_heads);
  }
  g = act_c(s_nc), s = act_c(s_nc), da = act_c(s_nc);
  df = act_c(s_nf);
}

Tensor BertActivations::embed_out(int64_t b) const { return nc(x0.empty() ? emb_sum.tensor() : x0.tensor(), b); }

Tensor BertActivations::layer_in(int l, int64_t b) {
  if (l == 0) return embed_out(b);
  if (ckpt_ && l % seg_ == 0) return nc(bounds[static_cast<size_t>(l / seg_)], b);
  return nc(set(l - 1).y, b);
}

Tensor BertActivations::layer_out(int l, int64_t b) {
  if (ckpt_ && segment_end(l)) return nc(bounds[static_cast<size_t>(l / seg_ + 1)], b);
  return nc(set(l).y, b);
}

int BertActivations::recompute_from(int l) const {
  const int nseg = (L_ + seg_ - 1) / seg_;
  if (ckpt_ && segment_end(l) && l / seg_ < nseg - 1) return (l / seg_) * seg_;
  return -1;
}

// ---- The memory estimate (models/bert.h) -------------------------------------
// Mirrors BertParams and BertActivations above, buffer for buffer: keep them
// together. In double, so that absurd configurations give huge numbers, not
// overflows (the int helpers ffn_dim() and model_vocab() are avoided).
MemoryEstimate estimate_bert_memory(const BertConfig& cfg, const PrecisionPolicy& pol, double micro) {
  const double L = cfg.layers, C = cfg.hidden, H = cfg.heads, T = cfg.seq_len, B = micro, N = B * T;
  const double F = cfg.ffn > 0 ? cfg.ffn : 4.0 * C;
  const double V = cfg.pad_vocab ? std::ceil(cfg.vocab / 8.0) * 8 : double(cfg.vocab);
  const bool pre_ln = cfg.pre_ln;

  // BertParams: embeddings (and post-LN's LayerNorm), L layers, pre-LN's final
  // LayerNorm, the MLM head and the decoder bias.
  const double per_layer = 3 * C * C + 3 * C + C * C + C + 2 * C + F * C + F + C * F + C + 2 * C;
  const double numel = V * C + T * C + 2 * C + (pre_ln ? 0 : 2 * C) + L * per_layer + (pre_ln ? 2 * C : 0) +
                       C * C + C + 2 * C + V;
  MemoryEstimate e = estimate_param_store(numel, pol);

  // BertActivations.
  const int seg = bert_checkpoint_segment(cfg);
  const bool ckpt = seg < cfg.layers;
  const bool attn_fused = cfg.fused && cfg.fused_attention;
  const double c = dtype_bytes(pol.compute), f32 = 4;
  const double nc = N * C * c, nf = N * F * c, heads = B * T * C * c /* [B,H,T,D] */, scores = B * H * T * T * c,
               rows = N * f32;
  double acts = 2 * B * T * 4;                               // ids, mask
  acts += nc;                                                // emb_sum
  if (!pre_ln) acts += 2 * rows;                             // emb_mean, emb_rstd
  if (!pre_ln || cfg.dropout > 0.0f) acts += nc;             // x0
  const double sets = ckpt ? seg : L;
  double set = (pre_ln ? nc : 0) + 4 * rows;                 // hln; mean/rstd 1 and 2
  set += attn_fused ? 3 * nc + nc + B * H * T * f32           // qkv, att, lse
                    : 3 * heads + scores + nc;                // q, k, v, probs, a
  set += 2 * nc + 2 * nf + (pre_ln ? 0 : nc);                // r1, h1; f1pre, f1; r2
  acts += sets * set;
  acts += (ckpt ? sets - 1 : sets) * nc;                     // y (a segment's last layer writes a boundary)
  if (ckpt) acts += std::ceil(L / seg) * nc;                 // bounds[1..S]
  if (pre_ln) acts += nc + 2 * rows;                         // fin_out, fin_mean, fin_rstd
  // The MLM head on M rows (bert_mlm_rows: N when dense).
  const double M = bert_mlm_rows_estimate(cfg, micro);
  if (cfg.mlm_head == MlmHead::Sparse) acts += 2 * M * 4 + M * C * c;  // pos, pos_labels; hs
  acts += 3 * M * C * c + 2 * M * f32;                       // t_pre, t_act, hm; t_mean, t_rstd
  acts += M * V * dtype_bytes(pol.output) + M * V * c;       // logits, dlogits
  if (!cfg.fused) acts += M * V * f32;                       // probs
  acts += N * 3 * C * c + nc;                                // qkv, proj
  if (cfg.dropout > 0.0f) acts += nc;                        // projd
  if (!attn_fused) acts += 2 * scores + 5 * heads;           // scores, dprobs, att_s; datt, dq, dk, dv
  acts += 3 * nc + nf;                                       // g, s, da; df
  e[MemCategory::Activations] += acts;

  // The largest matrix of a GEMM: the decoder's logits [M,V] and its weight
  // [V,C], the FFN's [N,F] and [F,C], QKV's [N,3C], attention's [B*H,T,T].
  const double largest = std::max({M * V, V * C, N * F, F * C, N * 3 * C, 3 * C * C, B * H * T * T});
  e[MemCategory::Workspace] =
      std::max(e[MemCategory::Workspace], gemm_conversion_workspace(pol, largest, std::max({V, F, 3 * C})));
  return e;
}

}  // namespace mpb
