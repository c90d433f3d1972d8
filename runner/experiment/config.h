// Experiment files: the YAML loader (runner/experiment/config_loader.cpp) and operations on
// the expanded cells (runner/experiment/matrix.cpp: the matrix expansion, slugs, --filter,
// config hashes). The typed configuration they produce is config/cell_config.h;
// the schema that turns strings into it and back is config/schema.h.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "config/cell_config.h"
#include "config/config_errors.h"
#include "config/schema.h"
#include "runner/experiment/config_limits.h"

namespace mpb {

struct LoadOptions {
  // false: accept values that unsupported_reason() rejects. For tests, and for whoever
  // implements one of those features before removing its row from the table.
  bool reject_unsupported = true;
  // The most cells the matrix's Cartesian product may have (before excludes):
  // kMaxCells (runner/experiment/config_limits.h). The fuzz target (tests/fuzz/fuzz_config.cpp)
  // lowers it, to spend its time on the loader's logic rather than on expanding big,
  // valid matrices.
  size_t max_cells = kMaxCells;
  // false: don't look at the files a configuration names (data.path); for tests
  // of the configuration alone (check_cell_files, train/cell_limits.h).
  bool check_files = true;
};

// Loads, validates and expands. Throws ConfigError.
ExperimentConfig load_experiment(const std::string& path);
ExperimentConfig load_experiment(const std::string& path, const LoadOptions& options);
// Same, from YAML text; `path` is only used in messages.
ExperimentConfig load_experiment_from_string(const std::string& yaml_text, const std::string& path);
ExperimentConfig load_experiment_from_string(const std::string& yaml_text, const std::string& path,
                                             const LoadOptions& options);

// Parses `text` as a value of `key` (validated like a YAML value; unsupported_reason is
// not applied) and returns its canonical string ("1e-3" -> "0.001", "false" -> "off",
// for inject_nonfinite "[9, 5]" -> "[5,9]").
// Throws std::invalid_argument for an unknown key or an invalid value.
std::string canonical_value_string(const std::string& key, const std::string& text);

// The value a filter, exclude or baseline compares for `key`: the cell's axis value when
// `key` is one of its axes, else config_value_string(cell.config, key).
std::string cell_value_string(const Cell& cell, const std::string& key);

// The file name of a cell's results (docs/CONFIG.md): the id with ',' -> "__" and
// [^A-Za-z0-9_.=-] -> '_', plus "-" and 8 hex digits of the id's hash when that
// spelling could be another id's too or is longer than kSlugMaxChars. Distinct
// ids get distinct slugs (the loader rejects the astronomically rare hash clash).
inline constexpr size_t kSlugMaxChars = 120;
std::string cell_slug(const std::string& id);

// --filter: comma-separated `key=value` terms, all must match the cell's axes
// (or, for keys that are not axes, its resolved config). Throws std::invalid_argument
// on a malformed expression.
bool cell_matches_filter(const Cell& cell, const std::string& filter);

// Why `filter` (which matched none of `cells`) matches nothing, for the error: the first
// term whose value no cell has, with that key's values and a "did you mean", or that the
// values exist only apart. Throws like cell_matches_filter on a malformed filter.
std::string filter_no_match_reason(const std::vector<Cell>& cells, const std::string& filter);

// FNV-1a 64 of the canonical (sorted-key) JSON dump, 16 hex digits.
std::string config_hash(const nlohmann::json& canonical);

}  // namespace mpb
