#include "core/host_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace mpb {

std::optional<size_t> host_available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name, unit;
    size_t kib = 0;
    if (fields >> name >> kib >> unit && name == "MemAvailable:" && unit == "kB") return kib * 1024;
  }
  return std::nullopt;
}

}  // namespace mpb
