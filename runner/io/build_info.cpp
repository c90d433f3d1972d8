#include "runner/io/build_info.h"

#include <string>

#ifdef MPB_HAVE_PROVENANCE
#include "mpb_provenance.h"  // written at build time by cmake/WriteProvenance.cmake
#endif

#ifndef MPB_GIT_COMMIT
#define MPB_GIT_COMMIT "unknown"
#endif
#ifndef MPB_COMPILER
#define MPB_COMPILER "unknown"
#endif
#ifndef MPB_VERSION
#define MPB_VERSION "dev"
#endif
#ifndef MPB_YAML_CPP_VERSION
#define MPB_YAML_CPP_VERSION "unknown"
#endif

namespace mpb {

namespace {
constexpr const char* kNoProvenance =
    "this build does not record it: CMakeLists.txt does not call mpb_add_provenance (cmake/Provenance.cmake)";
}  // namespace

std::string mpbench_version() { return MPB_VERSION; }
std::string compiler_name() { return MPB_COMPILER; }
std::string yaml_cpp_version() { return MPB_YAML_CPP_VERSION; }

std::string git_commit() {
#ifdef MPB_HAVE_PROVENANCE
  return MPB_BUILD_GIT_COMMIT;
#else
  return MPB_GIT_COMMIT;
#endif
}

nlohmann::json git_json() {
  nlohmann::json g;
  g["commit"] = git_commit();
#ifdef MPB_HAVE_PROVENANCE
  g["dirty"] = MPB_BUILD_GIT_DIRTY < 0 ? nlohmann::json(nullptr) : nlohmann::json(MPB_BUILD_GIT_DIRTY == 1);
  g["source"] = "build";
  const std::string why = MPB_BUILD_GIT_WHY;
  g["why"] = why.empty() ? nlohmann::json(nullptr) : nlohmann::json(why);
#else
  g["dirty"] = nullptr;
  g["source"] = "configure";  // the commit CMake saw when it last configured, not necessarily the one built
  g["why"] = std::string("dirty: ") + kNoProvenance;
#endif
  return g;
}

nlohmann::json build_json() {
  nlohmann::json b;
  b["compiler"] = MPB_COMPILER;
#ifdef MPB_HAVE_PROVENANCE
  b["type"] = MPB_BUILD_TYPE;
  b["cxx_flags"] = MPB_BUILD_CXX_FLAGS;
  b["options"] = MPB_BUILD_OPTIONS;
  b["why"] = nullptr;
#else
  b["type"] = nullptr;
  b["cxx_flags"] = nullptr;
  b["options"] = nullptr;
  b["why"] = std::string("type, cxx_flags, options: ") + kNoProvenance;
#endif
  // Facts the compiler states about this file's own flags (the project sets
  // the same flags on every C++ target: cmake/Warnings.cmake), available on
  // every build.
  nlohmann::json c;
#ifdef __OPTIMIZE__
  c["optimized"] = true;
#else
  c["optimized"] = false;
#endif
#ifdef NDEBUG
  c["ndebug"] = true;
#else
  c["ndebug"] = false;
#endif
#ifdef __FAST_MATH__
  c["fast_math"] = true;
#else
  c["fast_math"] = false;
#endif
  nlohmann::json isa = nlohmann::json::array();
#ifdef __AVX2__
  isa.push_back("avx2");
#endif
#ifdef __FMA__
  isa.push_back("fma");
#endif
#ifdef __F16C__
  isa.push_back("f16c");
#endif
#ifdef __AVX512F__
  isa.push_back("avx512f");
#endif
#ifdef __AVX512BF16__
  isa.push_back("avx512bf16");
#endif
#ifdef __AVX512FP16__
  isa.push_back("avx512fp16");
#endif
#ifdef __AMX_BF16__
  isa.push_back("amx_bf16");
#endif
  c["isa"] = isa;
  b["compiled_with"] = c;
  return b;
}

}  // namespace mpb
