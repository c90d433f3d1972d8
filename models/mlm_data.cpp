#include "models/mlm_data.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "models/subword_tokenizer.h"
#include "models/text_corpus.h"

namespace mpb {

namespace {
constexpr uint64_t kCorpusStream = 1, kTrainStream = 2, kEvalStream = 3;
constexpr uint64_t kCorpusSeed = 0xC0B905ull, kEvalSeed = 0xE7A1ull;  // the task and the held-out set: fixed
// The Markov chain. Tokens are split into clusters of kClusterSize (token i
// is in cluster i % clusters, so every cluster holds frequent and rare
// tokens). A token's next token is, with probability kJump, any token drawn
// from the global Zipf distribution (which moves to its cluster), and
// otherwise one of its kSuccessors likely successors, drawn from its own
// cluster with Zipf weights, with probabilities kSuccessorP. So a sequence
// stays in a cluster for ~1/kJump tokens: a masked token is predictable from
// the bag of its neighbours (the cluster; what attention averages at
// initialisation already) and better from its predecessor (the successor).
constexpr int kClusterSize = 8;
constexpr int kSuccessors = 3;
constexpr double kSuccessorP[kSuccessors] = {0.7, 0.2, 0.1};
constexpr double kJump = 0.05;
constexpr double kZipfExponent = 1.0;
}  // namespace

MlmData::MlmData(uint64_t seed, int tokens, const MlmOptions& options) : seed_(seed), tokens_(tokens), opt_(options) {
  if (opt_.seq_len < 3) throw std::invalid_argument("MlmData: seq_len must be >= 3 ([CLS], a token, [SEP])");
  if (!(opt_.mask_prob > 0.0 && opt_.mask_prob <= 1.0)) throw std::invalid_argument("MlmData: mask_prob must be in (0, 1]");
  if (!(opt_.short_fraction >= 0.0 && opt_.short_fraction <= 1.0))
    throw std::invalid_argument("MlmData: short_fraction must be in [0, 1]");
  if (tokens_ < 1) throw std::invalid_argument("MlmData: the vocabulary needs at least one token");
}

MlmData MlmData::synthetic(uint64_t seed, int tokens, const MlmOptions& options) {
  MlmData d(seed, tokens, options);
  d.zipf_cdf_.resize(static_cast<size_t>(tokens));
  double total = 0.0;
  for (int i = 0; i < tokens; ++i) total += 1.0 / std::pow(double(i + 1), kZipfExponent);
  double acc = 0.0;
  for (int i = 0; i < tokens; ++i) {
    acc += 1.0 / std::pow(double(i + 1), kZipfExponent) / total;
    d.zipf_cdf_[static_cast<size_t>(i)] = acc;
  }
  d.zipf_cdf_.back() = 1.0;
  Rng rng(Rng::stream_seed(kCorpusSeed, kCorpusStream));
  const int clusters = std::max(1, tokens / kClusterSize);
  d.succ_.resize(static_cast<size_t>(tokens) * kSuccessors);
  for (int t = 0; t < tokens; ++t) {
    // The members of t's cluster, by global rank, with Zipf weights.
    std::vector<int> members;
    std::vector<double> cdf;
    double sum = 0.0;
    for (int m = t % clusters; m < tokens; m += clusters) {
      members.push_back(m);
      cdf.push_back(sum += 1.0 / std::pow(double(members.size()), kZipfExponent));
    }
    for (int j = 0; j < kSuccessors; ++j) {
      const double u = rng.uniform() * sum;
      const size_t at = static_cast<size_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
      d.succ_[static_cast<size_t>(t) * kSuccessors + static_cast<size_t>(j)] = members[std::min(at, members.size() - 1)];
    }
  }
  d.desc_ = "synthetic Markov-chain MLM, " + std::to_string(tokens) + " tokens + 4 specials, T " +
            std::to_string(options.seq_len);
  return d;
}

int64_t MlmData::min_text_bytes(int seq_len) { return 2 * (int64_t{seq_len} - 2); }

namespace {
std::string too_short(const std::string& path, int64_t size, int seq_len) {
  return "'" + path + "' has " + std::to_string(size) + " bytes; seq_len " + std::to_string(seq_len) +
         " needs at least " + std::to_string(MlmData::min_text_bytes(seq_len));
}

// A corpus's token ids for one tokenizer. Encoding is most of a text cell's
// set-up (0.46 s of 0.48 s for the shipped 4 MB corpus, measured), and every
// repeat of every cell builds its dataset afresh: the last kKept encodings
// stay for the process, keyed by the text's hash, the tokenizer's cache key
// and the split's tail length (the split follows from the text and it). Each
// holds at most one 4-byte id per corpus byte, beside the cell's own copy
// (which estimate_memory counts).
struct EncodedCorpus {
  std::vector<int32_t> train, held_out;
};

template <typename Encode>
std::shared_ptr<const EncodedCorpus> encoded_corpus(const std::string& key, Encode encode) {
  constexpr size_t kKept = 4;
  static std::mutex mu;
  static std::deque<std::pair<std::string, std::shared_ptr<const EncodedCorpus>>> recent;  // oldest first
  const std::lock_guard<std::mutex> lock(mu);
  for (const auto& [k, e] : recent)
    if (k == key) return e;
  auto made = std::make_shared<const EncodedCorpus>(encode());
  recent.emplace_back(key, made);
  if (recent.size() > kKept) recent.pop_front();
  return made;
}

std::string too_large(const std::string& path, int64_t size) {
  return "'" + path + "' has " + std::to_string(size) + " bytes (" + std::to_string(size >> 20) +
         " MiB), over the " + std::to_string(MlmData::kMaxTextBytes >> 20) +
         " MiB cap on a text corpus, which is held in memory whole (docs/CONFIG.md): use a prefix of it";
}
}  // namespace

std::optional<std::string> MlmData::text_file_problem(const std::string& path, int seq_len) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  // status() reports a loop as an error, not as "not found": name it.
  if (ec && ec.value() == ELOOP) return "'" + path + "' is a symlink loop (ELOOP: too many levels of symbolic links)";
  if (ec && ec != std::errc::no_such_file_or_directory) return "cannot reach '" + path + "': " + ec.message();
  if (!std::filesystem::exists(status)) return "'" + path + "' does not exist";
  if (!std::filesystem::is_regular_file(status)) return "'" + path + "' is not a regular file";
  if (!std::ifstream(path, std::ios::binary)) return "cannot read '" + path + "'";
  const auto size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec) return "cannot read the size of '" + path + "'";
  if (size == 0) return "'" + path + "' is empty";
  if (size < min_text_bytes(seq_len)) return too_short(path, size, seq_len);
  if (size > kMaxTextBytes) return too_large(path, size);
  // The one check that reads the file (up to the cap): a binary file would
  // otherwise fail only when its cell's data is built, mid-run.
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<size_t>(size), '\0');
  if (!in.read(text.data(), size)) return "cannot read '" + path + "'";
  if (const auto bad = utf8_problem(text)) return "'" + path + "' " + *bad;
  return std::nullopt;
}

