// Masked-language-model data for BERT: token sequences with BERT's masking.
//
// Two corpora:
//  - synthetic: a seeded Markov chain over a Zipfian vocabulary. Tokens form
//    clusters of 8; each token has a few likely successors in its own
//    cluster (Zipf-weighted), and now and then (10%) the chain jumps to a
//    Zipf-distributed token anywhere. The chain (the task) comes from a
//    constant seed, like TeacherData's teacher, so every run and cell learns
//    the same language. A masked token is predictable from its neighbours
//    (their cluster, and its predecessor's successors), so the MLM loss falls
//    far below ln(V) (chance) and below the unigram entropy.
//  - text: a real UTF-8 file, split into training and held-out documents
//    (models/text_corpus.h), tokenized by a SentencePiece model trained on
//    the training documents (models/subword_tokenizer.h, cached by content
//    hash) or byte-level (256 byte tokens). Sequences are windows of the
//    training (held-out) documents' token stream at random offsets.
//
// Token ids: [PAD]=0, [CLS]=1, [SEP]=2, [MASK]=3, then the vocabulary (4 +
// token). A sequence is [CLS] t1 .. tn [SEP] [PAD].., T ids; n = T - 2,
// except for a short_fraction of sequences (default 10%) with n uniform in
// [1, T-3], so padding, and the attention mask, matter. HostBatch.mask is 1
// on [CLS]..[SEP] and 0 on padding.
//
// Masking (Devlin et al. 2019): each real non-special token is selected with
// probability mask_prob (0.15); a selected token's label is the original id
// and its input is [MASK] (80%), a uniformly random vocabulary token (10%) or
// unchanged (10%). Every other position's label is -1 (ignored by the loss).
//
// Deterministic: train_batch(step) depends on (seed, step) only (so
// micro-batches are row slices of the step's batch), eval samples on their
// index only (the held-out set is the same for every run seed).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "models/dataset.h"
#include "models/memory_estimate.h"

namespace mpb {

// How data.kind text turns text into tokens.
struct TextTokenizer {
  enum class Kind { SentencePiece, Bytes } kind = Kind::SentencePiece;
  int pieces = 8188;        // SentencePiece: the model's pieces (data.vocab less the 4 specials)
  std::string cache_dir;    // SentencePiece: where models are cached (tokenizer_cache_dir())
};

// What a text corpus's SentencePiece tokenizer was: an output of preparing
// the data (like a library's version), recorded in results beside the cell's
// configuration and outside its config_hash. Hashes are 16 hex digits.
struct TokenizerFacts {
  std::string kind = "sentencepiece";
  std::string model_hash;   // FNV-1a of the trained model's bytes
  std::string corpus_hash;  // FNV-1a of the corpus file's bytes
  std::string cache_key;    // SubwordTokenizer::cache_key: options + training documents
  int pieces = 0;           // the model's pieces
  int vocab = 0;            // pieces + MlmData::kSpecials (BERT's embedding rows before padding)
};

// The best loss a model that ignores the context can reach on the held-out
// masked tokens: the held-out token stream's own unigram distribution (its
// entropy's cross-entropy form), scored on exactly the labels the trainer
// evaluates. No model trained on the training part does better without
// using the context, so a held-out loss below it shows the model learned
// more than token frequencies (issue 31's sanity bar).
struct ContextFreeLoss {
  double loss = 0.0;   // nats per label
  int64_t labels = 0;  // the masked tokens it averages over
};

struct MlmOptions {
  int seq_len = 128;
  double mask_prob = 0.15;
  double short_fraction = 0.1;  // sequences shorter than seq_len - 2 real tokens (padded)
};

class MlmData final : public Dataset {
 public:
  static constexpr int32_t kPad = 0, kCls = 1, kSep = 2, kMask = 3, kSpecials = 4;

