// Operations on expanded cells: slugs, --filter matching and config hashes.
// The loader (config.cpp) builds the cells; this file needs only the public API.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "runner/config.h"

namespace mpb {

namespace {

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

struct FilterTerm {
  std::string key;
  std::string value;
};

// The keys of a JMP policy component ("compute=float16"), which may follow a
// precision term because a policy contains commas itself.
bool is_policy_component(const std::string& key) {
  return key == "params" || key == "compute" || key == "output" || key == "p" || key == "c" ||
         key == "o";
}

// The first ',' at or after `start` that is not inside [...] (a list value such as
// inject_nonfinite=[5,9]), or filter.size().
size_t next_term_end(const std::string& filter, size_t start) {
  int depth = 0;
  for (size_t i = start; i < filter.size(); ++i) {
    if (filter[i] == '[') {
      ++depth;
    } else if (filter[i] == ']') {
      depth = std::max(0, depth - 1);
    } else if (filter[i] == ',' && depth == 0) {
      return i;
    }
  }
  return filter.size();
}

// "precision=fp32, fusion=on" -> {precision, fp32}, {fusion, on}.
std::vector<FilterTerm> split_filter(const std::string& filter) {
  std::vector<FilterTerm> terms;
  if (trim(filter).empty()) return terms;  // no terms: every cell matches
  size_t start = 0;
  while (start <= filter.size()) {
    const size_t comma = next_term_end(filter, start);
    const std::string term = trim(filter.substr(start, comma - start));
    start = comma + 1;
    const auto eq = term.find('=');
    const std::string key = trim(term.substr(0, eq));
    const std::string value = eq == std::string::npos ? "" : trim(term.substr(eq + 1));
    if (key.empty() || value.empty()) {
      throw std::invalid_argument("filter '" + filter + "': term '" + term +
                                  "' is not key=value (terms are key=value joined by ',')");
    }
    // "precision=params=float32,compute=float16": glue the policy back together.
    if (!terms.empty() && terms.back().key == "precision" && is_policy_component(key)) {
      terms.back().value += "," + key + "=" + value;
      continue;
    }
    terms.push_back({key, value});
  }
  return terms;
}

}  // namespace

std::string cell_slug(const std::string& id) {
  std::string slug;
  for (const char c : id) {
    const bool safe =
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '=' || c == '-';
    slug += c == ',' ? "__" : safe ? std::string(1, c) : "_";
  }
  return slug;
}

std::string cell_value_string(const Cell& cell, const std::string& key) {
  for (const auto& [axis, value] : cell.axes) {
    if (axis == key) return value;
  }
  return config_value_string(cell.config, key);
}

bool cell_matches_filter(const Cell& cell, const std::string& filter) {
  // Every term is parsed before any is compared, so that a malformed filter fails
  // on every cell, not only on the cells that get as far as the bad term.
  std::vector<FilterTerm> terms = split_filter(filter);
  for (auto& term : terms) {
    // A loss_scale in its canonical form ("dynamic{init:1024}", as ids print it) is
    // compared as written; other values are parsed like YAML values.
    if (term.key == "loss_scale" && term.value.find('{') != std::string::npos) continue;
    try {
      term.value = canonical_value_string(term.key, term.value);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("filter '" + filter + "': " + e.what());
    }
  }
  for (const auto& term : terms) {
    if (cell_value_string(cell, term.key) != term.value) return false;
  }
  return true;
}

std::string config_hash(const nlohmann::json& canonical) {
  // FNV-1a, 64-bit: offset basis and prime from the FNV reference.
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const unsigned char byte : canonical.dump()) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

}  // namespace mpb
