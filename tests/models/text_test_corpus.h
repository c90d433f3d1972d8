// A deterministic English-like corpus for the text-data tests: documents of
// sentences drawn from a fixed word list (seeded), so SentencePiece has words
// and common subwords to learn, and no test depends on a file outside the tree.
#pragma once

#include <string>
#include <vector>

#include "core/rng.h"

namespace mpb::text_test {

inline std::vector<std::string> documents(int count, int sentences_per_doc, uint64_t seed = 5) {
  static const char* words[] = {
      "the",      "a",       "of",      "and",     "to",       "in",       "is",        "that",    "for",
      "it",       "with",    "as",      "was",     "on",       "by",       "function",  "module",  "value",
      "returns",  "object",  "string",  "number",  "list",     "error",    "exception", "called",  "default",
      "argument", "class",   "method",  "file",    "python",   "type",     "when",      "which",   "this",
      "can",      "be",      "used",    "instead", "example",  "should",   "raised",    "new",     "name",
      "keyword",  "returned", "version", "changed", "attribute", "iterator", "sequence", "mapping", "data"};
  constexpr int kWords = sizeof(words) / sizeof(words[0]);
  Rng rng(seed);
  std::vector<std::string> docs;
  for (int d = 0; d < count; ++d) {
    std::string doc;
    for (int s = 0; s < sentences_per_doc; ++s) {
      const int n = 6 + static_cast<int>(rng.below(10));
      std::string sentence;
      for (int w = 0; w < n; ++w) {
        // Zipf-like: low indices far more often, as in prose.
        const double u = rng.uniform();
        const int i = std::min(kWords - 1, static_cast<int>(kWords * u * u * u));
        sentence += (w ? " " : "") + std::string(words[i]);
      }
      sentence[0] = static_cast<char>(sentence[0] - 'a' + 'A');
      doc += sentence + (s % 4 == 3 ? ".\n" : ". ");
    }
    docs.push_back(doc);
  }
  return docs;
}

// The documents as a corpus file's text: separated by form feeds, as
// scripts/extract_text_corpus.py writes them.
inline std::string join_form_feed(const std::vector<std::string>& docs) {
  std::string text;
  for (size_t i = 0; i < docs.size(); ++i) text += (i ? "\n\f\n" : "") + docs[i];
  return text;
}

}  // namespace mpb::text_test
