// A plain-text corpus as MLM data reads it: checked to be UTF-8, cut into
// documents, and split into a training and a held-out part BY DOCUMENT, so no
// held-out sentence has a neighbour in the training text.
//
// Documents: if the text holds a form feed ('\f', what
// scripts/extract_text_corpus.py writes between the files it extracts), the
// documents are the pieces between form feeds (a newline on either side of
// the form feed belongs to the separator); otherwise they are paragraphs,
// separated by blank lines. Whitespace-only pieces are dropped.
//
// The split: a document is held out when the FNV-1a hash of its bytes is 0
// modulo 10 (about a tenth). It depends on each document's own text only, so
// it is the same on every run and machine, and adding or editing one document
// never moves another across the split. If no document hashes to 0, the one
// with the smallest hash is held out; if every one does, the one with the
// largest hash trains. A text with a single document cannot be split by
// document: its last tenth (at a UTF-8 character boundary) is held out, and
// `by_document` says so.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/content_hash.h"  // fnv1a64, hex64: the split's and the cache key's hash

namespace mpb {

// Why `bytes` is not UTF-8, naming the first bad byte's 1-based line and
// column (in characters) and its byte offset; nullopt: valid. Overlong
// forms, surrogates and code points past U+10FFFF are refused, as the
// Unicode standard's table 3-7 says.
std::optional<std::string> utf8_problem(std::string_view bytes);

struct TextSplit {
  std::vector<std::string> train, held_out;
  bool by_document = true;  // false: one document, its last tenth held out
  int64_t documents = 0;
};

// Throws std::invalid_argument for a text with no non-blank document.
// min_tail: the least bytes a single document's held-out tail gets (at most
// half the document), so that a short file still holds one sequence there.
TextSplit split_documents(const std::string& text, size_t min_tail = 1);

}  // namespace mpb
