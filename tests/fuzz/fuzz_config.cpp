// libFuzzer target for the experiment-file loader (scripts/fuzz_config.sh,
// docs/TESTING.md). The input is the text of an experiment file, loaded with the
// loader's in-memory entry point (load_experiment_from_string: the same code as
// load_experiment after the file is read), as the runner loads it; and when that
// fails with "not supported yet", again with reject_unsupported off (the path the
// tests use), which reaches the matrix expansion and per-cell checks that the table
// of unsupported values stops early. (Otherwise reject_unsupported changes nothing.)
// Both with max_cells lowered from 10,000 (mpb::kMaxCells) to 256: a 400-byte file can ask for
// 10,000 valid cells, which take minutes and gigabytes to expand under the
// sanitizers; the same code runs for 256 cells, and the limit's error is reached.
//
// A finding (abort, so libFuzzer saves the input) is
//   - a crash or a sanitizer report (ASan, UBSan: the build sets both);
//   - an exception other than mpb::ConfigError leaving the loader;
//   - a ConfigError without a position: docs/CONFIG.md promises file:line:col for
//     every error, and from text the only position-less errors, "cannot open/read
//     the file", cannot happen; or whose what() does not start with
//     "fuzz.yaml:LINE:COL: " for its own line and column;
//   - a loaded experiment whose cells break the loader's promises: no cells,
//     not exactly one baseline, two cells with one id or one slug, or a cell
//     that `--filter <its own id>` does not select (ids are canonical, and so
//     are filter values: docs/CONFIG.md).
// Its first finding, yaml-cpp 0.7's LoadAll looping forever on a stray ',' (yaml-cpp
// issue 1040), is guarded against in the loader (runner/io/yaml_documents.h); the two
// inputs that found it are in the corpus (yaml_cpp_1040_*.yaml).
//
// The same function runs without libFuzzer over tests/fuzz/corpus as the CTest
// test fuzz_config_corpus (tests/fuzz/replay_main.cpp), so the committed corpus
// is checked in every build, the sanitizer build included.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

#include "config/config_errors.h"
#include "runner/experiment/config.h"

namespace {

const char* const kFile = "fuzz.yaml";
const size_t kFuzzMaxCells = 256;

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz_config: FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

void check_error(const mpb::ConfigError& e) {
  if (e.file() != kFile) finding("ConfigError names file '" + e.file() + "': " + e.what());
  if (e.line() < 1 || e.col() < 1) {
    finding("ConfigError without a line and column (" + std::to_string(e.line()) + ":" +
            std::to_string(e.col()) + "): " + e.what());
  }
  const std::string prefix = std::string(kFile) + ":" + std::to_string(e.line()) + ":" +
                             std::to_string(e.col()) + ": ";
  if (std::string(e.what()).rfind(prefix, 0) != 0) {
    finding("ConfigError message does not start with '" + prefix + "': " + e.what());
  }
}

void check_experiment(const mpb::ExperimentConfig& experiment) {
  if (experiment.cells.empty()) finding("loaded with no cells");
  std::set<std::string> ids, slugs;
  int baselines = 0;
  for (const auto& cell : experiment.cells) {
    baselines += cell.is_baseline ? 1 : 0;
    if (!ids.insert(cell.id).second) finding("two cells with id '" + cell.id + "'");
    if (!slugs.insert(cell.slug).second) finding("two cells with slug '" + cell.slug + "'");
    if (cell.slug != mpb::cell_slug(cell.id)) finding("cell '" + cell.id + "': slug differs");
    if (cell.axes.empty()) continue;  // the one cell "base" of a file without a matrix
    try {
      if (!mpb::cell_matches_filter(cell, cell.id)) {
        finding("cell '" + cell.id + "' is not selected by --filter '" + cell.id + "'");
      }
    } catch (const std::exception& e) {
      finding("--filter '" + cell.id + "' (a cell's own id) throws: " + e.what());
    }
  }
  if (baselines != 1) finding(std::to_string(baselines) + " baseline cells");
}

// true when the load failed because a value is not supported yet.
bool load(const std::string& text, bool reject_unsupported) {
  mpb::LoadOptions options;
  options.reject_unsupported = reject_unsupported;
  options.max_cells = kFuzzMaxCells;
  try {
    check_experiment(mpb::load_experiment_from_string(text, kFile, options));
  } catch (const mpb::ConfigError& e) {
    check_error(e);
    return e.message().find("not supported yet") != std::string::npos;
  } catch (const std::exception& e) {
    finding(std::string("exception ") + typeid(e).name() + " (not a ConfigError): " + e.what());
  } catch (...) {
    finding("an exception that is not a std::exception");
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (load(text, true)) load(text, false);
  return 0;
}
