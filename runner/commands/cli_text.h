// The text every runner command shares on its command line: help wrapped to
// kHelpColumns, one "error: " prefix for a parse error with "did you mean" for a
// mistyped flag, the subcommands' list and `runner --version`. Each command keeps
// its own CLI::App (runner/main.cpp, doctor, selftest, merge, describe) and calls
// use_runner_cli_text on it.
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace mpb {

inline constexpr std::size_t kHelpColumns = 100;

// `text` broken at spaces into lines of at most `width` characters (a word
// longer than that stays whole), joined by '\n'.
std::string wrap_words(const std::string& text, std::size_t width);

// The runner's help layout and failure message on `app`: descriptions wrapped to
// kHelpColumns; a parse error printed as "error: <what> (did you mean --x?)" and
// "run '<command> --help' for the options".
void use_runner_cli_text(CLI::App& app, const std::string& command);

// A number in [lo, hi], for CLI11's check(): unlike CLI::Range it refuses NaN (every
// comparison with NaN is false, so a NaN limit once disabled the cell timeout silently)
// and the infinities.
CLI::Validator finite_range(double lo, double hi);

// "unknown option '--dryrun'; did you mean '--dry-run'?" for each argument CLI11
// did not expect, else an empty string: the flags `app` has are the candidates.
std::string unknown_option_message(const CLI::App& app, const std::vector<std::string>& unexpected);

// The subcommands `runner` dispatches before its own parser, for --help's footer and
// for "did you mean" when the first argument names neither a file nor a subcommand.
struct Subcommand {
  const char* name;
  const char* summary;
};
const std::vector<Subcommand>& runner_subcommands();
std::string subcommands_help();

// `runner --version`: mpbench's version, the commit (and whether the tree was dirty),
// the build type and compiler, and the libraries built in (CUDA, cuDNN, oneDNN, ...).
std::string version_text();

}  // namespace mpb
