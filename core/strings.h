// Small string helpers shared by every layer that reads text (precision
// policies, the configuration schema, --filter).
#pragma once

#include <string>

namespace mpb {

// `s` without leading and trailing blanks (spaces and tabs).
inline std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

}  // namespace mpb
