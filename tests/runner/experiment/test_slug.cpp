// Cell slugs (result file names): distinct ids never share one, and none is too
// long for a file name. Issue 13's defects 1 and 2, with their reproductions.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "runner/experiment/config.h"
#include "tests/runner/config_test_helpers.h"

namespace mpb {
namespace {

using config_test::load;

TEST(Slug, ReadableIdsKeepTheirReadableSpelling) {
  EXPECT_EQ(cell_slug("precision=fp32,fusion=off,model.width=512"), "precision=fp32__fusion=off__model.width=512");
  EXPECT_EQ(cell_slug("model.hidden_layers=3,batch_size=64"), "model.hidden_layers=3__batch_size=64");
  EXPECT_EQ(cell_slug("base"), "base");
}

TEST(Slug, SpellingsThatCouldBelongToTwoIdsGetAHash) {
  // Defect 1: '/' and '_' both map to '_'; so do ',' and "__".
  const std::string a = cell_slug("data.path=corpus/en.txt"), b = cell_slug("data.path=corpus_en.txt");
  EXPECT_NE(a, b);
  EXPECT_EQ(b, "data.path=corpus_en.txt");             // nothing replaced: no hash
  EXPECT_EQ(a.rfind("data.path=corpus_en.txt-", 0), 0u) << a;  // readable prefix, then the hash
  EXPECT_EQ(a.size(), std::string("data.path=corpus_en.txt-").size() + 8);
  EXPECT_NE(cell_slug("a=1,b=2"), cell_slug("a=1__b=2"));
  EXPECT_NE(cell_slug("a=x_,b=2"), cell_slug("a=x,_b=2"));  // "___" either way without the hash
  EXPECT_EQ(cell_slug("a=x{y}"), cell_slug("a=x{y}"));     // deterministic
}

TEST(Slug, LongIdsAreCutToAFileNameWithAHash) {
  // Defect 2: an include with 15 keys gave a 267-character id, and
  // "File name too long" on every run and resume.
  std::string id;
  for (int i = 0; i < 15; ++i) id += (i ? "," : "") + std::string("model.some_long_key_") + std::to_string(i) + "=1";
  ASSERT_GT(id.size(), 255u);
  const std::string slug = cell_slug(id);
  EXPECT_EQ(slug.size(), kSlugMaxChars);
  std::string other = id;
  other.back() = '2';
  EXPECT_NE(cell_slug(other), slug);  // same first 111 characters, different hash
}

TEST(Slug, TheLoaderGivesCellsThatDifferOnlyInAReplacedCharacterTwoFiles) {
  LoadOptions names_only;  // the paths are names here, not files
  names_only.check_files = false;
  const ExperimentConfig e = load(R"(name: x
model: {kind: bert, size: mini}
data: {kind: text}
matrix:
  data.path: [corpus/en.txt, corpus_en.txt]
)",
                                  names_only);
  ASSERT_EQ(e.cells.size(), 2u);
  EXPECT_NE(e.cells[0].slug, e.cells[1].slug);
}

TEST(Slug, ManyCellsNeverCollide) {
  std::set<std::string> slugs;
  for (int i = 0; i < 2000; ++i) {
    const std::string id = "v=" + std::to_string(i) + (i % 2 ? "/" : "_") + "x";
    EXPECT_TRUE(slugs.insert(cell_slug(id)).second) << id;
  }
}

}  // namespace
}  // namespace mpb
