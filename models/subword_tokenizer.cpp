#include "models/subword_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "models/text_corpus.h"

namespace mpb {

namespace {

// Trainer settings, part of the cache key. One thread: the unigram trainer's
// expected counts are summed per thread, so the model (and its hash's
// meaning) would depend on the thread count; a few seconds per corpus, once.
// All sentences are used, unshuffled (no sampling, so no seed). Lines over
// max_sentence_length bytes are left out of training (they still encode).
const std::unordered_map<std::string, std::string>& trainer_settings() {
  static const std::unordered_map<std::string, std::string> s = {
      {"model_type", "unigram"},    {"character_coverage", "0.9995"}, {"num_threads", "1"},
      {"input_sentence_size", "0"}, {"shuffle_input_sentence", "false"}, {"max_sentence_length", "8192"},
      {"unk_id", "0"},              {"bos_id", "-1"},                   {"eos_id", "-1"},
      {"pad_id", "-1"},             {"hard_vocab_limit", "true"},
  };
  return s;
}

// Feeds the documents' non-blank lines to the trainer.
class LineIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string>& docs) : docs_(docs) { advance(); }
  bool done() const override { return doc_ >= docs_.size(); }
  void Next() override { advance(); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void advance() {
    while (doc_ < docs_.size()) {
      const std::string& d = docs_[doc_];
      if (pos_ >= d.size()) {
        ++doc_, pos_ = 0;
        continue;
      }
      size_t end = d.find('\n', pos_);
      if (end == std::string::npos) end = d.size();
      line_ = d.substr(pos_, end - pos_);
      pos_ = end + 1;
      if (line_.find_first_not_of(" \t\r") != std::string::npos) return;
    }
  }
  const std::vector<std::string>& docs_;
  size_t doc_ = 0, pos_ = 0;
  std::string line_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::string tokenizer_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/mpbench/tokenizers";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/mpbench/tokenizers";
  throw std::runtime_error("tokenizer cache: neither XDG_CACHE_HOME nor HOME is set");
}

std::string SubwordTokenizer::cache_key(const std::vector<std::string>& documents, int pieces) {
  std::ostringstream options;
  options << "mpbench-sentencepiece-v1 pieces=" << pieces;
  // Sorted, so the key does not depend on the map's order.
  std::vector<std::string> settings;
  for (const auto& [k, v] : trainer_settings()) settings.push_back(k + "=" + v);
  std::sort(settings.begin(), settings.end());
  for (const auto& s : settings) options << ' ' << s;
  uint64_t h = fnv1a64(options.str());
  for (const std::string& d : documents) {
    h = fnv1a64(std::to_string(d.size()) + ":", h);
    h = fnv1a64(d, h);
  }
  return hex64(h);
}

SubwordTokenizer::SubwordTokenizer() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SubwordTokenizer::SubwordTokenizer(SubwordTokenizer&&) noexcept = default;
SubwordTokenizer& SubwordTokenizer::operator=(SubwordTokenizer&&) noexcept = default;
SubwordTokenizer::~SubwordTokenizer() = default;

SubwordTokenizer SubwordTokenizer::train_or_load(const std::vector<std::string>& documents, int pieces,
                                                 const std::string& cache_dir) {
  if (pieces < 2) throw std::runtime_error("SentencePiece needs at least 2 pieces (got " + std::to_string(pieces) + ")");
  SubwordTokenizer t;
  t.hash_ = cache_key(documents, pieces);
  t.path_ = cache_dir + "/sp-" + t.hash_ + ".model";
  std::string proto = read_file(t.path_);
  t.from_cache_ = !proto.empty();
  if (proto.empty()) {
    auto args = trainer_settings();
    args["vocab_size"] = std::to_string(pieces);
    args["minloglevel"] = "2";  // the trainer's progress lines: errors only
    LineIterator lines(documents);
    const auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines, &proto);
    if (!status.ok()) throw std::runtime_error("SentencePiece training failed: " + status.ToString());
    std::error_code ec;
    std::filesystem::create_directories(cache_dir, ec);
    if (ec) throw std::runtime_error("tokenizer cache: cannot create '" + cache_dir + "': " + ec.message());
    // Write-then-rename: a concurrent runner sees the whole model or none.
    const std::string tmp = t.path_ + ".tmp." + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::binary);
      out << proto;
      out.close();
      if (!out) throw std::runtime_error("tokenizer cache: cannot write '" + tmp + "'");
    }
    std::filesystem::rename(tmp, t.path_, ec);
    if (ec) throw std::runtime_error("tokenizer cache: cannot rename '" + tmp + "' to '" + t.path_ + "': " + ec.message());
  }
  t.model_hash_ = hex64(fnv1a64(proto));
  const auto status = t.sp_->LoadFromSerializedProto(proto);
  if (!status.ok()) throw std::runtime_error("tokenizer '" + t.path_ + "' does not load: " + status.ToString());
  if (t.sp_->GetPieceSize() != pieces) {
    throw std::runtime_error("tokenizer '" + t.path_ + "' has " + std::to_string(t.sp_->GetPieceSize()) +
                             " pieces, not " + std::to_string(pieces) + ": delete it to retrain");
  }
  return t;
}

std::vector<int32_t> SubwordTokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) throw std::runtime_error("SentencePiece encoding failed: " + status.ToString());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

int SubwordTokenizer::pieces() const { return sp_->GetPieceSize(); }

}  // namespace mpb
