// Shared by the loader and matrix tests: load YAML text as if it were the file
// kFile, and check where a ConfigError points and what it says.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runner/experiment/config.h"

namespace mpb {
namespace config_test {

inline const char* const kFile = "experiments/x.yaml";

inline ExperimentConfig load(const std::string& yaml, const LoadOptions& options = {}) {
  return load_experiment_from_string(yaml, kFile, options);
}

inline LoadOptions allow_unsupported() {
  LoadOptions options;
  options.reject_unsupported = false;
  return options;
}

// Loads `yaml`, which must fail, and returns the error.
inline ConfigError error_of(const std::string& yaml, const LoadOptions& options = {}) {
  try {
    load(yaml, options);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a ConfigError for:\n" << yaml;
  return ConfigError("", 0, 0, "", "");
}

// Checks where an error points: the file kFile, a 1-based line and column, a
// dotted key.
inline void expect_points_at(const ConfigError& e, int line, int col, const std::string& key) {
  EXPECT_EQ(e.file(), kFile) << e.what();
  EXPECT_EQ(e.line(), line) << e.what();
  EXPECT_EQ(e.col(), col) << e.what();
  EXPECT_EQ(e.key(), key) << e.what();
}

// Checks where the error from loading `yaml` points (expect_points_at) and
// that its message contains `part`.
inline void expect_error(const std::string& yaml, int line, int col, const std::string& key,
                         const std::string& part, const LoadOptions& options = {}) {
  const ConfigError e = error_of(yaml, options);
  expect_points_at(e, line, col, key);
  EXPECT_NE(e.message().find(part), std::string::npos)
      << "message: " << e.message() << "\nexpected to contain: " << part;
}

// One expect_error, as a row of a table.
struct ErrorCase {
  std::string yaml;
  int line, col;
  std::string key, part;
};

inline void expect_errors(const std::vector<ErrorCase>& cases, const LoadOptions& options = {}) {
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.yaml);
    expect_error(c.yaml, c.line, c.col, c.key, c.part, options);
  }
}

// Every cell of a loaded experiment, as the runner's per-cell checks take them.
inline std::vector<const Cell*> all_cells(const ExperimentConfig& e) {
  std::vector<const Cell*> out;
  for (const Cell& c : e.cells) out.push_back(&c);
  return out;
}

}  // namespace config_test
}  // namespace mpb