  // The Markov-chain corpus over `tokens` vocabulary entries (vocab_size() = tokens + 4).
  static MlmData synthetic(uint64_t seed, int tokens, const MlmOptions& options = {});
  // The UTF-8 file at `path`, tokenized by `tokenizer` (vocab_size() = pieces
  // + 4, or 260 byte-level). Throws std::runtime_error naming the path when it
  // can't be read, is empty, not UTF-8, or either part is shorter than one
  // sequence's content in tokens, or when the tokenizer can't be trained.
  static MlmData from_text(const std::string& path, uint64_t seed, const MlmOptions& options = {},
                           const TextTokenizer& tokenizer = {TextTokenizer::Kind::Bytes, 0, ""});
  // The bytes a text file needs for seq_len: a training and a held-out part of
  // at least one sequence's content (seq_len - 2) each.
  static int64_t min_text_bytes(int seq_len);
  // The largest text file from_text takes: the corpus is held in memory whole
  // (the text, then at most one 4-byte id per byte), so the cap bounds the
  // runner's host memory. 256 MiB holds enwik8 (100 MB), the largest common
  // byte-level corpus, 2.5 times over, and is an eighth of a 2 GiB job slot;
  // a step's speed does not depend on how large the corpus it samples is.
  static constexpr int64_t kMaxTextBytes = int64_t{256} << 20;
  // Why from_text would refuse `path` for seq_len (missing, a symlink loop,
  // not a regular file, unreadable, empty, too short, over kMaxTextBytes,
  // not UTF-8: the only check that reads the file); nullopt: fine.
  static std::optional<std::string> text_file_problem(const std::string& path, int seq_len);

  // Host memory of a corpus and its batches: the Markov chain's tables
  // (`tokens` entries) or the text (`text_bytes`), one training batch of
  // `batch` sequences and one evaluation chunk of `micro`.
  static MemoryEstimate estimate_memory(int tokens, double text_bytes, int seq_len, double batch, double micro);

  HostBatch train_batch(int64_t step, int64_t size) const override;
  HostBatch eval_batch(int64_t offset, int64_t size) const override;
  int row_width() const override { return opt_.seq_len; }
  int labels_per_sample() const override { return opt_.seq_len; }
  int vocab_size() const { return kSpecials + tokens_; }  // BertConfig.vocab
  const std::string& describe() const { return desc_; }
  // data.kind text with SentencePiece: the tokenizer's cache key (16 hex digits); else "".
  const std::string& tokenizer_hash() const { return tokenizer_.cache_key; }
  // data.kind text with SentencePiece: the tokenizer's facts; else nullopt.
  std::optional<TokenizerFacts> tokenizer() const {
    return tokenizer_.model_hash.empty() ? std::nullopt : std::optional<TokenizerFacts>(tokenizer_);
  }
  // Text corpora: ContextFreeLoss over the labels of eval samples
  // [0, eval_samples) (what the trainer evaluates); nullopt for the Markov
  // corpus (its held-out set is not a token stream) or when they hold no label.
  std::optional<ContextFreeLoss> context_free_loss(int64_t eval_samples) const;

 private:
  MlmData(uint64_t seed, int tokens, const MlmOptions& options);
  // One sample from its own stream, appended to b.
  void append_sample(HostBatch& b, uint64_t stream, bool eval) const;
  // n content tokens (ids >= kSpecials) into out.
  void content(int n, Rng& rng, bool eval, std::vector<int32_t>& out) const;
  int zipf(double u) const;

  uint64_t seed_;
  int tokens_;
  MlmOptions opt_;
  std::string desc_;
  // synthetic
  std::vector<double> zipf_cdf_;          // [tokens]
  std::vector<int32_t> succ_;             // [tokens, kSuccessors] likely successors
  // text: content ids (kSpecials + token) of the training and held-out documents, each part concatenated
  std::vector<int32_t> train_ids_, eval_ids_;
  TokenizerFacts tokenizer_;  // model_hash empty: no SentencePiece tokenizer
};

}  // namespace mpb
