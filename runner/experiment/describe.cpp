#include "runner/experiment/describe.h"

#include <cstdio>
#include <string>

#include "config/schema.h"
#include "core/memory_tracker.h"
#include "core/precision.h"

namespace mpb {

nlohmann::json vocabulary_json() {
  nlohmann::json memory = nlohmann::json::array();
  for (int c = 0; c < kMemCategoryCount; ++c) memory.push_back(mem_category_name(static_cast<MemCategory>(c)));
  return {{"schema", "mpbench.vocabulary/1"},
          {"precisions", named_precisions()},
          {"memory_categories", memory},
          {"axes", schema::cell_keys()}};
}

int run_describe(int argc, char** argv) {
  // One form only: the vocabulary is for programs, so JSON is the only output.
  const std::string usage = "usage: runner describe --json";
  if (argc == 2 && std::string(argv[1]) == "--json") {
    std::printf("%s\n", vocabulary_json().dump(2).c_str());
    return std::fflush(stdout) == 0 && !std::ferror(stdout) ? 0 : 1;
  }
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf("%s\n  prints the precision names (display order), memory categories and axis keys that "
                "result files use, as JSON (docs/RESULTS.md, manifest.json's vocabulary)\n",
                usage.c_str());
    return 0;
  }
  std::fprintf(stderr, "error: %s\n", usage.c_str());
  return 2;
}

}  // namespace mpb
