// The host's available memory: what the CPU device has free, and what
// host-side data must fit in on any device. The smallest of three limits,
// each where the machine has it (issue 43 item 17: MemAvailable alone let a
// 6 GiB cell start under `ulimit -v 3G`, or in a container with memory.max
// below the machine's memory, and fail "out of memory" mid-run):
//   MemAvailable in /proc/meminfo (what the kernel can give without swapping);
//   RLIMIT_AS (ulimit -v) less the address space the process maps already;
//   the cgroup's memory.max less its memory.current (v2; v1's
//   memory.limit_in_bytes and memory.usage_in_bytes).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace mpb {

struct HostMemory {
  std::optional<size_t> available;  // nullopt where no limit can be read (not Linux)
  std::string limited_by;           // which limit gave it: "MemAvailable", "RLIMIT_AS (ulimit -v)", "cgroup memory.max"
};
HostMemory host_memory();

// Bytes the process can still allocate (host_memory().available).
std::optional<size_t> host_available_memory_bytes();

// The pieces, pure, for the tests.
// The smallest of the limits present; limited_by names it.
HostMemory smallest_limit(std::optional<size_t> meminfo_available, std::optional<size_t> rlimit_headroom,
                          std::optional<size_t> cgroup_headroom);
// A "Key:   123 kB" line of /proc/meminfo or /proc/self/status, in bytes.
std::optional<size_t> parse_kib_line(const std::string& text, const std::string& key);
// The cgroup v2 path ("0::/a/b" line) of /proc/self/cgroup; nullopt without one.
std::optional<std::string> parse_cgroup_v2_path(const std::string& proc_self_cgroup);
// The v1 memory controller's path ("N:memory:/a/b" or "N:...,memory,...:/a/b").
std::optional<std::string> parse_cgroup_v1_memory_path(const std::string& proc_self_cgroup);
// limit - usage from the two files' text: nullopt for "max" (no limit), a v1
// limit of 2^63 rounded to a page (its "no limit"), or text that is not a number.
std::optional<size_t> cgroup_headroom(const std::string& limit_text, const std::string& usage_text);

}  // namespace mpb
