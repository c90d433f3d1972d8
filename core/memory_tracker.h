// Current and peak bytes per memory category. Every backend allocates through
// one of these, so "peak activation memory" means the same thing on CPU and GPU.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace mpb {

enum class MemCategory : uint8_t { Params, Grads, Optimizer, Activations, Workspace };
constexpr int kMemCategoryCount = 5;
const char* mem_category_name(MemCategory c);  // "params", "grads", "optimizer", ...

struct MemorySnapshot {
  std::array<size_t, kMemCategoryCount> current{};
  std::array<size_t, kMemCategoryCount> peak{};  // per-category peaks (need not coincide in time)
  size_t current_total = 0;
  size_t peak_total = 0;  // peak of the sum, not the sum of peaks
  int64_t allocations = 0;  // on_alloc calls so far (a timed step must make none)
};

class MemoryTracker {
 public:
  void on_alloc(MemCategory c, size_t bytes);
  void on_free(MemCategory c, size_t bytes);
  // Starts a new measurement window: peaks restart from the current usage.
  void reset_peaks();
  MemorySnapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  MemorySnapshot s_;
};

}  // namespace mpb
