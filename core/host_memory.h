// The host's available memory (MemAvailable in /proc/meminfo): what the CPU
// device has free, and what host-side data must fit in on any device.
#pragma once

#include <cstddef>
#include <optional>

namespace mpb {

// Bytes the kernel estimates can be allocated without swapping; nullopt where
// /proc/meminfo can't be read (not Linux).
std::optional<size_t> host_available_memory_bytes();

}  // namespace mpb
