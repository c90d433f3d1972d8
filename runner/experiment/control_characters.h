// Text from an experiment file reaches the terminal: cell ids in the dry-run
// table, progress lines and the results table, values in error messages. A
// control character there is an input error, refused where it is written
// (issue 43 item 16: an ESC in data.path cleared the screen in the dry-run
// table; a NUL or newline in `name` came back raw in its own error). Refusing
// it at load time keeps every later printer safe; escaping it at each of them
// would leave the next new printer unsafe.
#pragma once

#include <optional>
#include <string>

#include <yaml-cpp/yaml.h>

namespace mpb {

// The first control character of `text` as it should be shown: "\x1b",
// "\n", "\t", "\0", "\u0085"; nullopt when there is none. Control characters:
// C0 (U+0000 to U+001F), DEL (U+007F) and C1 (U+0080 to U+009F, UTF-8 C2 80
// to C2 9F), which terminals act on too (U+009B starts an escape sequence).
std::optional<std::string> first_control_character(const std::string& text);

// Throws ConfigError (file, line and column, the key's dotted path) at a key
// or scalar value of `root` that holds one (a map's keys are looked at before
// its values).
void refuse_control_characters(const YAML::Node& root, const std::string& file);

}  // namespace mpb
