// Matrix expansion, for the loader (runner/experiment/config_loader.cpp): what the loader
// parsed out of an experiment file (base, axes, excludes, includes, baseline,
// each value with where it was written) -> the checked cells. Errors are
// ConfigErrors that point at the file.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/schema.h"
#include "runner/experiment/config.h"

namespace mpb {

// A position in the file, 1-based; line 0: no position.
struct Where {
  int line = 0, col = 0;
};

// Where a cell's value of a key came from, for messages about that cell.
struct Origin {
  Where where;
  std::string path;       // dotted path in the file: "matrix.accumulation[1]"
  bool per_cell = false;  // from the matrix or an include (not the base)
};
using Origins = std::map<std::string, Origin>;

// One value a matrix axis or an include sets.
struct Assignment {
  const schema::KeySpec* spec;
  schema::Value value;
  std::string canonical;
  Origin origin;
};

struct Axis {
  std::vector<Assignment> values;
};

struct Include {
  std::vector<Assignment> assignments;
  Origin origin;  // the entry
};

// key=canonical terms that a cell must all match (exclude and baseline entries).
using Pattern = std::vector<std::pair<std::string, std::string>>;

struct MatrixSpec {
  CellConfig base;
  Origins base_origins;  // the base values the file gives
  std::vector<Axis> axes;
  std::vector<Pattern> excludes;
  std::vector<Where> excludes_at;  // each exclude entry's position (for "matches no cell")
  std::vector<Include> includes;
  std::optional<Pattern> baseline;
  Where exclude_at, baseline_at;  // the exclude and baseline keys (start of file: absent)
};

// The Cartesian product of the axes (the first varies slowest; no axes: the one
// cell "base"), minus the cells an exclude matches, then one cell per include;
// then duplicate ids or configurations, the per-cell checks (check_cell_config)
// and the baseline (exactly one match; default: the first cell).
std::vector<Cell> expand_matrix(const std::string& file, const MatrixSpec& spec,
                                const LoadOptions& options);

}  // namespace mpb
