// The key of a cached library plan (a cuBLASLt GEMM plan, a cuDNN SDPA graph):
// a fixed array of 64-bit words that holds everything the plan depends on,
// compared word for word and hashed with FNV-1a. One key type for every
// cache, so none can forget a field in its hash or its equality.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace mpb::cuda {

template <size_t N>
using PlanKeyWords = std::array<int64_t, N>;

struct PlanKeyHash {
  template <size_t N>
  size_t operator()(const PlanKeyWords<N>& k) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
    for (int64_t v : k) {
      h ^= static_cast<uint64_t>(v);
      h *= 1099511628211ull;
    }
    return static_cast<size_t>(h);
  }
};

}  // namespace mpb::cuda