MlmData MlmData::from_text(const std::string& path, uint64_t seed, const MlmOptions& options,
                           const TextTokenizer& tokenizer) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("MlmData: cannot read '" + path + "'");
  // The cap before the read: a 5 GB file would otherwise end in bad_alloc.
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (!ec && bytes > uint64_t(kMaxTextBytes)) throw std::runtime_error("MlmData: " + too_large(path, int64_t(bytes)));
  const bool subwords = tokenizer.kind == TextTokenizer::Kind::SentencePiece;
  MlmData d(seed, subwords ? tokenizer.pieces : 256, options);
  std::string text(ec ? 0 : static_cast<size_t>(bytes), '\0');
  if (!ec && !in.read(text.data(), static_cast<std::streamsize>(text.size())))
    throw std::runtime_error("MlmData: cannot read '" + path + "'");
  const int64_t size = static_cast<int64_t>(text.size());
  if (size == 0) throw std::runtime_error("MlmData: '" + path + "' is empty");
  if (size < min_text_bytes(options.seq_len)) throw std::runtime_error("MlmData: " + too_short(path, size, options.seq_len));
  if (const auto bad = utf8_problem(text)) throw std::runtime_error("MlmData: '" + path + "' " + *bad);
  const int span = options.seq_len - 2;  // the longest content, in tokens
  TextSplit split;
  try {
    split = split_documents(text, static_cast<size_t>(span));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("MlmData: '" + path + "': " + e.what());
  }
  std::string tokens_desc;
  if (subwords) {
    SubwordTokenizer tok = [&] {
      try {
        return SubwordTokenizer::train_or_load(split.train, tokenizer.pieces, tokenizer.cache_dir);
      } catch (const std::runtime_error& e) {
        throw std::runtime_error("MlmData: tokenizer for '" + path + "' (" + std::to_string(tokenizer.pieces) +
                                 " pieces: data.vocab less 4 specials): " + e.what());
      }
    }();
    const std::string corpus_hash = hex64(fnv1a64(text));
    const auto encoded = encoded_corpus(corpus_hash + "/" + tok.hash() + "/" + std::to_string(span), [&] {
      EncodedCorpus e;
      auto encode = [&](const std::vector<std::string>& docs, std::vector<int32_t>& out) {
        for (const std::string& doc : docs)
          for (const int32_t id : tok.encode(doc)) out.push_back(kSpecials + id);
      };
      encode(split.train, e.train);
      encode(split.held_out, e.held_out);
      return e;
    });
    d.train_ids_ = encoded->train;
    d.eval_ids_ = encoded->held_out;
    d.tokenizer_.model_hash = tok.model_hash();
    d.tokenizer_.corpus_hash = corpus_hash;
    d.tokenizer_.cache_key = tok.hash();
    d.tokenizer_.pieces = tok.pieces();
    d.tokenizer_.vocab = tok.pieces() + kSpecials;
    tokens_desc = "SentencePiece unigram, " + std::to_string(tokenizer.pieces) + " pieces + 4 specials, model " +
                  tok.model_path() + (tok.from_cache() ? " (cached)" : " (trained)");
  } else {
    // Bytes; documents joined by a newline, as they stood in a file.
    auto bytes_of = [&](const std::vector<std::string>& docs, std::vector<int32_t>& out) {
      for (size_t i = 0; i < docs.size(); ++i) {
        if (i > 0) out.push_back(kSpecials + '\n');
        for (const char c : docs[i]) out.push_back(kSpecials + static_cast<uint8_t>(c));
      }
    };
    bytes_of(split.train, d.train_ids_);
    bytes_of(split.held_out, d.eval_ids_);
    tokens_desc = "byte-level";
  }
  for (const auto* part : {&d.train_ids_, &d.eval_ids_}) {
    if (static_cast<int64_t>(part->size()) < span) {
      throw std::runtime_error("MlmData: '" + path + "': the " + (part == &d.train_ids_ ? "training" : "held-out") +
                               " documents give " + std::to_string(part->size()) + " tokens; seq_len " +
                               std::to_string(options.seq_len) + " needs at least " + std::to_string(span));
    }
  }
  const std::string split_desc =
      split.by_document ? std::to_string(split.held_out.size()) + " of " + std::to_string(split.documents) +
                              " documents held out"
                        : "one document, its last tenth held out";
  d.desc_ = "MLM on " + path + " (" + std::to_string(size) + " bytes; " + tokens_desc + "; " +
            std::to_string(d.train_ids_.size()) + " training and " + std::to_string(d.eval_ids_.size()) +
            " held-out tokens; " + split_desc + "), T " + std::to_string(options.seq_len);
  return d;
}

