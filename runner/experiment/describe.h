// The words result files use, for the scripts that read them: precision
// names in display order, memory categories in stacking order, the per-cell
// keys a matrix may vary (its axes). Written into manifest.json as
// `vocabulary` and printed by `runner describe --json` (docs/RESULTS.md), so
// the Python side reads them instead of restating them.
#pragma once

#include <nlohmann/json.hpp>

namespace mpb {

// {"schema": "mpbench.vocabulary/1", "precisions": [...], "memory_categories": [...], "axes": [...]}
nlohmann::json vocabulary_json();

// runner describe --json: prints vocabulary_json() to stdout; exit 0, 2 on a usage error.
int run_describe(int argc, char** argv);

}  // namespace mpb
