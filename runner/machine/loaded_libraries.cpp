#include "runner/machine/loaded_libraries.h"

#include <fstream>
#include <set>
#include <sstream>

namespace mpb {

std::vector<std::string> mapped_library_paths(const std::string& maps_text, const std::vector<std::string>& prefixes) {
  std::set<std::string> found;
  std::istringstream in(maps_text);
  for (std::string line; std::getline(in, line);) {
    // address perms offset dev inode, then the path (absent for anonymous maps).
    std::istringstream fields(line);
    std::string skip;
    for (int i = 0; i < 5 && fields >> skip; ++i) {
    }
    std::string path;
    std::getline(fields >> std::ws, path);
    if (path.empty() || path.front() != '/') continue;  // anonymous, [heap], [stack], [vdso]
    const std::string file = path.substr(0, path.find(" (deleted)"));
    const std::string name = file.substr(file.rfind('/') + 1);
    for (const std::string& p : prefixes)
      if (name.compare(0, p.size(), p) == 0) found.insert(path);
  }
  return {found.begin(), found.end()};
}

std::vector<std::string> loaded_cuda_libraries() {
  std::ifstream in("/proc/self/maps");
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  return mapped_library_paths(text.str(), cuda_library_prefixes());
}

}  // namespace mpb
