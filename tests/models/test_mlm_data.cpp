// MLM data: deterministic batches, BERT's masking proportions, sequence
// structure (specials, padding, attention mask), a held-out set independent
// of the run seed, a learnable synthetic corpus, and byte-level text.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "models/mlm_data.h"
#include "models/subword_tokenizer.h"
#include "models/text_corpus.h"
#include "tests/models/text_test_corpus.h"

namespace mpb {
namespace {

constexpr int kTokens = 64;

bool same(const HostBatch& a, const HostBatch& b) { return a.ids == b.ids && a.mask == b.mask && a.y == b.y; }

TEST(MlmData, BatchesAreDeterministicPerSeedAndStep) {
  MlmOptions o;
  o.seq_len = 32;
  const MlmData d = MlmData::synthetic(7, kTokens, o);
  const HostBatch a = d.train_batch(3, 16);
  EXPECT_EQ(a.size, 16);
  EXPECT_EQ(a.row_width, 32);
  EXPECT_EQ(a.labels_per_sample, 32);
  ASSERT_EQ(a.ids.size(), 16u * 32u);
  ASSERT_EQ(a.mask.size(), a.ids.size());
  ASSERT_EQ(a.y.size(), a.ids.size());
  EXPECT_TRUE(same(a, d.train_batch(3, 16)));
  EXPECT_TRUE(same(a, MlmData::synthetic(7, kTokens, o).train_batch(3, 16)));  // a fresh object: same data
  EXPECT_FALSE(same(a, d.train_batch(4, 16)));
  EXPECT_FALSE(same(a, MlmData::synthetic(8, kTokens, o).train_batch(3, 16)));
  // The first rows of a batch don't depend on its size (micro-batches are row slices).
  const HostBatch half = d.train_batch(3, 8);
  EXPECT_TRUE(std::equal(half.ids.begin(), half.ids.end(), a.ids.begin()));
  EXPECT_TRUE(std::equal(half.y.begin(), half.y.end(), a.y.begin()));
  EXPECT_EQ(d.vocab_size(), kTokens + 4);
  EXPECT_EQ(d.row_width(), 32);
  EXPECT_EQ(d.labels_per_sample(), 32);
}

TEST(MlmData, EvalSetIsIndependentOfTheRunSeedAndOfChunking) {
  MlmOptions o;
  o.seq_len = 16;
  const MlmData a = MlmData::synthetic(1, kTokens, o), b = MlmData::synthetic(99, kTokens, o);
  const HostBatch ea = a.eval_batch(0, 12);
  EXPECT_TRUE(same(ea, b.eval_batch(0, 12)));
  const HostBatch tail = a.eval_batch(5, 7);
  EXPECT_TRUE(std::equal(tail.ids.begin(), tail.ids.end(), ea.ids.begin() + 5 * 16));
  EXPECT_TRUE(std::equal(tail.y.begin(), tail.y.end(), ea.y.begin() + 5 * 16));
  // And it is not the training stream.
  EXPECT_FALSE(same(ea, a.train_batch(0, 12)));
  EXPECT_FALSE(same(ea, a.train_batch(1, 12)));
}

// Checks the layout of every row; returns {real content tokens, selected,
// [MASK]ed, unchanged, short rows}.
struct Counts {
  int64_t content = 0, selected = 0, masked = 0, unchanged = 0, random = 0, short_rows = 0;
};

Counts check_rows(const HostBatch& b, int vocab) {
  Counts c;
  const int T = b.row_width;
  for (int64_t r = 0; r < b.size; ++r) {
    const int32_t* ids = &b.ids[static_cast<size_t>(r * T)];
    const int32_t* mask = &b.mask[static_cast<size_t>(r * T)];
    const int32_t* y = &b.y[static_cast<size_t>(r * T)];
    EXPECT_EQ(ids[0], MlmData::kCls);
    int sep = -1;
    for (int t = 1; t < T && sep < 0; ++t)
      if (ids[t] == MlmData::kSep) sep = t;
    EXPECT_GT(sep, 1) << "row " << r << ": [SEP] after at least one token";
    if (sep < 0) continue;
    if (sep < T - 1) ++c.short_rows;
    for (int t = 0; t < T; ++t) {
      EXPECT_EQ(mask[t], t <= sep ? 1 : 0) << "row " << r << " position " << t;
      if (t > sep) {
        EXPECT_EQ(ids[t], MlmData::kPad);
      }
      if (t == 0 || t >= sep) {
        EXPECT_LT(y[t], 0) << "a special or padding position is never a target";
        continue;
      }
      ++c.content;
      EXPECT_TRUE(ids[t] == MlmData::kMask || (ids[t] >= MlmData::kSpecials && ids[t] < vocab));
      if (y[t] < 0) {
        EXPECT_NE(ids[t], MlmData::kMask) << "an unselected token is never [MASK]";
        continue;
      }
      EXPECT_GE(y[t], MlmData::kSpecials);
      EXPECT_LT(y[t], vocab);
      ++c.selected;
      if (ids[t] == MlmData::kMask) ++c.masked;
      else if (ids[t] == y[t]) ++c.unchanged;
      else ++c.random;
    }
  }
  return c;
}

// |observed - n p| within 5 standard deviations of a binomial(n, p) (false
// failure rate ~6e-7 per check).
void expect_binomial(int64_t observed, int64_t n, double p, const char* what) {
  const double mean = double(n) * p, sd = std::sqrt(double(n) * p * (1 - p));
  EXPECT_NEAR(double(observed), mean, 5 * sd) << what << ": " << observed << " of " << n << ", expected p = " << p;
}

TEST(MlmData, MasksFifteenPercentOfRealTokensEightyTenTen) {
  MlmOptions o;
  o.seq_len = 64;
  const MlmData d = MlmData::synthetic(3, kTokens, o);
  Counts c;
  int64_t rows = 0;
  for (int step = 1; step <= 16; ++step) {
    const Counts s = check_rows(d.train_batch(step, 64), d.vocab_size());
    c.content += s.content, c.selected += s.selected, c.masked += s.masked;
    c.unchanged += s.unchanged, c.random += s.random, c.short_rows += s.short_rows;
    rows += 64;
  }
  ASSERT_GT(c.content, 50000);
  expect_binomial(c.selected, c.content, 0.15, "selected");
  expect_binomial(c.masked, c.selected, 0.8, "[MASK]");
  // A "random" replacement equal to the original counts as unchanged: p = 0.1 + 0.1 / tokens.
  const double p_same = 0.1 + 0.1 / kTokens;
  expect_binomial(c.unchanged, c.selected, p_same, "unchanged");
  expect_binomial(c.random, c.selected, 0.1 - 0.1 / kTokens, "random");
  expect_binomial(c.short_rows, rows, 0.1, "short (padded) rows");
  // The same rules on the held-out set.
  const Counts e = check_rows(d.eval_batch(0, 256), d.vocab_size());
  expect_binomial(e.selected, e.content, 0.15, "eval selected");
}

TEST(MlmData, SyntheticCorpusHasLearnableStructure) {
  // The empirical conditional entropy of a token given its predecessor is far
  // below both ln(tokens) (chance) and the unigram entropy: a masked token is
  // predictable from its context.
  MlmOptions o;
  o.seq_len = 128;
  o.mask_prob = 1.0;  // y holds every original token
  const MlmData d = MlmData::synthetic(5, kTokens, o);
  const HostBatch b = d.train_batch(1, 400);
  std::map<int, std::map<int, int>> bigram;
  std::map<int, int> unigram;
  int64_t n = 0;
  for (int64_t r = 0; r < b.size; ++r)
    for (int t = 1; t + 1 < b.row_width; ++t) {
      const int32_t prev = b.y[static_cast<size_t>(r * b.row_width + t)];
      const int32_t next = b.y[static_cast<size_t>(r * b.row_width + t + 1)];
      if (prev < 0) continue;
      ++unigram[prev], ++n;
      if (next >= 0) ++bigram[prev][next];
    }
  double h_uni = 0.0, h_cond = 0.0;
  int64_t pairs = 0;
  for (const auto& [tok, cnt] : unigram) h_uni -= double(cnt) / double(n) * std::log(double(cnt) / double(n));
  for (const auto& [prev, nexts] : bigram) {
    int64_t tot = 0;
    for (const auto& [nx, cnt] : nexts) tot += cnt;
    for (const auto& [nx, cnt] : nexts) h_cond -= double(cnt) * std::log(double(cnt) / double(tot));
    pairs += tot;
  }
  h_cond /= double(pairs);
  EXPECT_LT(h_uni, 0.9 * std::log(double(kTokens)));  // Zipfian, not uniform
  EXPECT_LT(h_cond, 0.4 * std::log(double(kTokens)));
  EXPECT_LT(h_cond, 0.5 * h_uni);
}

std::string write_temp_text(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(MlmData, TextIsByteLevelWithAHeldOutTail) {
  // Random letters: every 16-byte window is unique (with overwhelming
  // probability), so a sequence's position in the file can be found.
  std::string text;
  Rng rng(42);
  while (text.size() < 20000) text += static_cast<char>(rng.below(6) == 0 ? ' ' : 'a' + static_cast<int>(rng.below(26)));
  const std::string path = write_temp_text("mlm_text.txt", text);
  MlmOptions o;
  o.seq_len = 48;
  const MlmData d = MlmData::from_text(path, 11, o);
  EXPECT_EQ(d.vocab_size(), 260);
  const size_t eval_start = text.size() - text.size() / 10;
  auto content_of = [&](const HostBatch& b, int64_t r) {
    std::string s;
    for (int t = 1; t < b.row_width; ++t) {
      const size_t i = static_cast<size_t>(r * b.row_width + t);
      if (b.ids[i] == MlmData::kSep) break;
      const int32_t id = b.y[i] >= 0 ? b.y[i] : b.ids[i];  // the original token
      EXPECT_GE(id, MlmData::kSpecials);
      EXPECT_LT(id, 260);
      s += static_cast<char>(id - MlmData::kSpecials);
    }
    return s;
  };
  const HostBatch tr = d.train_batch(2, 32), ev = d.eval_batch(0, 32);
  check_rows(tr, 260);
  check_rows(ev, 260);
  for (int64_t r = 0; r < 32; ++r) {
    const std::string s = content_of(tr, r);
    const size_t at = text.find(s);
    ASSERT_NE(at, std::string::npos) << "training sequence " << r << " is not a substring of the file";
    if (s.size() >= 16) {
      EXPECT_LE(at + s.size(), eval_start) << "training sequences come from the first 90%";
    }
    const std::string e = content_of(ev, r);
    const size_t eat = text.rfind(e);
    ASSERT_NE(eat, std::string::npos);
    if (e.size() >= 16) {
      EXPECT_GE(eat, eval_start) << "eval sequences come from the held-out tail";
    }
  }
  EXPECT_TRUE(same(ev, MlmData::from_text(path, 12, o).eval_batch(0, 32)));
  std::remove(path.c_str());
}

TEST(MlmData, TextErrorsAreClear) {
  EXPECT_THROW(MlmData::from_text("/nonexistent/file.txt", 1), std::runtime_error);
  const std::string path = write_temp_text("mlm_short.txt", "too short");
  MlmOptions o;
  o.seq_len = 64;
  EXPECT_THROW(MlmData::from_text(path, 1, o), std::runtime_error);
  std::remove(path.c_str());
  o.seq_len = 2;
  EXPECT_THROW(MlmData::synthetic(1, kTokens, o), std::invalid_argument);
}

// data.kind text with SentencePiece: the specials and BERT's masking as the
// Markov path has them, training windows from the training documents and
// held-out windows from the held-out documents only (the split recomputed
// and re-encoded here with the cached tokenizer), the same held-out set for
// every run seed, and the tokenizer's hash exposed.
TEST(MlmData, SentencePieceTextHasSpecialsMaskingAndADocumentSplit) {
  const std::string cache = ::testing::TempDir() + "mpb_mlm_sp_cache_" + std::to_string(::getpid());
  const auto docs = text_test::documents(120, 6, 21);
  const std::string text = text_test::join_form_feed(docs);
  const std::string path = write_temp_text("mlm_sp.txt", text);
  MlmOptions o;
  o.seq_len = 40;
  o.short_fraction = 0.0;  // full windows: each is a substring of one part's stream
  const int pieces = 120;
  const TextTokenizer tok{TextTokenizer::Kind::SentencePiece, pieces, cache};
  const MlmData d = MlmData::from_text(path, 3, o, tok);
  EXPECT_EQ(d.vocab_size(), pieces + 4);
  EXPECT_EQ(d.tokenizer_hash().size(), 16u);
  EXPECT_NE(d.describe().find("SentencePiece unigram, 120 pieces"), std::string::npos) << d.describe();

  // The streams each part must come from, encoded here from the split.
  const TextSplit split = split_documents(text, size_t(o.seq_len - 2));
  const SubwordTokenizer sp = SubwordTokenizer::train_or_load(split.train, pieces, cache);
  EXPECT_TRUE(sp.from_cache());
  EXPECT_EQ(sp.hash(), d.tokenizer_hash());
  auto stream = [&](const std::vector<std::string>& part) {
    std::vector<int32_t> ids;
    for (const auto& doc : part)
      for (int32_t id : sp.encode(doc)) ids.push_back(MlmData::kSpecials + id);
    return ids;
  };
  const std::vector<int32_t> train_stream = stream(split.train), eval_stream = stream(split.held_out);
  auto contains = [](const std::vector<int32_t>& hay, const std::vector<int32_t>& needle) {
    return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
  };
  auto original = [&](const HostBatch& b, int64_t r) {
    std::vector<int32_t> s;
    for (int t = 1; t < b.row_width - 1; ++t) {
      const size_t i = static_cast<size_t>(r * b.row_width + t);
      s.push_back(b.y[i] >= 0 ? b.y[i] : b.ids[i]);
    }
    return s;
  };
  const HostBatch tr = d.train_batch(4, 64), ev = d.eval_batch(0, 64);
  check_rows(tr, pieces + 4);
  check_rows(ev, pieces + 4);
  int only_in_own_part = 0;
  for (int64_t r = 0; r < 64; ++r) {
    const auto t = original(tr, r), e = original(ev, r);
    EXPECT_TRUE(contains(train_stream, t)) << "training row " << r << " is not a window of the training documents";
    EXPECT_TRUE(contains(eval_stream, e)) << "held-out row " << r << " is not a window of the held-out documents";
    only_in_own_part += !contains(eval_stream, t) && !contains(train_stream, e);
  }
  EXPECT_GT(only_in_own_part, 60);  // 38-token windows of different documents practically never coincide

  // BERT's masking over many rows: 15% selected, of those 80% [MASK], 10%
  // random, 10% kept; specials never selected.
  const HostBatch big = d.train_batch(9, 2000);
  int64_t content = 0, selected = 0, as_mask = 0, kept = 0;
  for (size_t i = 0; i < big.ids.size(); ++i) {
    const bool special_pos = i % size_t(o.seq_len) == 0 || i % size_t(o.seq_len) == size_t(o.seq_len - 1);
    if (special_pos) {
      EXPECT_EQ(big.y[i], -1);
      continue;
    }
    ++content;
    if (big.y[i] < 0) continue;
    ++selected;
    as_mask += big.ids[i] == MlmData::kMask;
    kept += big.ids[i] == big.y[i];
  }
  const double p = double(selected) / double(content);
  EXPECT_NEAR(p, 0.15, 0.005);  // 76,000 positions: sd 0.0013
  EXPECT_NEAR(double(as_mask) / double(selected), 0.8, 0.015);  // 11,400 selected: sd 0.0037
  EXPECT_NEAR(double(kept) / double(selected), 0.1 + 0.1 / pieces, 0.015);  // kept, or a random draw of itself

  // The held-out set is the run seed's to ignore; the training batches are not.
  const MlmData other = MlmData::from_text(path, 99, o, tok);
  EXPECT_TRUE(same(ev, other.eval_batch(0, 64)));
  EXPECT_FALSE(same(tr, other.train_batch(4, 64)));
  std::remove(path.c_str());
  std::filesystem::remove_all(cache);
}

TEST(MlmData, TextMustBeNonEmptyUtf8) {
  const std::string empty = write_temp_text("mlm_empty.txt", "");
  EXPECT_EQ(MlmData::text_file_problem(empty, 16), "'" + empty + "' is empty");
  const std::string latin1 = write_temp_text("mlm_latin1.txt", std::string(100, 'a') + "\ncaf\xE9 au lait\n" + std::string(100, 'b'));
  const auto problem = MlmData::text_file_problem(latin1, 16);
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->find("is not UTF-8: byte 0xe9 at line 2, column 4"), std::string::npos) << *problem;
  for (const auto& path : {empty, latin1}) {
    try {
      MlmData::from_text(path, 1, MlmOptions{16, 0.15, 0.1});
      ADD_FAILURE() << path;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace mpb

namespace mpb {
namespace {

// The facts a text cell's JSON records about its tokenizer (issue 31 §2,
// runner/results/data_facts.h): the same corpus trained twice, each time in
// an EMPTY cache so SentencePiece really trains again, gives the same model
// bytes (one thread, unshuffled: subword_tokenizer.cpp); another corpus gives
// another model, corpus hash and cache key. The model hash is checked against
// the cached file's bytes, hashed here.
TEST(MlmData, SentencePieceTokenizerFactsFollowTheCorpus) {
  const std::string base = ::testing::TempDir() + "mpb_mlm_facts_" + std::to_string(::getpid());
  MlmOptions o;
  o.seq_len = 24;
  const int pieces = 100;
  auto facts = [&](const std::string& text, const std::string& cache) {
    const std::string path = write_temp_text("mlm_facts.txt", text);
    const MlmData d = MlmData::from_text(path, 1, o, {TextTokenizer::Kind::SentencePiece, pieces, base + cache});
    std::remove(path.c_str());
    EXPECT_TRUE(d.tokenizer().has_value());
    return d.tokenizer().value_or(TokenizerFacts{});
  };
  const std::string text = text_test::join_form_feed(text_test::documents(80, 6, 31));
  const TokenizerFacts a = facts(text, "/a"), again = facts(text, "/b");
  EXPECT_EQ(a.kind, "sentencepiece");
  EXPECT_EQ(a.pieces, pieces);
  EXPECT_EQ(a.vocab, pieces + MlmData::kSpecials);
  EXPECT_EQ(a.corpus_hash, hex64(fnv1a64(text)));
  std::ifstream model(base + "/a/sp-" + a.cache_key + ".model", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(model)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(a.model_hash, hex64(fnv1a64(bytes)));
  EXPECT_EQ(again.model_hash, a.model_hash);
  EXPECT_EQ(again.corpus_hash, a.corpus_hash);
  EXPECT_EQ(again.cache_key, a.cache_key);

  const TokenizerFacts changed = facts(text_test::join_form_feed(text_test::documents(80, 6, 32)), "/c");
  EXPECT_NE(changed.model_hash, a.model_hash);
  EXPECT_NE(changed.corpus_hash, a.corpus_hash);
  EXPECT_NE(changed.cache_key, a.cache_key);

  // Byte-level text and the Markov corpus have no tokenizer to record.
  const std::string path = write_temp_text("mlm_facts_bytes.txt", text);
  EXPECT_FALSE(MlmData::from_text(path, 1, o).tokenizer().has_value());
  std::remove(path.c_str());
  EXPECT_FALSE(MlmData::synthetic(1, 50, o).tokenizer().has_value());
  std::filesystem::remove_all(base);
}

// from_text keeps recent encodings for the process (every repeat builds its
// dataset afresh): a later call must reuse one only for the same text and
// tokenizer, whatever the path, and give what a first encoding gives.
TEST(MlmData, ReusedEncodingsFollowTheTextAndTheTokenizer) {
  const std::string cache = ::testing::TempDir() + "mpb_mlm_reuse_" + std::to_string(::getpid());
  MlmOptions o;
  o.seq_len = 24;
  const std::string a = text_test::join_form_feed(text_test::documents(80, 6, 41));
  const std::string b = text_test::join_form_feed(text_test::documents(80, 6, 42));
  auto data = [&](const std::string& text, int pieces) {
    const std::string path = write_temp_text("mlm_reuse.txt", text);  // the same path every time
    MlmData d = MlmData::from_text(path, 1, o, {TextTokenizer::Kind::SentencePiece, pieces, cache});
    std::remove(path.c_str());
    return d;
  };
  const MlmData first = data(a, 100);
  const MlmData other_text = data(b, 100);
  const MlmData other_pieces = data(a, 80);
  const MlmData again = data(a, 100);
  EXPECT_TRUE(same(again.train_batch(3, 16), first.train_batch(3, 16)));
  EXPECT_TRUE(same(again.eval_batch(0, 16), first.eval_batch(0, 16)));
  EXPECT_FALSE(same(other_text.train_batch(3, 16), first.train_batch(3, 16)));
  EXPECT_FALSE(same(other_pieces.train_batch(3, 16), first.train_batch(3, 16)));
  std::filesystem::remove_all(cache);
}

// The best context-free loss: the held-out token stream's own frequencies,
// counted here from the split and the tokenizer, scored on the labels of the
// evaluated samples; for byte-level text and SentencePiece alike.
TEST(MlmData, ContextFreeLossIsTheHeldOutUnigramLossOfTheEvaluatedLabels) {
  const std::string cache = ::testing::TempDir() + "mpb_mlm_context_free_" + std::to_string(::getpid());
  MlmOptions o;
  o.seq_len = 24;
  const std::string text = text_test::join_form_feed(text_test::documents(80, 6, 51));
  const TextSplit split = split_documents(text, size_t(o.seq_len - 2));
  auto expected = [&](const MlmData& d, const std::map<int32_t, int64_t>& counts, int64_t samples) {
    int64_t total = 0;
    for (const auto& [id, k] : counts) total += k;
    double sum = 0.0;
    int64_t labels = 0;
    for (const int32_t y : d.eval_batch(0, samples).y) {
      if (y < 0) continue;
      sum -= std::log(double(counts.at(y)) / double(total));
      ++labels;
    }
    return std::make_pair(sum / double(labels), labels);
  };
  const std::string path = write_temp_text("mlm_context_free.txt", text);
  const MlmData subwords = MlmData::from_text(path, 1, o, {TextTokenizer::Kind::SentencePiece, 100, cache});
  const MlmData bytes = MlmData::from_text(path, 1, o);
  std::remove(path.c_str());

  const SubwordTokenizer sp = SubwordTokenizer::train_or_load(split.train, 100, cache);
  std::map<int32_t, int64_t> piece_counts, byte_counts;
  for (const std::string& doc : split.held_out)
    for (const int32_t id : sp.encode(doc)) ++piece_counts[MlmData::kSpecials + id];
  for (size_t i = 0; i < split.held_out.size(); ++i) {  // documents joined by a newline, as from_text joins them
    if (i > 0) ++byte_counts[MlmData::kSpecials + '\n'];
    for (const char ch : split.held_out[i]) ++byte_counts[MlmData::kSpecials + static_cast<uint8_t>(ch)];
  }
  for (const int64_t samples : {int64_t{1}, int64_t{37}}) {
    for (const auto& [d, counts] : {std::pair<const MlmData*, const std::map<int32_t, int64_t>*>{&subwords, &piece_counts},
                                    {&bytes, &byte_counts}}) {
      const std::optional<ContextFreeLoss> got = d->context_free_loss(samples);
      ASSERT_TRUE(got.has_value());
      const auto [loss, labels] = expected(*d, *counts, samples);
      EXPECT_EQ(got->labels, labels);
      EXPECT_NEAR(got->loss, loss, 1e-12 * loss);  // the same sums, perhaps in another order
      EXPECT_GT(got->loss, 0.0);
    }
  }
  EXPECT_FALSE(MlmData::synthetic(1, 50, o).context_free_loss(37).has_value());
  EXPECT_FALSE(subwords.context_free_loss(0).has_value());
  std::filesystem::remove_all(cache);
}

}  // namespace
}  // namespace mpb
