// The SentencePiece tokenizer's cache (models/subword_tokenizer.h): the same
// corpus and options reuse the cached model (no training, same ids); a changed
// byte or piece count trains a new one under a new hash; the cache directory
// follows XDG_CACHE_HOME, then HOME.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "models/subword_tokenizer.h"
#include "tests/models/text_test_corpus.h"

namespace mpb {
namespace {

namespace fs = std::filesystem;

class SubwordCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::path(::testing::TempDir()) / ("mpb_sp_cache_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(SubwordCache, SameCorpusReusesChangedCorpusRetrains) {
  const auto docs = text_test::documents(60, 8);
  const SubwordTokenizer first = SubwordTokenizer::train_or_load(docs, 120, dir_);
  EXPECT_FALSE(first.from_cache());
  EXPECT_EQ(first.pieces(), 120);
  EXPECT_EQ(first.hash().size(), 16u);
  EXPECT_EQ(first.model_path(), dir_ + "/sp-" + first.hash() + ".model");
  ASSERT_TRUE(fs::exists(first.model_path()));
  const auto written = fs::last_write_time(first.model_path());

  const SubwordTokenizer again = SubwordTokenizer::train_or_load(docs, 120, dir_);
  EXPECT_TRUE(again.from_cache());
  EXPECT_EQ(again.hash(), first.hash());
  EXPECT_EQ(fs::last_write_time(again.model_path()), written);  // read, not rewritten
  const std::string probe = "The function returns a new list of the values.";
  EXPECT_EQ(again.encode(probe), first.encode(probe));
  // Subwords, not bytes or characters: common words are single pieces.
  EXPECT_LT(first.encode(probe).size(), probe.size() / 2);

  // One byte changed: another key, trained afresh; the first model stays.
  auto edited = docs;
  edited[17][3] = edited[17][3] == 'x' ? 'y' : 'x';
  const SubwordTokenizer retrained = SubwordTokenizer::train_or_load(edited, 120, dir_);
  EXPECT_FALSE(retrained.from_cache());
  EXPECT_NE(retrained.hash(), first.hash());
  EXPECT_TRUE(fs::exists(first.model_path()));
  // Another piece count: another key.
  EXPECT_NE(SubwordTokenizer::cache_key(docs, 121), first.hash());
  EXPECT_EQ(SubwordTokenizer::cache_key(docs, 120), first.hash());
  // Document boundaries are part of the key: the same bytes cut differently differ.
  std::vector<std::string> merged(docs.begin() + 2, docs.end());
  merged.insert(merged.begin(), docs[0] + docs[1]);
  EXPECT_NE(SubwordTokenizer::cache_key(merged, 120), first.hash());
}

TEST_F(SubwordCache, TrainingIsDeterministic) {
  // Two caches, trained independently: the same model bytes, so the hash
  // names one model wherever it was trained.
  const auto docs = text_test::documents(40, 8, 9);
  const SubwordTokenizer a = SubwordTokenizer::train_or_load(docs, 100, dir_ + "/a");
  const SubwordTokenizer b = SubwordTokenizer::train_or_load(docs, 100, dir_ + "/b");
  ASSERT_FALSE(b.from_cache());
  std::ifstream fa(a.model_path(), std::ios::binary), fb(b.model_path(), std::ios::binary);
  const std::string ma((std::istreambuf_iterator<char>(fa)), std::istreambuf_iterator<char>());
  const std::string mb((std::istreambuf_iterator<char>(fb)), std::istreambuf_iterator<char>());
  EXPECT_FALSE(ma.empty());
  EXPECT_EQ(ma, mb);
}

TEST_F(SubwordCache, TooManyPiecesIsAClearError) {
  const auto docs = text_test::documents(3, 2);
  try {
    SubwordTokenizer::train_or_load(docs, 30000, dir_);
    ADD_FAILURE() << "30000 pieces from a few sentences";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("SentencePiece training failed"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Vocabulary size"), std::string::npos) << e.what();
  }
}

TEST(SubwordCacheDir, FollowsXdgCacheHomeThenHome) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string saved_xdg = xdg ? xdg : "", saved_home = home ? home : "";
  ::setenv("XDG_CACHE_HOME", "/x/cache", 1);
  ::setenv("HOME", "/h", 1);
  EXPECT_EQ(tokenizer_cache_dir(), "/x/cache/mpbench/tokenizers");
  ::setenv("XDG_CACHE_HOME", "", 1);  // empty counts as unset (the XDG spec)
  EXPECT_EQ(tokenizer_cache_dir(), "/h/.cache/mpbench/tokenizers");
  ::unsetenv("XDG_CACHE_HOME");
  ::unsetenv("HOME");
  EXPECT_THROW(tokenizer_cache_dir(), std::runtime_error);
  if (xdg) ::setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
  if (home) ::setenv("HOME", saved_home.c_str(), 1);
}

}  // namespace
}  // namespace mpb