int MlmData::zipf(double u) const {
  auto it = std::upper_bound(zipf_cdf_.begin(), zipf_cdf_.end(), u);
  return static_cast<int>(std::min<std::ptrdiff_t>(it - zipf_cdf_.begin(), tokens_ - 1));
}

void MlmData::content(int n, Rng& rng, bool eval, std::vector<int32_t>& out) const {
  out.clear();
  if (!train_ids_.empty()) {
    const std::vector<int32_t>& ids = eval ? eval_ids_ : train_ids_;
    const uint64_t starts = ids.size() - static_cast<size_t>(n) + 1;  // from_text: size >= the longest n
    const size_t start = static_cast<size_t>(rng.below(starts));
    out.assign(ids.begin() + static_cast<std::ptrdiff_t>(start), ids.begin() + static_cast<std::ptrdiff_t>(start) + n);
    return;
  }
  int t = zipf(rng.uniform());
  for (int i = 0; i < n; ++i) {
    out.push_back(kSpecials + t);
    if (rng.uniform() < kJump) {
      t = zipf(rng.uniform());
    } else {
      double u = rng.uniform();
      int j = 0;
      while (j < kSuccessors - 1 && u >= kSuccessorP[j]) u -= kSuccessorP[j++];
      t = succ_[static_cast<size_t>(t) * kSuccessors + static_cast<size_t>(j)];
    }
  }
}

