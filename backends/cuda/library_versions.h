// The CUDA libraries' versions twice over: the headers this build compiled
// against (CUDART_VERSION, CUBLAS_VERSION, CUDNN_VERSION) and the libraries
// the loader actually found (cudaRuntimeGetVersion, cublasLtGetVersion,
// cudnnGetVersion), for the manifest and `runner doctor` (issue 30 item 5).
// Plain C++, like cuda_device.h. Needs no GPU and creates no handle or
// context: these calls only read the loaded libraries. Never throws.
#pragma once

#include <optional>
#include <string>

#include "core/library_version.h"

namespace mpb {

struct HeaderRuntimeVersion {
  LibraryVersion header;                   // what the build compiled against
  std::optional<LibraryVersion> runtime;   // what runs; nullopt: not loaded (why: not_loaded_reason)
  std::string not_loaded_reason;
};

struct CudaLibraryVersions {
  HeaderRuntimeVersion cuda_runtime;            // CUDART_VERSION / cudaRuntimeGetVersion
  std::optional<LibraryVersion> cuda_driver;    // cudaDriverGetVersion: the CUDA version the driver supports
  std::string cuda_driver_problem;              // "no driver installed", or the failed call
  HeaderRuntimeVersion cublaslt;                // CUBLAS_VERSION / cublasLtGetVersion
  std::optional<HeaderRuntimeVersion> cudnn;    // CUDNN_VERSION / cudnnGetVersion; nullopt: built without cuDNN
};

CudaLibraryVersions cuda_library_header_runtime_versions();

}  // namespace mpb
