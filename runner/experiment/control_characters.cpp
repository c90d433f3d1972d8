#include "runner/experiment/control_characters.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "config/config_errors.h"

namespace mpb {

std::optional<std::string> first_control_character(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    char shown[16];
    if (c == '\n') return std::string("\\n");
    if (c == '\t') return std::string("\\t");
    if (c == '\r') return std::string("\\r");
    if (c == 0) return std::string("\\0");
    if (c < 0x20 || c == 0x7f) {
      std::snprintf(shown, sizeof shown, "\\x%02x", c);
      return std::string(shown);
    }
    const unsigned char next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {
      std::snprintf(shown, sizeof shown, "\\u%04x", next);
      return std::string(shown);
    }
  }
  return std::nullopt;
}

namespace {

// yaml-cpp resolves an alias to the node it names, so a file of a few
// kilobytes can describe a tree of billions of nodes; the loader's other
// limits refuse such a file, and this walk stops looking after this many.
constexpr size_t kMaxNodesWalked = 1000000;

[[noreturn]] void refuse(const std::string& file, const YAML::Mark& mark, const std::string& path,
                         const std::string& what, const std::string& shown) {
  throw ConfigError(file, mark.line + 1, mark.column + 1, path,
                    "a control character (" + shown + ") in this " + what +
                        ": not allowed (it would reach the terminal raw, where an escape sequence can clear or "
                        "rewrite the screen); remove it");
}

}  // namespace

void refuse_control_characters(const YAML::Node& root, const std::string& file) {
  std::vector<std::pair<YAML::Node, std::string>> stack = {{root, ""}};
  for (size_t walked = 0; !stack.empty() && walked < kMaxNodesWalked; ++walked) {
    const auto [node, path] = stack.back();
    stack.pop_back();
    if (node.IsScalar()) {
      if (const auto shown = first_control_character(node.Scalar())) refuse(file, node.Mark(), path, "value", *shown);
    } else if (node.IsSequence()) {
      for (size_t i = node.size(); i-- > 0;) stack.emplace_back(node[i], path + "[" + std::to_string(i) + "]");
    } else if (node.IsMap()) {
      std::vector<std::pair<YAML::Node, std::string>> children;
      for (const auto& entry : node) {
        const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "?";
        const std::string child = path.empty() ? key : path + "." + key;
        if (entry.first.IsScalar())
          if (const auto shown = first_control_character(key)) refuse(file, entry.first.Mark(), path, "key", *shown);
        children.emplace_back(entry.second, child);
      }
      for (auto it = children.rbegin(); it != children.rend(); ++it) stack.push_back(*it);  // document order
    }
  }
}

}  // namespace mpb
