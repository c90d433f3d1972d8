// Memory and disk a run needs: MemAvailable from /proc/meminfo (what can be
// allocated without swapping; MemFree undercounts reclaimable cache) and the
// free space of the file system results are written to (statvfs).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mpb {

// A "Key:   123 kB" line of /proc/meminfo text, in bytes; nullopt when absent.
std::optional<uint64_t> parse_meminfo_bytes(const std::string& meminfo, const std::string& key);

struct MemoryInfo {
  std::optional<uint64_t> available_bytes, total_bytes;
  std::string why;  // why available_bytes is missing
};
MemoryInfo read_memory_info(const std::string& meminfo_path = "/proc/meminfo");

struct DiskSpace {
  std::string dir;       // the directory asked about
  std::string checked;   // the directory statvfs looked at: `dir`, or its nearest existing ancestor
  std::optional<uint64_t> free_bytes, total_bytes;  // free: what an unprivileged user may write (f_bavail)
  std::string why;       // why free_bytes is missing
};
// `dir` need not exist yet (the runner creates results/ on its first run):
// then its nearest existing ancestor, on whose file system it will be made.
DiskSpace free_disk_space(const std::string& dir);

}  // namespace mpb
