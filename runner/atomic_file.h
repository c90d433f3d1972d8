// Writes a file so that readers see either the old content or the new one,
// never a partial file: write <path>.tmp, flush it to disk, rename over <path>.
#pragma once

#include <string>

namespace mpb {

void write_file_atomic(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);  // throws std::runtime_error

}  // namespace mpb
