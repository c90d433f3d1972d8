// ConfigError and the "did you mean" suggestions used by the config loader.
#include "config/config_errors.h"

#include <algorithm>
#include <utility>

namespace mpb {

namespace {

std::string format_error(const std::string& file, int line, int col, const std::string& key,
                         const std::string& message) {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(col);
  out += ": ";
  if (!key.empty()) out += "key '" + key + "': ";
  return out + message;
}

std::string last_segment(const std::string& dotted) {
  const auto dot = dotted.rfind('.');
  return dot == std::string::npos ? dotted : dotted.substr(dot + 1);
}

}  // namespace

ConfigError::ConfigError(std::string file, int line, int col, std::string key,
                         const std::string& message)
    : std::runtime_error(format_error(file, line, col, key, message)),
      file_(std::move(file)),
      line_(line),
      col_(col),
      key_(std::move(key)),
      message_(message) {}

int edit_distance(const std::string& a, const std::string& b) {
  // d[i][j]: distance between the first i characters of a and the first j of b.
  std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1, 0));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::optional<std::string> nearest_name(const std::string& name,
                                        const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  int best_distance = 0;
  for (const auto& candidate : candidates) {
    const int distance =
        std::min(edit_distance(name, candidate), edit_distance(name, last_segment(candidate)));
    if (best == nullptr || distance < best_distance) {  // ties: the first candidate wins
      best = &candidate;
      best_distance = distance;
    }
  }
  // Close enough to be a typo: one edit in short names (else "xy" would suggest "lr"),
  // two edits, or a third of the name for long names.
  const int length = static_cast<int>(name.size());
  const int threshold = length <= 4 ? 1 : std::max(2, length / 3);
  if (best != nullptr && best_distance <= threshold) return *best;
  // A truncated name ("warmup" for "warmup_steps") is far in edits but obvious.
  if (name.size() >= 4) {
    for (const auto& candidate : candidates) {
      if (candidate.compare(0, name.size(), name) == 0) return candidate;
    }
  }
  return std::nullopt;
}

std::string unknown_name_message(const std::string& what, const std::string& name,
                                 const std::vector<std::string>& candidates) {
  std::string message = "unknown " + what + " '" + name + "'";
  if (const auto suggestion = nearest_name(name, candidates)) {
    return message + "; did you mean '" + *suggestion + "'?";
  }
  if (candidates.empty()) return message;
  message += " (valid: ";
  for (size_t i = 0; i < candidates.size(); ++i) message += (i ? ", " : "") + candidates[i];
  return message + ")";
}

}  // namespace mpb
