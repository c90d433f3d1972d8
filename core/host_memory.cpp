#include "core/host_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>

namespace mpb {

namespace {

std::optional<std::string> read_small_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<uint64_t> parse_unsigned(const std::string& text) {
  std::istringstream in(text);
  uint64_t value = 0;
  if (!(in >> value)) return std::nullopt;
  return value;
}

// RLIMIT_AS's soft limit less the process's mapped address space (VmSize).
std::optional<size_t> rlimit_headroom() {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  const std::optional<std::string> status = read_small_file("/proc/self/status");
  const std::optional<size_t> mapped = status ? parse_kib_line(*status, "VmSize") : std::nullopt;
  if (!mapped) return std::nullopt;
  return limit.rlim_cur > *mapped ? size_t(limit.rlim_cur - *mapped) : size_t(0);
}

std::optional<size_t> cgroup_headroom_here() {
  const std::optional<std::string> cgroup = read_small_file("/proc/self/cgroup");
  if (!cgroup) return std::nullopt;
  if (const std::optional<std::string> v2 = parse_cgroup_v2_path(*cgroup)) {
    const std::string dir = "/sys/fs/cgroup" + (*v2 == "/" ? std::string() : *v2);
    const std::optional<std::string> max = read_small_file(dir + "/memory.max");
    const std::optional<std::string> current = read_small_file(dir + "/memory.current");
    if (max && current) return cgroup_headroom(*max, *current);
  }
  if (const std::optional<std::string> v1 = parse_cgroup_v1_memory_path(*cgroup)) {
    const std::string dir = "/sys/fs/cgroup/memory" + (*v1 == "/" ? std::string() : *v1);
    const std::optional<std::string> limit = read_small_file(dir + "/memory.limit_in_bytes");
    const std::optional<std::string> usage = read_small_file(dir + "/memory.usage_in_bytes");
    if (limit && usage) return cgroup_headroom(*limit, *usage);
  }
  return std::nullopt;
}

}  // namespace

std::optional<size_t> parse_kib_line(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string name, unit;
    size_t kib = 0;
    if (fields >> name >> kib >> unit && name == key + ":" && unit == "kB") return kib * 1024;
  }
  return std::nullopt;
}

std::optional<std::string> parse_cgroup_v2_path(const std::string& proc_self_cgroup) {
  std::istringstream in(proc_self_cgroup);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return std::nullopt;
}

std::optional<std::string> parse_cgroup_v1_memory_path(const std::string& proc_self_cgroup) {
  std::istringstream in(proc_self_cgroup);
  for (std::string line; std::getline(in, line);) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::istringstream controllers(line.substr(first + 1, second - first - 1));
    for (std::string c; std::getline(controllers, c, ',');)
      if (c == "memory") return line.substr(second + 1);
  }
  return std::nullopt;
}

std::optional<size_t> cgroup_headroom(const std::string& limit_text, const std::string& usage_text) {
  const std::optional<uint64_t> limit = parse_unsigned(limit_text), usage = parse_unsigned(usage_text);
  // v2 writes "max"; v1 writes 2^63 - 1 rounded down to a page for "no limit".
  if (!limit || !usage || *limit >= (uint64_t(1) << 62)) return std::nullopt;
  return *limit > *usage ? size_t(*limit - *usage) : size_t(0);
}

HostMemory smallest_limit(std::optional<size_t> meminfo_available, std::optional<size_t> rlimit,
                          std::optional<size_t> cgroup) {
  HostMemory m;
  const auto consider = [&](std::optional<size_t> bytes, const char* name) {
    if (bytes && (!m.available || *bytes < *m.available)) m.available = bytes, m.limited_by = name;
  };
  consider(meminfo_available, "MemAvailable");
  consider(rlimit, "RLIMIT_AS (ulimit -v)");
  consider(cgroup, "cgroup memory.max");
  return m;
}

HostMemory host_memory() {
  const std::optional<std::string> meminfo = read_small_file("/proc/meminfo");
  return smallest_limit(meminfo ? parse_kib_line(*meminfo, "MemAvailable") : std::nullopt, rlimit_headroom(),
                        cgroup_headroom_here());
}

std::optional<size_t> host_available_memory_bytes() { return host_memory().available; }

}  // namespace mpb
