// Which copies of the CUDA libraries this process mapped: the paths in
// /proc/self/maps (issue 30 item 8). The version a library reports does not
// say where it came from; a toolkit's libcudnn and a PyTorch wheel's can both
// be 9.x. manifest.libraries.loaded records them; bench/torch_library_env.py
// reads the same thing for PyTorch's process.
#pragma once

#include <string>
#include <vector>

namespace mpb {

// The libraries whose copy decides a speed question, and the runtime beside them.
inline const std::vector<std::string>& cuda_library_prefixes() {
  static const std::vector<std::string> p{"libcudnn", "libcublas", "libcudart", "libnvrtc"};
  return p;
}

// The paths in /proc/<pid>/maps text whose file name starts with one of
// `prefixes`: sorted, each once (a library maps several segments). A path may
// hold spaces; the kernel's " (deleted)" suffix stays.
std::vector<std::string> mapped_library_paths(const std::string& maps_text, const std::vector<std::string>& prefixes);

// mapped_library_paths of this process with cuda_library_prefixes(); empty
// where /proc/self/maps cannot be read.
std::vector<std::string> loaded_cuda_libraries();

}  // namespace mpb
