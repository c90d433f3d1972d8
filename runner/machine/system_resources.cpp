#include "runner/machine/system_resources.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "runner/io/text_file.h"

namespace fs = std::filesystem;

namespace mpb {

std::optional<uint64_t> parse_meminfo_bytes(const std::string& meminfo, const std::string& key) {
  std::istringstream in(meminfo);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream f(line.substr(key.size() + 1));
    uint64_t value = 0;
    std::string unit;
    if (!(f >> value)) return std::nullopt;
    f >> unit;
    if (unit.empty()) return value;       // a count (HugePages_Total), not a size
    if (unit == "kB") return value * 1024;  // the kernel's "kB" is KiB
    return std::nullopt;
  }
  return std::nullopt;
}

MemoryInfo read_memory_info(const std::string& meminfo_path) {
  MemoryInfo m;
  std::string err;
  const std::optional<std::string> text = read_text_file(meminfo_path, &err);
  if (!text) {
    m.why = err;
    return m;
  }
  m.available_bytes = parse_meminfo_bytes(*text, "MemAvailable");
  m.total_bytes = parse_meminfo_bytes(*text, "MemTotal");
  if (!m.available_bytes) m.why = "no MemAvailable line in " + meminfo_path + " (a kernel older than 3.14?)";
  return m;
}

DiskSpace free_disk_space(const std::string& dir) {
  DiskSpace d;
  d.dir = dir;
  std::error_code ec;
  fs::path p = fs::absolute(dir.empty() ? "." : dir, ec);
  if (ec) {
    d.why = dir + ": " + ec.message();
    return d;
  }
  while (!fs::exists(p, ec) && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
  d.checked = p.string();
  struct statvfs s {};
  if (statvfs(p.c_str(), &s) != 0) {
    d.why = "statvfs(" + d.checked + "): " + std::strerror(errno);
    return d;
  }
  d.free_bytes = uint64_t(s.f_bavail) * s.f_frsize;
  d.total_bytes = uint64_t(s.f_blocks) * s.f_frsize;
  return d;
}

}  // namespace mpb
