// A process-wide cache of one library's plans per GPU. The runner makes a
// device per repeat (and each test and selftest its own), so plans owned by a
// device were rebuilt for every repeat; cuDNN SDPA graphs take ~0.1-1 s each
// to build. Here each device ordinal has one lazily made library handle and
// the plans built with it, kept until the process exits, so a later device
// of the same ordinal finds a shape's plan with one lookup.
//
// Handle: a movable RAII type, default-constructible as empty, whose
// explicit operator bool says it holds a handle. Plan: movable. The handle
// is made on the ordinal's first context() call; a failure is kept with its
// reason (the handle is not tried again, and `first` tells the caller when to
// print it). Plans are destroyed before the handle they were built with.
//
// Plain C++ (no CUDA header): tests/gpu/test_sdpa_policy.cpp proves it on
// the CPU with fake handles and plans. Not thread-safe: one thread drives
// the devices (the runner and the tests do).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

namespace mpb::cuda {

template <class Handle, class Key, class Plan, class Hash>
class OrdinalPlanCache {
 public:
  struct Context {
    Handle handle;        // empty when making it failed: `failure` says why
    std::string failure;
    // Declared after the handle, so destroyed before it. Node-based: a
    // plan's address never changes.
    std::unordered_map<Key, Plan, Hash> plans;
  };

  OrdinalPlanCache() = default;
  OrdinalPlanCache(const OrdinalPlanCache&) = delete;
  OrdinalPlanCache& operator=(const OrdinalPlanCache&) = delete;
  ~OrdinalPlanCache() { clear(); }

  // The ordinal's context. Its first call makes the handle with
  // make(std::string* failure) -> Handle (empty on failure, with the reason
  // in *failure) and sets *first; later calls only look it up.
  template <class Make>
  Context& context(int ordinal, Make&& make, bool* first = nullptr) {
    if (first) *first = false;
    if (auto it = contexts_.find(ordinal); it != contexts_.end()) return it->second;
    Context& c = contexts_[ordinal];
    c.handle = make(&c.failure);
    if (!c.handle && c.failure.empty()) c.failure = "the library handle could not be made (no reason given)";
    if (first) *first = true;
    return c;
  }

  // A key's plan in c, or null (a miss: the caller builds and inserts it).
  static Plan* find(Context& c, const Key& k) {
    const auto it = c.plans.find(k);
    return it == c.plans.end() ? nullptr : &it->second;
  }
  static Plan& insert(Context& c, const Key& k, Plan plan) {
    return c.plans.insert_or_assign(k, std::move(plan)).first->second;
  }

  // Plans held, over every ordinal.
  size_t plans() const {
    size_t n = 0;
    for (const auto& [ordinal, c] : contexts_) n += c.plans.size();
    return n;
  }

  // Every ordinal's plans, then its handle. The destructor's order; for a
  // test, a fresh start.
  void clear() {
    for (auto& [ordinal, c] : contexts_) {
      c.plans.clear();
      c.handle = Handle{};
    }
    contexts_.clear();
  }

 private:
  std::map<int, Context> contexts_;  // node-based: a context's address never changes
};

}  // namespace mpb::cuda
