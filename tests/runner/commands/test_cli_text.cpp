// The runner's shared command-line text (runner/commands/cli_text.h): wrapped help,
// "did you mean" for a mistyped flag, NaN refused by the range checks, --version.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "runner/commands/cli_text.h"

namespace mpb {
namespace {

TEST(CliText, WrapWordsKeepsLinesShort) {
  EXPECT_EQ(wrap_words("aa bb cc dd", 5), "aa bb\ncc dd");
  EXPECT_EQ(wrap_words("a  verylongword b", 4), "a\nverylongword\nb");  // a long word stays whole
  EXPECT_EQ(wrap_words("", 10), "");
}

TEST(CliText, HelpLinesFitTheColumns) {
  CLI::App app{"a description long enough to need wrapping: " + std::string(30, 'x') + " and more words after it"};
  use_runner_cli_text(app, "runner");
  std::string unused;
  app.add_option("--long", unused,
                 "an option whose help runs well past a hundred columns when CLI11 prints it on one line, "
                 "as the runner's did before (about 300 characters once)");
  std::istringstream help(app.help());
  for (std::string line; std::getline(help, line);) EXPECT_LE(line.size(), kHelpColumns) << line;
}

TEST(CliText, MistypedFlagGetsASuggestion) {
  CLI::App app{"test"};
  bool dry = false;
  std::string out;
  app.add_flag("--dry-run", dry, "");
  app.add_option("--out", out, "");
  EXPECT_EQ(unknown_option_message(app, {"--dryrun"}), "unknown option '--dryrun'; did you mean '--dry-run'?");
  EXPECT_EQ(unknown_option_message(app, {"--ot=x"}), "unknown option '--ot'; did you mean '--out'?");
  EXPECT_EQ(unknown_option_message(app, {"--zzzzzzzz"}), "unknown option '--zzzzzzzz'");
  EXPECT_EQ(unknown_option_message(app, {"positional"}), "");
}

TEST(CliText, ParseErrorsHaveOnePrefix) {
  CLI::App app{"test"};
  use_runner_cli_text(app, "runner");
  bool dry = false;
  app.add_flag("--dry-run", dry, "");
  const char* argv[] = {"runner", "--dryrun"};
  try {
    app.parse(2, const_cast<char**>(argv));
    FAIL() << "--dryrun was accepted";
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    EXPECT_NE(app.exit(e, out, err), 0);
    EXPECT_EQ(err.str(), "error: unknown option '--dryrun'; did you mean '--dry-run'?\n"
                         "run 'runner --help' for the options\n");
  }
}

TEST(CliText, FiniteRangeRefusesNanAndInfinity) {
  const CLI::Validator range = finite_range(0.1, 1e7);
  for (std::string bad : {"nan", "NaN", "inf", "-inf", "0.05", "1e8", "abc", "5x", ""}) {
    EXPECT_NE(range(bad), "") << bad;
  }
  for (std::string good : {"0.1", "60", "1e7"}) EXPECT_EQ(range(good), "") << good;
}

TEST(CliText, VersionNamesTheBuild) {
  const std::string v = version_text();
  EXPECT_EQ(v.rfind("runner (mpbench) ", 0), 0u) << v;
  for (const char* part : {"\ncommit ", "\nbuild ", "\nlibraries: ", "onednn"}) {
    EXPECT_NE(v.find(part), std::string::npos) << part << " missing from:\n" << v;
  }
}

}  // namespace
}  // namespace mpb
