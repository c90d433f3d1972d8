// Configuration errors: ConfigError (where in the file, which key) and the
// "did you mean" suggestions that the schema, the loader and --filter give.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mpb {

// A configuration error: where it is (file:line:col, 1-based) and which key.
// what() reads "file:line:col: key 'optimizer.lr': expected a number, got 'abc'";
// "file:line:col" shrinks to "file" when line is 0 (no position, e.g. an unreadable
// file), and "key '...': " is left out when key is empty (e.g. a YAML syntax error).
// key is a dotted path into the file: "optimizer.lr", "matrix.precision[2]",
// "include[0].batch_size".
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string file, int line, int col, std::string key, const std::string& message);
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  int col() const { return col_; }
  const std::string& key() const { return key_; }
  const std::string& message() const { return message_; }  // what() without file/line/key

 private:
  std::string file_;
  int line_, col_;
  std::string key_;
  std::string message_;
};

// Optimal-string-alignment distance: insertions, deletions, substitutions and
// transpositions of adjacent characters each cost 1 ("widht" -> "width" is 1).
int edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `name`, if it is close enough to be a typo. A dotted
// candidate also matches by its last segment ("width" -> "model.width").
std::optional<std::string> nearest_name(const std::string& name,
                                        const std::vector<std::string>& candidates);

// "unknown key 'optimiser'; did you mean 'optimizer'?" when a candidate is close,
// else "unknown key 'xyz' (valid keys: a, b, c)". `what` is the noun ("key", "value").
std::string unknown_name_message(const std::string& what, const std::string& name,
                                 const std::vector<std::string>& candidates);

}  // namespace mpb
