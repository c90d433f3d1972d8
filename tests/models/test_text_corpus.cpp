// The text corpus's checks and split (models/text_corpus.h): UTF-8 errors
// name the line and column; documents are cut at form feeds or blank lines;
// the held-out split is by document, deterministic, and a document's side
// depends on its own text only.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "models/text_corpus.h"
#include "tests/models/text_test_corpus.h"

namespace mpb {
namespace {

TEST(TextCorpus, Utf8ProblemsNameLineAndColumn) {
  EXPECT_FALSE(utf8_problem("plain ASCII\nand more\n"));
  EXPECT_FALSE(utf8_problem("na\xC3\xAFve \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"));  // 2, 3, 4 bytes, U+10FFFF
  struct Bad {
    std::string text;
    std::string where;
  };
  const std::vector<Bad> bad = {
      {"ok\nab\xFFz", "byte 0xff at line 2, column 3 (byte offset 5)"},
      {"\xC0\x80", "byte 0xc0 at line 1, column 1"},              // overlong NUL
      {"x\xE0\x80\x80", "byte 0xe0 at line 1, column 2"},         // overlong 3-byte form
      {"\xED\xA0\x80", "byte 0xed at line 1, column 1"},          // a UTF-16 surrogate
      {"\xF4\x90\x80\x80", "byte 0xf4 at line 1, column 1"},      // past U+10FFFF
      {"\xC3\xA9\xC3", "byte 0xc3 at line 1, column 2"},          // cut off at the end
      {"\x80", "byte 0x80 at line 1, column 1"},                  // a lone continuation byte
      {"\xE2\x82\xAC\n\xE2\x82", "line 2, column 1 (byte offset 4)"},  // columns count characters
      // Past the eight-byte ASCII fast path, with a newline inside a word of it.
      {"0123456789\nabcdefghijklmn\xFF", "byte 0xff at line 2, column 15 (byte offset 25)"},
  };
  for (const Bad& b : bad) {
    const auto problem = utf8_problem(b.text);
    ASSERT_TRUE(problem) << b.where;
    EXPECT_NE(problem->find(b.where), std::string::npos) << *problem;
  }
}

TEST(TextCorpus, DocumentsAreFormFeedPiecesOrParagraphs) {
  const TextSplit ff = split_documents("one\n\ntwo still one\n\f\nthree\f   \n\ffour");
  EXPECT_EQ(ff.documents, 3);  // the blank piece is dropped; blank lines don't cut when form feeds do
  const TextSplit para = split_documents("p one\nline two\n\n \r\np two\n\n\np three");
  EXPECT_EQ(para.documents, 3);
  std::vector<std::string> all = para.train;
  all.insert(all.end(), para.held_out.begin(), para.held_out.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<std::string>{"p one\nline two\n", "p three", "p two\n"}));
  EXPECT_THROW(split_documents(" \n\n\t\n"), std::invalid_argument);
}

TEST(TextCorpus, TheSplitIsByDocumentAndDeterministic) {
  const auto docs = text_test::documents(300, 4);
  const TextSplit a = split_documents(text_test::join_form_feed(docs));
  const TextSplit b = split_documents(text_test::join_form_feed(docs));
  EXPECT_TRUE(a.by_document);
  EXPECT_EQ(a.documents, 300);
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.held_out, b.held_out);
  // Whole documents on each side, none on both, about a tenth held out.
  EXPECT_EQ(a.train.size() + a.held_out.size(), 300u);
  EXPECT_GT(a.held_out.size(), 15u);
  EXPECT_LT(a.held_out.size(), 50u);
  for (const std::string& d : a.held_out) {
    EXPECT_NE(std::find(docs.begin(), docs.end(), d), docs.end());
    EXPECT_EQ(std::find(a.train.begin(), a.train.end(), d), a.train.end());
  }
  // A document's side is its own: drop the first document and shuffle the
  // order, and every other document stays where it was.
  std::vector<std::string> changed(docs.begin() + 1, docs.end());
  std::reverse(changed.begin(), changed.end());
  const TextSplit c = split_documents(text_test::join_form_feed(changed));
  for (const std::string& d : c.held_out) {
    EXPECT_NE(std::find(a.held_out.begin(), a.held_out.end(), d), a.held_out.end());
  }
  EXPECT_GE(c.held_out.size() + 1, a.held_out.size());
}

TEST(TextCorpus, OneDocumentHoldsOutItsTailAtACharacterBoundary) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "\xC3\xA9t\xC3\xA9 ";  // "été " : a cut could land inside a character
  const TextSplit s = split_documents(text, 7);
  EXPECT_FALSE(s.by_document);
  ASSERT_EQ(s.train.size(), 1u);
  ASSERT_EQ(s.held_out.size(), 1u);
  EXPECT_EQ(s.train[0] + s.held_out[0], text);
  EXPECT_FALSE(utf8_problem(s.train[0]));
  EXPECT_FALSE(utf8_problem(s.held_out[0]));
  EXPECT_GE(s.held_out[0].size(), text.size() / 10);
  // min_tail: a short text still holds out one sequence's worth.
  const TextSplit short_one = split_documents(std::string(40, 'x'), 12);
  EXPECT_EQ(short_one.held_out[0].size(), 12u);
}

}  // namespace
}  // namespace mpb
