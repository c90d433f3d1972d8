// BERT (Devlin et al. 2019) for masked-language-model pre-training, llm.c
// style: an explicit forward and backward over Device ops, parameters in one
// flat buffer (state_dict-like names, weights [out, in] as in PyTorch), every
// activation buffer allocated once for the micro-batch.
//
//   embeddings: word[ids] + position[t] + token_type[0], LayerNorm (post-LN),
//               dropout
//   N x encoder layer, post-LN (the original):
//       x -> QKV (one [3C, C] GEMM) -> masked self-attention -> output dense
//         -> dropout -> LayerNorm(x + .) = h
//         -> dense C->ffn, GELU -> dense ffn->C -> dropout -> LayerNorm(h + .)
//     or pre-LN (Xiong et al. 2020; Megatron-BERT's names):
//       x + dropout(attention(LN(x))) = r,  r + dropout(FFN(LN(r))),
//       and a final LayerNorm after the last layer
//   MLM head: dense C->C, GELU, LayerNorm, decoder tied to the word
//             embedding (logits = h . E^T + bias[V]); softmax cross-entropy,
//             labels < 0 ignored. Sparse (the default): the hidden states of
//             the masked positions are gathered first (Device::label_positions,
//             embedding_forward; up to bert_mlm_rows of them) and only they go
//             through the head; the backward pass scatters their gradient
//             back (embedding_backward). Dense: every position goes through.
//
// Precision follows the policy as in every model (weights in a ParamStore,
// models/param_store.h; linear layers through models/linear.h): GEMMs read a
// compute-dtype copy of the weights, activations are stored in the compute
// dtype, LayerNorm statistics and attention log-sum-exps in fp32, logits in
// the output dtype, gradients in the parameters' dtype.
//
// Gradient checkpointing (Chen et al. 2016) keeps only segment inputs and
// recomputes a segment's forward during the backward pass; the activation
// buffers are sized for what the policy keeps, so the allocated (and
// measured) activation memory really falls. See BertActivations in
// models/bert_layout.h for the exact layout.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/precision.h"
#include "models/memory_estimate.h"
#include "models/model.h"
#include "models/options.h"

namespace mpb {

struct BertConfig {
  int layers = 2;
  int hidden = 128;
  int heads = 2;
  int ffn = 0;  // intermediate size; 0: 4 * hidden
  int vocab = 30522;
  int seq_len = 128;  // also the number of position embeddings
  bool pre_ln = false;
  float dropout = 0.0f;  // hidden and attention-probability dropout (0: the ops are skipped)
  float ln_eps = 1e-12f;  // requested; the model uses layernorm_eps(compute dtype, ln_eps)
  bool fused = false;     // GEMM bias/GELU epilogues, fused attention, residual+LayerNorm, fused loss
  // With fused: attention through the fused op (true) or the unfused path,
  // batched GEMMs and the masked softmax (false). bert_config makes it false
  // on a CUDA device for fp32/TF32 compute: cuDNN's SDPA has no fp32 graph,
  // and tensor-core GEMMs beat the hand-written CUDA-core kernel there.
  bool fused_attention = true;
  CheckpointPolicy checkpointing = CheckpointPolicy::Off;
  int checkpoint_k = 2;    // layers per segment for every_k
  bool pad_vocab = false;  // round the vocabulary up to a multiple of 8 (extra rows are never input ids)
  MlmHead mlm_head = MlmHead::Sparse;
  // The data's masking probability (MlmOptions::mask_prob): the sparse head's
  // capacity (bert_mlm_rows) and its FLOPs follow from it.
  double mask_prob = 0.15;

  int ffn_dim() const { return ffn > 0 ? ffn : 4 * hidden; }
  int model_vocab() const { return pad_vocab ? (vocab + 7) / 8 * 8 : vocab; }
};

// bert-{tiny, mini, small, medium, base, large} (Turc et al. 2019's compact
// models and the original two): layers, hidden, heads, ffn = 4 * hidden,
// BERT's WordPiece vocabulary (30522) and seq_len 128. Throws
// std::invalid_argument for any other name.
BertConfig bert_preset(const std::string& size);

// A rule of the model that a config breaks: the BertConfig fields involved
// ("hidden", "heads", ...) and what is wrong.
struct BertProblem {
  std::vector<std::string> fields;
  std::string message;
};
// The first rule `cfg` breaks (hidden not divisible by heads, checkpoint_k < 1
// for every_k, ...), or nullopt when it can be built.
std::optional<BertProblem> check_bert(const BertConfig& cfg);
// Throws std::invalid_argument "bert: <message>" for check_bert's problem.
void validate_bert(const BertConfig& cfg);

// Layers per checkpoint segment: `layers` when checkpointing is off (one
// segment, nothing recomputed), 1 for every_layer, checkpoint_k for
// every_k, ceil(sqrt(layers)) for sqrt (about sqrt(L) segments of sqrt(L)).
int bert_checkpoint_segment(const BertConfig& cfg);

// Rows the MLM head decodes for a micro-batch of `micro` sequences. Dense:
// every position, micro * seq_len. Sparse: a fixed capacity for the masked
// positions, so that every step has the same GEMM shapes (no plan or
// primitive is made inside a timed step, and no host synchronisation reads a
// count): the smallest multiple of 8 (tensor-core friendly) at or above the
// count that a micro-batch exceeds with probability below 1e-12, by the
// Chernoff bound for mask_prob x micro x (seq_len - 2) maskable tokens
// ([CLS] and [SEP] never are; short sequences have fewer), at most micro *
// seq_len. A micro-batch beyond it anyway is an error
// (Device::label_positions), never a wrong loss. BERT-mini, micro 32: 800 of
// 4096 rows (the expected count is 605).
int64_t bert_mlm_rows(const BertConfig& cfg, int64_t micro);
// The same in double, for the memory estimate's absurd configurations.
double bert_mlm_rows_estimate(const BertConfig& cfg, double micro);

// GEMM FLOPs of one training sequence from the configuration alone (the
// model's train_flops_per_sample / recompute_flops_per_sample return these;
// runner --dry-run's cost estimate reads them without building a model).
// These and bert_mlm_rows are models/bert_cost.cpp.
double bert_train_flops_per_sample(const BertConfig& cfg);
double bert_recompute_flops_per_sample(const BertConfig& cfg);

// Performance advice, one line each: GEMM dimensions that are not multiples
// of 8 (tensor cores want multiples of 8 in fp16/bf16/tf32), settings that
// don't do what they suggest. micro_batch > 0 also checks micro_batch *
// seq_len, the row count of every token GEMM.
std::vector<std::string> bert_warnings(const BertConfig& cfg, int64_t micro_batch = 0);

// The model's input() is int32 token ids [micro_batch, seq_len], and
// input_mask() int32 [micro_batch, seq_len] (1 real token, 0 padding): a
// padded key gets no attention. train_micro's labels are int32
// [rows * seq_len], the original token at masked positions and < 0 elsewhere.
// Dropout is seeded by (seed, the number of train_micro calls so far, layer,
// site), so a run is reproducible; eval_micro runs without dropout.
std::unique_ptr<Model> make_bert(Device& dev, const BertConfig& cfg, const PrecisionPolicy& policy,
                                 int64_t micro_batch, uint64_t seed);

// What make_bert allocates (models/memory_estimate.h): the parameter store of
// BertParams, the activation buffers of BertActivations for the config's
// checkpointing, GEMM conversion workspace. For a config check_bert accepts.
MemoryEstimate estimate_bert_memory(const BertConfig& cfg, const PrecisionPolicy& policy, double micro_batch);

}  // namespace mpb
