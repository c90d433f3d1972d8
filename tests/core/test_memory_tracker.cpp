// MemoryTracker and the Device::alloc / DeviceBuffer accounting built on it.
//
//  * current and peak bytes per category; frees lower current, never peak;
//  * peak_total is the peak of the SUM over categories, not the sum of the
//    per-category peaks (a sequence where the two differ);
//  * reset_peaks starts a new window from the current usage;
//  * freeing more than allocated throws (and changes nothing);
//  * concurrent alloc/free from several threads keeps the books straight;
//  * Device::alloc charges numel * dtype_size to the category; DeviceBuffer
//    is move-only RAII: moves transfer ownership and accounting (no double
//    free, no double count), release()/destruction returns usage to zero.
#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "core/device.h"
#include "core/memory_tracker.h"

namespace {

using namespace mpb;

size_t cur(const MemorySnapshot& s, MemCategory c) { return s.current[static_cast<size_t>(c)]; }
size_t peak(const MemorySnapshot& s, MemCategory c) { return s.peak[static_cast<size_t>(c)]; }

// Whether the snapshot's totals over all categories are these: now, and at the peak.
::testing::AssertionResult totals_are(const MemorySnapshot& s, size_t current_total, size_t peak_total) {
  if (s.current_total == current_total && s.peak_total == peak_total) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "current_total " << s.current_total << " (expected " << current_total
                                       << "), peak_total " << s.peak_total << " (expected " << peak_total << ")";
}

void expect_all_zero(const MemorySnapshot& s) {
  for (int i = 0; i < kMemCategoryCount; ++i) EXPECT_EQ(s.current[static_cast<size_t>(i)], 0u) << "category " << i;
  EXPECT_EQ(s.current_total, 0u);
}

TEST(MemoryTracker, StartsEmpty) {
  MemoryTracker t;
  const MemorySnapshot s = t.snapshot();
  expect_all_zero(s);
  for (int i = 0; i < kMemCategoryCount; ++i) EXPECT_EQ(s.peak[static_cast<size_t>(i)], 0u);
  EXPECT_EQ(s.peak_total, 0u);
}

TEST(MemoryTracker, CategoryNames) {
  EXPECT_STREQ(mem_category_name(MemCategory::Params), "params");
  EXPECT_STREQ(mem_category_name(MemCategory::Grads), "grads");
  EXPECT_STREQ(mem_category_name(MemCategory::Optimizer), "optimizer");
  EXPECT_STREQ(mem_category_name(MemCategory::Activations), "activations");
  EXPECT_STREQ(mem_category_name(MemCategory::Workspace), "workspace");
}

TEST(MemoryTracker, CurrentAndPeakPerCategory) {
  MemoryTracker t;
  t.on_alloc(MemCategory::Params, 100);
  t.on_alloc(MemCategory::Params, 50);
  t.on_alloc(MemCategory::Grads, 30);
  MemorySnapshot s = t.snapshot();
  EXPECT_EQ(cur(s, MemCategory::Params), 150u);
  EXPECT_EQ(cur(s, MemCategory::Grads), 30u);
  EXPECT_EQ(cur(s, MemCategory::Optimizer), 0u);
  EXPECT_EQ(peak(s, MemCategory::Params), 150u);
  EXPECT_TRUE(totals_are(s, 180u, 180u));

  // A free lowers current, not peak.
  t.on_free(MemCategory::Params, 100);
  s = t.snapshot();
  EXPECT_EQ(cur(s, MemCategory::Params), 50u);
  EXPECT_EQ(peak(s, MemCategory::Params), 150u);
  EXPECT_TRUE(totals_are(s, 80u, 180u));

  // Growing again below the old peak leaves the peak alone; above it raises it.
  t.on_alloc(MemCategory::Params, 60);
  EXPECT_EQ(peak(t.snapshot(), MemCategory::Params), 150u);
  t.on_alloc(MemCategory::Params, 60);
  s = t.snapshot();
  EXPECT_EQ(cur(s, MemCategory::Params), 170u);
  EXPECT_EQ(peak(s, MemCategory::Params), 170u);
  EXPECT_EQ(s.peak_total, 200u);  // 170 + 30
}

TEST(MemoryTracker, PeakTotalIsPeakOfSumNotSumOfPeaks) {
  MemoryTracker t;
  // Activations peak at 1000 during "forward", are freed, then gradients and
  // workspace peak later: the category peaks never coincide in time.
  t.on_alloc(MemCategory::Params, 100);
  t.on_alloc(MemCategory::Activations, 1000);  // total 1100
  t.on_free(MemCategory::Activations, 1000);   // total 100
  t.on_alloc(MemCategory::Grads, 400);         // total 500
  t.on_alloc(MemCategory::Workspace, 300);     // total 800
  t.on_free(MemCategory::Workspace, 300);      // total 500
  const MemorySnapshot s = t.snapshot();
  EXPECT_EQ(peak(s, MemCategory::Params), 100u);
  EXPECT_EQ(peak(s, MemCategory::Activations), 1000u);
  EXPECT_EQ(peak(s, MemCategory::Grads), 400u);
  EXPECT_EQ(peak(s, MemCategory::Workspace), 300u);
  size_t sum_of_peaks = 0;
  for (size_t p : s.peak) sum_of_peaks += p;
  EXPECT_EQ(sum_of_peaks, 1800u);
  EXPECT_EQ(s.peak_total, 1100u);  // the largest simultaneous total
  EXPECT_LT(s.peak_total, sum_of_peaks);
  EXPECT_EQ(s.current_total, 500u);
}

TEST(MemoryTracker, ResetPeaksStartsFromCurrent) {
  MemoryTracker t;
  t.on_alloc(MemCategory::Activations, 1000);
  t.on_alloc(MemCategory::Params, 100);
  t.on_free(MemCategory::Activations, 800);
  t.reset_peaks();
  MemorySnapshot s = t.snapshot();
  EXPECT_EQ(peak(s, MemCategory::Activations), 200u);
  EXPECT_EQ(peak(s, MemCategory::Params), 100u);
  EXPECT_EQ(peak(s, MemCategory::Grads), 0u);
  EXPECT_TRUE(totals_are(s, 300u, 300u));
  // The new window records only what happens after the reset.
  t.on_alloc(MemCategory::Activations, 50);
  t.on_free(MemCategory::Activations, 250);
  s = t.snapshot();
  EXPECT_EQ(peak(s, MemCategory::Activations), 250u);
  EXPECT_EQ(cur(s, MemCategory::Activations), 0u);
  EXPECT_TRUE(totals_are(s, 100u, 350u));
}

TEST(MemoryTracker, FreeingMoreThanAllocatedThrows) {
  MemoryTracker t;
  EXPECT_THROW(t.on_free(MemCategory::Params, 1), std::logic_error);
  t.on_alloc(MemCategory::Params, 10);
  t.on_alloc(MemCategory::Grads, 100);
  // More than this category holds, though less than the total: still an error.
  EXPECT_THROW(t.on_free(MemCategory::Params, 11), std::logic_error);
  const MemorySnapshot s = t.snapshot();  // and nothing changed
  EXPECT_EQ(cur(s, MemCategory::Params), 10u);
  EXPECT_EQ(cur(s, MemCategory::Grads), 100u);
  EXPECT_EQ(s.current_total, 110u);
  t.on_free(MemCategory::Params, 10);
  t.on_free(MemCategory::Grads, 100);
  expect_all_zero(t.snapshot());
}

TEST(MemoryTracker, ConcurrentUpdatesBalance) {
  MemoryTracker t;
  constexpr int kThreads = 4, kIters = 20'000;
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&t, th] {
      const auto c = static_cast<MemCategory>(th % kMemCategoryCount);
      for (int i = 0; i < kIters; ++i) {
        t.on_alloc(c, 64);
        t.on_free(c, 64);
      }
    });
  }
  for (auto& th : threads) th.join();
  const MemorySnapshot s = t.snapshot();
  expect_all_zero(s);
  // Each thread holds at most 64 bytes at a time.
  EXPECT_GE(s.peak_total, 64u);
  EXPECT_LE(s.peak_total, 64u * kThreads);
}

