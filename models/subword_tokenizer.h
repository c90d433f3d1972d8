// A SentencePiece subword tokenizer (Debian's libsentencepiece), trained on a
// corpus's training documents when MLM data is prepared, and cached by
// content hash so that every repeat and cell reads the same model.
//
// The cache key is a hash of the tokenizer's options (model type, pieces,
// the trainer settings below) and of every training document's bytes,
// length-prefixed: the same corpus and options reuse the cached model; a
// changed byte or option trains a new one. The model lives in
// tokenizer_cache_dir()/sp-<hash>.model, written to a temporary file and
// renamed, so a concurrent runner never reads half a model.
//
// Piece ids: 0 is <unk> (a character outside the model's coverage); no BOS,
// EOS or PAD pieces, as [CLS]/[SEP]/[PAD]/[MASK] are MlmData's own ids.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace mpb {

// $XDG_CACHE_HOME/mpbench/tokenizers, or $HOME/.cache/mpbench/tokenizers
// (the XDG base-directory default); throws std::runtime_error when neither
// variable is set.
std::string tokenizer_cache_dir();

class SubwordTokenizer {
 public:
  // The cached model for (documents, pieces), trained and cached first if
  // there is none. Throws std::runtime_error naming the reason (SentencePiece's
  // own message, e.g. too many pieces for the corpus, or an unwritable cache).
  static SubwordTokenizer train_or_load(const std::vector<std::string>& documents, int pieces,
                                        const std::string& cache_dir);
  // The key train_or_load uses, without training: 16 hex digits.
  static std::string cache_key(const std::vector<std::string>& documents, int pieces);

  SubwordTokenizer(SubwordTokenizer&&) noexcept;
  SubwordTokenizer& operator=(SubwordTokenizer&&) noexcept;
  ~SubwordTokenizer();

  std::vector<int32_t> encode(const std::string& text) const;  // piece ids in [0, pieces())
  int pieces() const;
  const std::string& hash() const { return hash_; }  // the cache key
  // FNV-1a of the trained model's serialized bytes (16 hex digits): what a
  // result records, so two results can be told to share one tokenizer.
  const std::string& model_hash() const { return model_hash_; }
  const std::string& model_path() const { return path_; }
  bool from_cache() const { return from_cache_; }  // false: trained by this call

 private:
  SubwordTokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string hash_, model_hash_, path_;
  bool from_cache_ = false;
};

}  // namespace mpb
