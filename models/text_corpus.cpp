#include "models/text_corpus.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace mpb {

std::optional<std::string> utf8_problem(std::string_view bytes) {
  int64_t line = 1, column = 1;
  const size_t n = bytes.size();
  auto at = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  for (size_t i = 0; i < n;) {
    // Eight ASCII bytes at a time (no high bit set): most of any English text,
    // and the loader checks files of up to 256 MiB.
    if (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, bytes.data() + i, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        for (size_t k = 0; k < 8; ++k) {
          if (bytes[i + k] == '\n') ++line, column = 1;
          else ++column;
        }
        i += 8;
        continue;
      }
    }
    const uint8_t b = at(i);
    size_t len = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // the second byte's range (table 3-7)
    if (b < 0x80) len = 1;
    else if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b == 0xE0) len = 3, lo = 0xA0;
    else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) len = 3;
    else if (b == 0xED) len = 3, hi = 0x9F;  // no surrogates
    else if (b == 0xF0) len = 4, lo = 0x90;
    else if (b >= 0xF1 && b <= 0xF3) len = 4;
    else if (b == 0xF4) len = 4, hi = 0x8F;  // <= U+10FFFF
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      const uint8_t c = at(i + k);
      ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    }
    if (!ok) {
      return "is not UTF-8: byte 0x" + hex64(b).substr(14) + " at line " + std::to_string(line) + ", column " +
             std::to_string(column) + " (byte offset " + std::to_string(i) + ")";
    }
    if (b == '\n') ++line, column = 1;
    else ++column;
    i += len;
  }
  return std::nullopt;
}

namespace {

bool blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; });
}

std::vector<std::string> cut_documents(const std::string& text) {
  std::vector<std::string> docs;
  auto keep = [&](std::string_view piece) {
    if (!blank(piece)) docs.emplace_back(piece);
  };
  const std::string_view all(text);
  if (text.find('\f') != std::string::npos) {
    // A form feed on a line of its own separates: the newlines on either side
    // of it belong to the separator, not to the documents.
    size_t start = 0;
    for (size_t ff; (ff = all.find('\f', start)) != std::string_view::npos; start = ff + 1) {
      std::string_view piece = all.substr(start, ff - start);
      if (start > 0 && !piece.empty() && piece.front() == '\n') piece.remove_prefix(1);
      if (!piece.empty() && piece.back() == '\n') piece.remove_suffix(1);
      keep(piece);
    }
    std::string_view last = all.substr(start);
    if (start > 0 && !last.empty() && last.front() == '\n') last.remove_prefix(1);
    keep(last);
    return docs;
  }
  // Paragraphs: a line that is blank (spaces, tabs, \r only) ends one.
  size_t start = 0, line = 0;
  while (line < all.size()) {
    size_t end = all.find('\n', line);
    if (end == std::string_view::npos) end = all.size();
    if (blank(all.substr(line, end - line))) {
      keep(all.substr(start, line - start));
      start = end + 1;
    }
    line = end + 1;
  }
  if (start < all.size()) keep(all.substr(start));
  return docs;
}

}  // namespace

TextSplit split_documents(const std::string& text, size_t min_tail) {
  std::vector<std::string> docs = cut_documents(text);
  if (docs.empty()) throw std::invalid_argument("the text has no non-blank document");
  TextSplit s;
  s.documents = static_cast<int64_t>(docs.size());
  if (docs.size() == 1) {
    // One document: its last tenth, moved back to a character's first byte.
    std::string& d = docs[0];
    size_t cut = d.size() - std::min(std::max<size_t>({d.size() / 10, min_tail, 1}), d.size() / 2);
    while (cut > 0 && (static_cast<uint8_t>(d[cut]) & 0xC0) == 0x80) --cut;
    s.by_document = false;
    s.train.push_back(d.substr(0, cut));
    s.held_out.push_back(d.substr(cut));
    return s;
  }
  std::vector<uint64_t> hash(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) hash[i] = fnv1a64(docs[i]);
  std::vector<bool> held(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) held[i] = hash[i] % 10 == 0;
  const auto count = std::count(held.begin(), held.end(), true);
  if (count == 0) held[size_t(std::min_element(hash.begin(), hash.end()) - hash.begin())] = true;
  if (count == static_cast<std::ptrdiff_t>(docs.size()))
    held[size_t(std::max_element(hash.begin(), hash.end()) - hash.begin())] = false;
  for (size_t i = 0; i < docs.size(); ++i) (held[i] ? s.held_out : s.train).push_back(std::move(docs[i]));
  return s;
}

}  // namespace mpb
