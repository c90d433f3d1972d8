// Header vs runtime versions of the CUDA libraries (issue 30 item 5,
// docs/GPU.md "Which libraries ran"). The runner compiles against one set of
// headers (cuDNN 9.19 in the CUDA 13 toolkit here) and on a GPU machine loads
// whatever libcudnn / libcublasLt the loader finds, often PyTorch's wheel's.
// These are the pure parts: decoding each library's version integer and the
// rule whether a runtime serves code compiled against a header. No CUDA
// headers: tests/core/test_library_version.cpp proves them on the CPU,
// backends/cuda/library_versions.cpp feeds them the integers.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace mpb {

struct LibraryVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  std::string str() const;  // "9.19.0"
};
bool operator==(const LibraryVersion& a, const LibraryVersion& b);
bool operator<(const LibraryVersion& a, const LibraryVersion& b);

// cuDNN's CUDNN_VERSION and cudnnGetVersion(): cuDNN 9 encodes
// major*10000 + minor*100 + patch (cudnn_version.h: 9.19.0 = 91900); cuDNN 8
// and older encoded major*1000 + minor*100 + patch (8.9.7 = 8907). 9.0.0 is
// 90000 in the new form and 8.9.99 at most 8999 in the old, so the value
// says which form it is in. 0 (a shim that could not load its library):
// nullopt, "not loaded".
std::optional<LibraryVersion> decode_cudnn_version(size_t v);
// cuBLAS's CUBLAS_VERSION and cublasLtGetVersion(): major*10000 + minor*100 +
// patch (cublas_api.h of CUDA 12.4 and 13.0: 13.1.0 = 130100). CUDA 11's cuBLAS
// used major*1000 (11.2.1 = 11201); a major is >= 10 in both forms, so values
// below 100000 are the old one. 0: nullopt.
std::optional<LibraryVersion> decode_cublas_version(size_t v);
// CUDART_VERSION, cudaRuntimeGetVersion() and cudaDriverGetVersion():
// major*1000 + minor*10 (13.0 = 13000); patch is always 0. 0 (no driver): nullopt.
std::optional<LibraryVersion> decode_cuda_version(int v);

// How a runtime library relates to the header the code was compiled against.
enum class VersionMatch {
  NotLoaded,      // no runtime version (CPU-only build, library absent or not loadable)
  Same,           // equal, or a newer patch/minor: fine
  RuntimeOlder,   // same major, older minor/patch: the header's newer enums, graphs
                  // or engines may be refused or misread (cuDNN's ABI promise is
                  // runtime >= headers within a major version): a warning
  MajorDiffers,   // another major: no ABI promise at all: an error for that path
};
const char* version_match_name(VersionMatch m);  // "not_loaded", "ok", "runtime_older", "major_differs"

VersionMatch compare_header_runtime(const LibraryVersion& header, const std::optional<LibraryVersion>& runtime);

// The line doctor prints and the manifest records for a pair that is not fine
// ("cuDNN: runtime 9.1.0 is older than the headers 9.19.0 the runner was built
// with: ..."); empty for Same and NotLoaded.
std::string version_mismatch_warning(const std::string& library, const LibraryVersion& header,
                                     const std::optional<LibraryVersion>& runtime);

}  // namespace mpb