// ---------------------------------------------------------------------------------
TEST(DeviceMemory, AllocChargesCategoryAndReleaseReturnsToZero) {
  auto dev = make_cpu_device();
  expect_all_zero(dev->memory().snapshot());
  {
    DeviceBuffer w = dev->alloc(Shape{10, 10}, DType::F32, MemCategory::Params);   // 400 B
    DeviceBuffer g = dev->alloc(Shape{10, 10}, DType::BF16, MemCategory::Grads);   // 200 B
    DeviceBuffer m = dev->alloc(Shape{3, 7}, DType::F16, MemCategory::Optimizer);  // 42 B
    DeviceBuffer y = dev->alloc(Shape{2, 3, 5}, DType::I32, MemCategory::Activations);  // 120 B
    EXPECT_EQ(w.bytes(), 400u);
    EXPECT_EQ(g.bytes(), 200u);
    EXPECT_EQ(m.bytes(), 42u);
    EXPECT_EQ(y.bytes(), 120u);
    EXPECT_EQ(w.category(), MemCategory::Params);
    EXPECT_FALSE(w.empty());
    // (Compared dimension by dimension: Shape::operator== also compares the
    // unused trailing dims, which GCC 12 -march=native can fill with garbage
    // when a Shape{10, 10} is passed by value.)
    EXPECT_EQ(w.tensor().shape.ndim, 2);
    EXPECT_EQ(w.tensor().shape[0], 10);
    EXPECT_EQ(w.tensor().shape[1], 10);
    EXPECT_EQ(g.tensor().dtype, DType::BF16);
    MemorySnapshot s = dev->memory().snapshot();
    EXPECT_EQ(cur(s, MemCategory::Params), 400u);
    EXPECT_EQ(cur(s, MemCategory::Grads), 200u);
    EXPECT_EQ(cur(s, MemCategory::Optimizer), 42u);
    EXPECT_EQ(cur(s, MemCategory::Activations), 120u);
    EXPECT_TRUE(totals_are(s, 762u, 762u));

    y.release();  // explicit release: accounted once, buffer becomes empty
    EXPECT_TRUE(y.empty());
    EXPECT_EQ(y.bytes(), 0u);
    y.release();  // idempotent
    s = dev->memory().snapshot();
    EXPECT_EQ(cur(s, MemCategory::Activations), 0u);
    EXPECT_EQ(peak(s, MemCategory::Activations), 120u);
    EXPECT_TRUE(totals_are(s, 642u, 762u));
  }  // destructors free the rest
  const MemorySnapshot s = dev->memory().snapshot();
  expect_all_zero(s);
  EXPECT_EQ(s.peak_total, 762u);
}

