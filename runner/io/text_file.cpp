#include "runner/io/text_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace mpb {

std::optional<std::string> read_text_file(const std::string& path, std::string* error) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (error) *error = path + ": " + (errno ? std::strerror(errno) : "cannot open");
    return std::nullopt;
  }
  std::ostringstream s;
  s << in.rdbuf();
  // /proc and /sys files report read errors (EIO, EACCES on some sysfs
  // attributes) only when read, not when opened.
  if (in.bad()) {
    if (error) *error = path + ": read failed" + (errno ? std::string(": ") + std::strerror(errno) : "");
    return std::nullopt;
  }
  return s.str();
}

}  // namespace mpb
