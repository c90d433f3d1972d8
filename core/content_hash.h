// FNV-1a (64-bit) over bytes: a content hash for configuration hashes,
// splitting documents and cache keys, not a cryptographic one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mpb {

// Offset basis and prime from the FNV reference. Continues from `h`.
inline constexpr uint64_t kFnvOffset = 0xCBF29CE484222325ull;
uint64_t fnv1a64(std::string_view bytes, uint64_t h = kFnvOffset);
std::string hex64(uint64_t v);  // 16 lower-case hex digits

}  // namespace mpb