TEST(DeviceMemory, EmptyAllocationThrows) {
  auto dev = make_cpu_device();
  EXPECT_THROW(dev->alloc(Shape{}, DType::F32, MemCategory::Params), DeviceError);
  EXPECT_THROW(dev->alloc(Shape{0, 5}, DType::F32, MemCategory::Params), DeviceError);
  expect_all_zero(dev->memory().snapshot());
}

TEST(DeviceMemory, MoveTransfersOwnershipAndAccounting) {
  auto dev = make_cpu_device();
  DeviceBuffer a = dev->alloc(Shape{256}, DType::F32, MemCategory::Activations);  // 1024 B
  void* const data = a.tensor().data;

  // Move construction: the target owns the memory, the source is empty, the
  // bytes are counted once.
  DeviceBuffer b(std::move(a));
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_EQ(a.bytes(), 0u);
  EXPECT_EQ(b.tensor().data, data);
  EXPECT_EQ(b.bytes(), 1024u);
  EXPECT_EQ(b.category(), MemCategory::Activations);
  EXPECT_EQ(cur(dev->memory().snapshot(), MemCategory::Activations), 1024u);
  a.release();  // releasing the moved-from buffer frees nothing
  EXPECT_EQ(cur(dev->memory().snapshot(), MemCategory::Activations), 1024u);

  // Move assignment into a buffer that owns memory of another category frees
  // that memory first and takes over the category.
  DeviceBuffer c = dev->alloc(Shape{100}, DType::F16, MemCategory::Workspace);  // 200 B
  EXPECT_EQ(cur(dev->memory().snapshot(), MemCategory::Workspace), 200u);
  c = std::move(b);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(c.tensor().data, data);
  EXPECT_EQ(c.category(), MemCategory::Activations);
  MemorySnapshot s = dev->memory().snapshot();
  EXPECT_EQ(cur(s, MemCategory::Workspace), 0u);
  EXPECT_EQ(cur(s, MemCategory::Activations), 1024u);
  EXPECT_EQ(s.current_total, 1024u);

  // Self-move-assignment keeps the buffer.
  DeviceBuffer& alias = c;
  c = std::move(alias);
  EXPECT_EQ(c.tensor().data, data);
  EXPECT_EQ(dev->memory().snapshot().current_total, 1024u);

  // Buffers in a vector survive reallocation (moves) without double frees.
  std::vector<DeviceBuffer> v;
  for (int i = 0; i < 20; ++i) v.push_back(dev->alloc(Shape{16}, DType::F32, MemCategory::Grads));
  EXPECT_EQ(cur(dev->memory().snapshot(), MemCategory::Grads), 20u * 64u);
  v.erase(v.begin(), v.begin() + 5);
  EXPECT_EQ(cur(dev->memory().snapshot(), MemCategory::Grads), 15u * 64u);
  v.clear();
  c.release();
  s = dev->memory().snapshot();
  expect_all_zero(s);
  EXPECT_EQ(peak(s, MemCategory::Grads), 20u * 64u);
}

TEST(DeviceMemory, ResetPeaksThroughDevice) {
  auto dev = make_cpu_device();
  DeviceBuffer keep = dev->alloc(Shape{100}, DType::F32, MemCategory::Params);  // 400
  {
    DeviceBuffer tmp = dev->alloc(Shape{1000}, DType::F32, MemCategory::Activations);  // 4000
  }
  EXPECT_EQ(dev->memory().snapshot().peak_total, 4400u);
  dev->memory().reset_peaks();
  MemorySnapshot s = dev->memory().snapshot();
  EXPECT_EQ(s.peak_total, 400u);
  EXPECT_EQ(peak(s, MemCategory::Activations), 0u);
  {
    DeviceBuffer tmp = dev->alloc(Shape{10}, DType::F32, MemCategory::Activations);  // 40
  }
  s = dev->memory().snapshot();
  EXPECT_EQ(s.peak_total, 440u);
  EXPECT_EQ(peak(s, MemCategory::Activations), 40u);
}

}  // namespace
