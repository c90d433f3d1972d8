// Control characters in an experiment file are refused where they are
// (runner/experiment/control_characters.h; issue 43 item 16): an ESC in a
// value would reach the terminal in the dry-run table, a NUL or newline in
// `name` came back raw in the name's own error.
#include <gtest/gtest.h>

#include <string>

#include "config/config_errors.h"
#include "runner/experiment/config.h"
#include "runner/experiment/control_characters.h"

namespace mpb {
namespace {

TEST(ControlCharacters, AreFoundAndShownEscaped) {
  EXPECT_FALSE(first_control_character("data/corpus one.txt"));
  EXPECT_FALSE(first_control_character("caf\xc3\xa9 $x"));  // UTF-8 text and '$' are text
  EXPECT_EQ(first_control_character("a\x1b[2Jb"), "\\x1b");
  EXPECT_EQ(first_control_character(std::string("a\0b", 3)), "\\0");
  EXPECT_EQ(first_control_character("a\nb"), "\\n");
  EXPECT_EQ(first_control_character("a\x7f"), "\\x7f");
  EXPECT_EQ(first_control_character("a\xc2\x9b" "2J"), "\\u009b");  // C1 CSI, as UTF-8
}

// The file, line and column, the key, and the character shown escaped; the raw byte never.
void expect_refused(const std::string& yaml, int line, const std::string& key, const std::string& shown) {
  try {
    load_experiment_from_string(yaml, "x.yaml");
    ADD_FAILURE() << "accepted: " << yaml;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.line(), line) << e.what();
    EXPECT_EQ(e.key(), key) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find("a control character (" + shown + ")"), std::string::npos) << what;
    EXPECT_EQ(what.find('\x1b'), std::string::npos);
    EXPECT_EQ(what.find('\0'), std::string::npos);
  }
}

TEST(ControlCharacters, InAnExperimentFileAreAnInputError) {
  expect_refused("name: t\ndata:\n  kind: text\n  path: \"corpus\\e[2J.txt\"\n", 4, "data.path", "\\x1b");
  expect_refused("name: \"a\\0b\"\n", 1, "name", "\\0");
  expect_refused("name: \"a\\nb\"\n", 1, "name", "\\n");
  expect_refused("name: t\nmatrix:\n  precision: [fp32, \"amp\\ebf16\"]\n", 3, "matrix.precision[1]", "\\x1b");
  expect_refused("name: t\n\"st\\eeps\": 5\n", 2, "", "\\x1b");  // a key
}

}  // namespace
}  // namespace mpb
