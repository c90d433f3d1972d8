#include "core/content_hash.h"

namespace mpb {

uint64_t fnv1a64(std::string_view bytes, uint64_t h) {
  for (const char c : bytes) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

std::string hex64(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = digits[v & 0xF];
  return s;
}

}  // namespace mpb
