#include "core/memory_tracker.h"

#include <algorithm>
#include <stdexcept>

namespace mpb {

const char* mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::Params: return "params";
    case MemCategory::Grads: return "grads";
    case MemCategory::Optimizer: return "optimizer";
    case MemCategory::Activations: return "activations";
    case MemCategory::Workspace: return "workspace";
  }
  return "?";
}

void MemoryTracker::on_alloc(MemCategory c, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto i = static_cast<size_t>(c);
  s_.current[i] += bytes;
  s_.current_total += bytes;
  ++s_.allocations;
  s_.peak[i] = std::max(s_.peak[i], s_.current[i]);
  s_.peak_total = std::max(s_.peak_total, s_.current_total);
}

void MemoryTracker::on_free(MemCategory c, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto i = static_cast<size_t>(c);
  if (s_.current[i] < bytes) throw std::logic_error("MemoryTracker: freeing more than allocated");
  s_.current[i] -= bytes;
  s_.current_total -= bytes;
}

void MemoryTracker::reset_peaks() {
  std::lock_guard<std::mutex> lock(mu_);
  s_.peak = s_.current;
  s_.peak_total = s_.current_total;
}

MemorySnapshot MemoryTracker::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return s_;
}

}  // namespace mpb
