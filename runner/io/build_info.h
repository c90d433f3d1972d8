// What built this runner: the commit and whether the tree had uncommitted
// changes, the build type and compiler flags. Two result sets that differ in
// any of these may differ for that reason alone (compare.py names them).
//
// The full record needs cmake/Provenance.cmake (mpb_add_provenance(mpb_runner)
// in CMakeLists.txt), which refreshes it on every build. Without it, the
// commit is the one CMake saw when it configured (MPB_GIT_COMMIT) and the
// fields only the build can know are null, with the reason in "why".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace mpb {

// The values CMake passes as compile definitions (CMakeLists.txt), "dev" or
// "unknown" for a build without them: one place for the fallbacks.
std::string mpbench_version();
std::string compiler_name();  // "GNU 12.2.0"
std::string yaml_cpp_version();
// {"commit", "dirty": true|false|null, "source", "why"}.
nlohmann::json git_json();
// The commit alone (manifest "git_commit", kept for older readers).
std::string git_commit();
// {"compiler", "type", "cxx_flags", "options", "why", "compiled_with": {what this
// translation unit's predefined macros say: optimized, NDEBUG, fast-math, the target ISA}}.
nlohmann::json build_json();

}  // namespace mpb
