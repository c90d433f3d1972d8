// Where BERT's tensors live (models/bert.cpp does the math): the parameter
// table with Hugging Face's names over a ParamStore, and the activation
// buffers of one micro-batch, laid out for what the checkpointing policy
// keeps. Internal to the BERT model.
#pragma once

#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/precision.h"
#include "models/bert.h"
#include "models/param_store.h"

namespace mpb {

// The first s.numel() elements of a buffer as shape s (a buffer the config
// doesn't need stays empty, and so does its view).
inline Tensor first_view(const Tensor& t, Shape s) {
  return t.empty() ? Tensor{} : t.flat_slice(0, s.numel()).reshaped(s);
}

struct BertLayerParams {
  // ln1 is the first LayerNorm of the layer (post-LN: after attention;
  // pre-LN: before it), ln2 the second.
  ParamRef qkv_w, qkv_b, o_w, o_b, ln1_g, ln1_b, f1_w, f1_b, f2_w, f2_b, ln2_g, ln2_b;
};

// The parameter table, in Hugging Face's BertForMaskedLM order and names
// (pre-LN: MegatronBertForMaskedLM's), weights [out, in]. Constructing it
// adds every tensor to the store and allocates the store; views of tensors
// the config doesn't have (post-LN's final LayerNorm, ...) stay empty.
class BertParams {
 public:
  BertParams(ParamStore& store, const BertConfig& cfg);
  // BERT's initializer, uploaded: weights and embeddings N(0, 0.02)
  // (initializer_range), biases 0, LayerNorm gamma 1 and beta 0. pad_vocab's
  // extra words are masked out of the softmax by their parameters: their
  // embedding rows are 0 and their decoder bias kPaddedLogit, so their logit
  // is kPaddedLogit exactly, exp(kPaddedLogit - max) is exactly 0 in fp32,
  // the loss and every other gradient are the unpadded model's, and their
  // own gradients are exactly 0 (AdamW and SGD then leave them alone, up to
  // weight decay shrinking the bias by lr x decay per step).
  void init(uint64_t seed);
  // Finite in fp16 and bf16 (the logits' dtype may be either).
  static constexpr float kPaddedLogit = -1e4f;

  ParamRef tok, pos, seg;               // word, position, token-type embeddings
  ParamRef eln_g, eln_b;                // post-LN: the embedding LayerNorm
  std::vector<BertLayerParams> layers;  //
  ParamRef fln_g, fln_b;                // pre-LN: the final LayerNorm
  ParamRef t_w, t_b, t_g, t_beta;       // MLM head transform: dense, LayerNorm
  ParamRef dec_b;                       // the tied decoder's own bias [V]

 private:
  enum class Init { Normal, Zero, One };
  int add(const std::string& name, Shape shape, Init init, int packed_layers = 1);

  ParamStore* store_;
  std::vector<Init> init_;
  int64_t vocab_ = 0, model_vocab_ = 0, hidden_ = 0;  // pad_vocab's words: [vocab_, model_vocab_)
  int itok_ = -1, idec_b_ = -1;
};

// What one layer's backward pass reads, as the forward pass leaves it.
struct BertLayerActs {
  DeviceBuffer hln;                         // pre-LN: LN1(x) [N,C], the attention input
  DeviceBuffer mean1, rstd1, mean2, rstd2;  // [N] fp32, statistics of LN1 / LN2
  DeviceBuffer q, k, v;                     // unfused attention: [B,H,T,D]
  DeviceBuffer probs;                       // unfused attention: softmax [B,H,T,T] (before dropout)
  DeviceBuffer a;                           // unfused attention: merged heads [N,C]
  DeviceBuffer qkv;                         // fused attention: the QKV projection [N,3C] ([B,T,3,H,D])
  DeviceBuffer att, lse;                    // fused attention: merged output [N,C], log-sum-exp [B,H,T] fp32
  DeviceBuffer r1;                          // first residual sum [N,C]
  DeviceBuffer h1;                          // the FFN input [N,C] (post-LN: LN1(r1); pre-LN: LN2(r1))
  DeviceBuffer f1pre, f1;                   // [N,F] before and after GELU
  DeviceBuffer r2;                          // post-LN: second residual sum [N,C]
  DeviceBuffer y;                           // the layer output [N,C] (absent where a checkpoint receives it)
};

// The activation buffers, allocated once for the micro-batch (N = B*T rows).
// Kept for the whole step: the inputs, the embedding block's activations,
// the MLM head's, and per layer a BertLayerActs set. Without checkpointing
// there are L sets. With checkpointing (segments of `seg` layers) there are
// `seg` sets, reused by every segment, plus one [N,C] boundary per segment
// (bounds[s] is the input of segment s, bounds[S] the encoder output;
// segment 0's input is the embedding output): the forward pass runs each
// segment through the sets, keeping only its output; the backward pass
// recomputes segment s's forward from bounds[s] (the last segment's
// activations are still in the sets) and then backpropagates through it.
// Scratch shared by all layers: one layer's worth of temporaries.
class BertActivations {
 public:
  // seg: layers per checkpoint segment (bert_checkpoint_segment; >= layers:
  // no checkpointing); attn_fused: the fused attention op runs.
  BertActivations(Device& dev, const BertConfig& cfg, const PrecisionPolicy& pol, int64_t micro, int seg,
                  bool attn_fused);

  BertLayerActs& set(int l) { return sets[static_cast<size_t>(ckpt_ ? l % seg_ : l)]; }
  // The embedding output, layer l's input and output, the encoder output:
  // views of the first b sequences, [b*T, C].
  Tensor embed_out(int64_t b) const;
  Tensor layer_in(int l, int64_t b);
  Tensor layer_out(int l, int64_t b);
  Tensor encoder_out(int64_t b) { return layer_out(L_ - 1, b); }
  // Entering layer l in the backward pass: the first layer of the segment
  // whose forward must be recomputed now (l is that segment's last layer),
  // or -1 (the activations of l are still in the sets).
  int recompute_from(int l) const;

  DeviceBuffer ids, mask;                      // inputs, int32 [B,T]
  DeviceBuffer emb_sum, emb_mean, emb_rstd, x0;  // embedding sum, its LayerNorm statistics, the block's output
  std::vector<BertLayerActs> sets;
  std::vector<DeviceBuffer> bounds;
  DeviceBuffer fin_out, fin_mean, fin_rstd;               // pre-LN: the final LayerNorm
  // The MLM head, on M = bert_mlm_rows rows (N when dense).
  DeviceBuffer pos, pos_labels;                           // sparse: gathered positions, their labels, int32 [M]
  DeviceBuffer hs;                                        // sparse: the gathered head input [M,C]
  DeviceBuffer t_pre, t_act, hm, t_mean, t_rstd;          // MLM head transform [M,C], statistics [M]
  DeviceBuffer logits, dlogits, probs;                    // [M,V]
  DeviceBuffer qkv, proj, projd, scores, att_s, dprobs;  // forward scratch (some reused backward)
  DeviceBuffer g, s, da, df, datt, dq, dk, dv;            // backward scratch

 private:
  bool segment_end(int l) const { return (l + 1) % seg_ == 0 || l == L_ - 1; }
  Tensor nc(const Tensor& t, int64_t b) const { return first_view(t, Shape{b * T_, C_}); }

  int L_, seg_;
  int64_t T_, C_;
  bool ckpt_;
};

}  // namespace mpb
