// Header vs runtime versions of the CUDA libraries as the manifest and
// `runner doctor` record them (issue 30 item 5; docs/RESULTS.md
// "libraries.header_vs_runtime"). The JSON and the warnings are made from a
// CudaLibraryVersions (backends/cuda/library_versions.h), so tests feed any
// pair; cuda_library_check() reads this process's libraries, or says "not
// loaded" in a build without CUDA.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/cuda/library_versions.h"

namespace mpb {

struct CudaLibraryCheck {
  // {"cuda_runtime": {"header", "runtime", "status"[, "why"]}, "cuda_driver": {"runtime"[, "why"]},
  //  "cublasLt": {...}, "cudnn": {...}}; runtime "not loaded" where nothing answered.
  nlohmann::json versions;
  std::vector<std::string> warnings;  // runtime older than its headers (same major)
  std::vector<std::string> errors;    // another major: that library's path is not to be trusted
};

CudaLibraryCheck check_library_versions(const CudaLibraryVersions& v);

// This process's libraries (a CUDA build), or every entry "not loaded" with
// why: "built without CUDA". Never throws; creates no handle.
CudaLibraryCheck cuda_library_check();

}  // namespace mpb