void MlmData::append_sample(HostBatch& b, uint64_t stream, bool eval) const {
  Rng rng(stream);
  const int T = opt_.seq_len;
  const int max_n = T - 2;
  int n = max_n;
  if (rng.uniform() < opt_.short_fraction && max_n >= 2) n = 1 + static_cast<int>(rng.below(static_cast<uint64_t>(max_n - 1)));
  std::vector<int32_t> tokens;
  content(n, rng, eval, tokens);
  const size_t base = b.ids.size();
  b.ids.resize(base + static_cast<size_t>(T), kPad);
  b.mask.resize(base + static_cast<size_t>(T), 0);
  b.y.resize(base + static_cast<size_t>(T), -1);
  b.ids[base] = kCls;
  for (int i = 0; i < n; ++i) {
    const size_t at = base + 1 + static_cast<size_t>(i);
    const int32_t orig = tokens[static_cast<size_t>(i)];
    b.ids[at] = orig;
    if (rng.uniform() < opt_.mask_prob) {
      b.y[at] = orig;
      const double r = rng.uniform();
      if (r < 0.8) b.ids[at] = kMask;
      else if (r < 0.9) b.ids[at] = kSpecials + static_cast<int32_t>(rng.below(static_cast<uint64_t>(tokens_)));
      // else: unchanged
    }
  }
  b.ids[base + 1 + static_cast<size_t>(n)] = kSep;
  for (int i = 0; i < n + 2; ++i) b.mask[base + static_cast<size_t>(i)] = 1;
}

HostBatch MlmData::train_batch(int64_t step, int64_t size) const {
  HostBatch b;
  b.size = size;
  b.row_width = opt_.seq_len;
  b.labels_per_sample = opt_.seq_len;
  const uint64_t step_stream = Rng::stream_seed(Rng::stream_seed(seed_, kTrainStream), static_cast<uint64_t>(step));
  for (int64_t s = 0; s < size; ++s) append_sample(b, Rng::stream_seed(step_stream, static_cast<uint64_t>(s)), false);
  return b;
}

std::optional<ContextFreeLoss> MlmData::context_free_loss(int64_t eval_samples) const {
  if (eval_ids_.empty() || eval_samples < 1) return std::nullopt;
  std::vector<int64_t> counts(static_cast<size_t>(vocab_size()), 0);
  for (const int32_t id : eval_ids_) ++counts[static_cast<size_t>(id)];
  const double total = double(eval_ids_.size());
  ContextFreeLoss c;
  for (const int32_t y : eval_batch(0, eval_samples).y) {
    if (y < 0) continue;
    // A label is a held-out token (content() draws windows of eval_ids_), so its count is at least 1.
    c.loss -= std::log(double(counts[static_cast<size_t>(y)]) / total);
    ++c.labels;
  }
  if (c.labels == 0) return std::nullopt;
  c.loss /= double(c.labels);
  return c;
}

HostBatch MlmData::eval_batch(int64_t offset, int64_t size) const {
  HostBatch b;
  b.size = size;
  b.row_width = opt_.seq_len;
  b.labels_per_sample = opt_.seq_len;
  const uint64_t eval_stream = Rng::stream_seed(kEvalSeed, kEvalStream);
  for (int64_t s = 0; s < size; ++s)
    append_sample(b, Rng::stream_seed(eval_stream, static_cast<uint64_t>(offset + s)), true);
  return b;
}

// Mirrors synthetic() (zipf_cdf_, succ_), from_text() (the text, then at most
// one int32 id per byte in train_ids_/eval_ids_) and
// append_sample() (ids, mask, y per sequence): keep them together.
MemoryEstimate MlmData::estimate_memory(int tokens, double text_bytes, int seq_len, double batch, double micro) {
  MemoryEstimate e;
  e.host = double(tokens) * (8 + kSuccessors * 4) + text_bytes * (1 + 4);
  e.host += (batch + micro) * double(seq_len) * 3 * 4;
  return e;
}

}  // namespace mpb
