#include "core/library_version.h"

#include <tuple>

namespace mpb {

std::string LibraryVersion::str() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

bool operator==(const LibraryVersion& a, const LibraryVersion& b) {
  return std::tie(a.major, a.minor, a.patch) == std::tie(b.major, b.minor, b.patch);
}

bool operator<(const LibraryVersion& a, const LibraryVersion& b) {
  return std::tie(a.major, a.minor, a.patch) < std::tie(b.major, b.minor, b.patch);
}

std::optional<LibraryVersion> decode_cudnn_version(size_t v) {
  if (v == 0) return std::nullopt;
  const size_t major_unit = v >= 90000 ? 10000 : 1000;  // cuDNN 9's form from 9.0.0 = 90000 on
  return LibraryVersion{int(v / major_unit), int((v % major_unit) / 100), int(v % 100)};
}

std::optional<LibraryVersion> decode_cublas_version(size_t v) {
  if (v == 0) return std::nullopt;
  const size_t major_unit = v >= 100000 ? 10000 : 1000;  // CUDA 11's cuBLAS: 11201 = 11.2.1
  return LibraryVersion{int(v / major_unit), int((v % major_unit) / 100), int(v % 100)};
}

std::optional<LibraryVersion> decode_cuda_version(int v) {
  if (v <= 0) return std::nullopt;
  return LibraryVersion{v / 1000, (v % 1000) / 10, 0};
}

const char* version_match_name(VersionMatch m) {
  switch (m) {
    case VersionMatch::NotLoaded: return "not_loaded";
    case VersionMatch::Same: return "ok";
    case VersionMatch::RuntimeOlder: return "runtime_older";
    case VersionMatch::MajorDiffers: return "major_differs";
  }
  return "?";
}

VersionMatch compare_header_runtime(const LibraryVersion& header, const std::optional<LibraryVersion>& runtime) {
  if (!runtime) return VersionMatch::NotLoaded;
  if (runtime->major != header.major) return VersionMatch::MajorDiffers;
  if (*runtime < header) return VersionMatch::RuntimeOlder;
  return VersionMatch::Same;
}

std::string version_mismatch_warning(const std::string& library, const LibraryVersion& header,
                                     const std::optional<LibraryVersion>& runtime) {
  switch (compare_header_runtime(header, runtime)) {
    case VersionMatch::NotLoaded:
    case VersionMatch::Same: return "";
    case VersionMatch::RuntimeOlder:
      return library + ": runtime " + runtime->str() + " is older than the headers " + header.str() +
             " the runner was built with (the ABI promise is runtime >= headers within a major version: "
             "newer features may be refused; put a newer library first on LD_LIBRARY_PATH)";
    case VersionMatch::MajorDiffers:
      return library + ": runtime " + runtime->str() + " has another major version than the headers " +
             header.str() + " the runner was built with (no ABI promise across majors: its path is not to be "
             "trusted; install a " + std::to_string(header.major) + ".x library)";
  }
  return "";
}

}  // namespace mpb
